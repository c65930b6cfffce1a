// Block-scaled z with column-wise data (MXFP8, NVFP4): the forward over tiles of 32 rows,
// writing both the row-wise output (1x32 / 1x16 blocks along a row) and the column-wise one
// (32x1 / 16x1 blocks down a column), each with its scales, in one kernel. Two kernels share
// the output stage here (mx_tile_output):
//   norm_fwd_mx_cluster_kernel (norm_fwd_mx_cluster.cuh): the tile held on chip, its columns
//     split over a cluster; x read once. Used wherever the tile fits.
//   norm_fwd_mx_tile_kernel (below): the fallback for rows too long for that (and AMD beyond
//     its shared memory): the tile's rows read for their statistics, then again for the
//     output (from L2 when the tile is recent, else from memory).
//
// The streamed kernel: a CTA of kMxTileThreads threads takes one tile of 32 rows (grid.x)
// and a range of its columns (grid.y: column splits, when there are too few tiles to fill
// the device).
//   Statistics: warp-sized lane group w (of 8) reduces rows 4w..4w+3 of the tile, each row
//   read whole by its 32 lanes (every split reads the whole rows: the statistics need them);
//   mu and rsigma are written by split 0. The fused add has one split (the launcher's rule):
//   its CTA writes residual_out = x + residual here and reads that sum back for the output
//   (residual_out may be residual itself, so the output cannot add them again). A lane sums
//   its vectors in runs of kMxRun (loads in flight together) merged into a running total, so
//   that no fp32 sum runs over more than a run (LayerNorm's mean of long rows stays exact to
//   a few ulp).
// The output stage (mx_tile_output): warp-local strips of 32 rows x 16 vectors, a column of
// 16 rows per lane, each value computed twice (row-wise, then column-wise output), no CTA barrier. Rows
// past the last one count as absent: they enter no block's max and are not written, so the
// last tile's column blocks cover the rows that exist (NVFP4: rows are a multiple of 16, a
// half is there or not).
// Both outputs are scaled and rounded exactly as the row-wise kernels do (block_quant.cuh):
//   MXFP8: E = e8m0(amax / fp8_max) rounded up, codes = fp8(value * 2^(127 - E)), NaN
//     ignored by amax; the column-wise data [rows, hidden] as the row-wise.
//   NVFP4: an E4M3 scale per block from its amax and the encode scale (the row-wise global
//     amax for rows, the column-wise one for columns), e2m1 codes; the column-wise data is
//     the transpose [hidden, rows] (block_scale.h): a lane packs a column's 16 rows of a
//     block into 8 bytes, one store.
// (The row statistics are summed in another order than the row-wise-only kernel's, so a
// row-wise code may differ in its last bit depending on whether column-wise data is asked
// for; each is within the reference's rounding.)
#pragma once

#include "kernels/block_quant.cuh"
#include "kernels/mx_scale.h"
#include "kernels/norm_fwd.cuh"

namespace normtune {

inline constexpr int kMxTileThreads = 256;
inline constexpr int kMxTileLanes = 32;                               // lanes of a warp
inline constexpr int kMxStripVecs = 16;                               // vectors of an output strip
inline constexpr int kMxTileGroups = kMxTileThreads / kMxTileLanes;   // 8
inline constexpr int kMxTileRowsPerGroup = kMxBlock / kMxTileGroups;  // 4
inline constexpr int kMxRun = 8;                                      // vectors per partial sum

// The formats a tile kernel writes, and their shape within a tile.
template <typename Traits>
struct MxTileFormat {
  static constexpr ScalingMode kMode = Traits::kScaling;
  static_assert(has_colwise_format(kMode), "the row-tile kernels write MXFP8 or NVFP4 z with column-wise data");
  static constexpr bool kNvfp4 = kMode == ScalingMode::kNvfp4_1D;
  static constexpr int kBlock = block_elements(kMode);                  // a row block's elements, a column block's rows
  static constexpr int kColBlocks = kMxBlock / kBlock;                  // column blocks of a tile's column: 1 or 2
  static constexpr int kVec = 16 / sizeof(typename Traits::Input);
};

// What the output stage reads in shared memory: the row statistics of up to kMxMaxTiles
// tiles; NVFP4: the multipliers of every E4M3 scale code for the row-wise and the column-wise
// encode scales (BlockQuantizer's table).
inline constexpr int kMxMaxTiles = 8;
template <typename Traits>
struct MxTileSmem {
  using F = MxTileFormat<Traits>;
  static constexpr int kTable = F::kNvfp4 ? kNvfp4ScaleCodes : 1;
  float row_mean[kMxMaxTiles * kMxBlock], row_rsigma[kMxMaxTiles * kMxBlock];
  float row_table[kTable], col_table[kTable];
};

// NVFP4: the tables (every thread of the CTA, after wait_for_prior_grid: they read the global
// amaxes; a CTA barrier before mx_tile_output publishes them).
template <typename Traits>
__device__ __forceinline__ void mx_tile_fill_tables(const FwdParams& p, MxTileSmem<Traits>& s) {
  if constexpr (MxTileFormat<Traits>::kNvfp4) {
    BlockQuantizer<Traits>::fill_table(p.global_amax, s.row_table);
    BlockQuantizer<Traits>::fill_table(p.colwise_global_amax, s.col_table);
  }
}

// The row statistics of the tile: thread `lane` of row `local`'s group writes them to shared
// memory (and split/rank 0 to mu and rsigma). `part` is the row's reduced partial: RMSNorm
// {sum x^2}, LayerNorm {count, mean, M2}.
template <bool kRms, int K, typename Smem>
__device__ __forceinline__ void mx_tile_set_stats(const FwdParams& p, Smem& s, int local, int64_t row,
                                                  const Floats<K>& part, bool write) {
  const float mean = kRms ? 0.f : part.v[K == 3 ? 1 : 0];
  const float rsigma = rsqrtf(part.v[K - 1] * (1.f / static_cast<float>(p.hidden)) + p.epsilon);
  s.row_mean[local] = mean;
  s.row_rsigma[local] = row < p.rows ? rsigma : 0.f;
  if (write && row < p.rows) {
    p.rsigma[row] = rsigma;
    if constexpr (!kRms) p.mu[row] = mean;
  }
}

// Both outputs of `tiles` tiles of 32 rows from row0 on (rows past the last one absent) over
// the rows' vectors [v_begin, v_end) (both at row-block boundaries), from the statistics in
// `s` (row t * 32 + r of the call at index t * 32 + r); the input (x, or the sum of the fused
// add) of row `local` of the call at in + local * stride elements, vector v of it kVec * v
// elements on (in shared or global memory). Every warp of the CTA calls it, and no CTA
// barrier is inside: warp w takes the strips w, w + 8, ... of 32 rows x kMxStripVecs vectors
// (tile, chunk of the vectors); lane l = 16h + j holds vector j of the strip for the 16 rows
// of half h, so that a row block is (block / kVec) adjacent lanes (shuffles) and a column
// block one lane's rows (NVFP4: 16) or a lane's and the lane 16 away's (MXFP8: 32).
//   Pass 1, row by row: the values, the row block's max and scale, its codes; the column
//     maxima in registers.
//   Then each column block's scale and multiplier (kVec per lane).
//   Pass 2, the values again (fetched again: a shared-memory read in the kernel that holds
//     the tile), the column-wise codes: MXFP8 a row of them per lane and row (z's layout);
//     NVFP4 (the transpose) a column's 16 rows gathered in two 32-bit words, four rows at a
//     time, then one 8-byte store per column.
// Addresses step by a row's stride from the strip's first row (no 64-bit product per row).
template <typename Traits>
__device__ __forceinline__ void mx_tile_output(const FwdParams& p, int64_t row0, int tiles, int v_begin, int v_end,
                                               const MxTileSmem<Traits>& s, const typename Traits::Input* in,
                                               int64_t stride) {
  using I = typename Traits::Input;
  using W = typename Traits::Weight;
  using O = typename Traits::Output;
  using F = MxTileFormat<Traits>;
  using Quant = BlockQuantizer<Traits>;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr int kVec = F::kVec;
  constexpr int kGroup = F::kBlock / kVec;  // lanes per row block
  constexpr int kHalf = kMxBlock / 2;       // rows of a lane
  static_assert(kGroup <= kMxStripVecs && kMxStripVecs * 2 == kMxTileLanes, "a row block within a half-warp");
  using VW = Vec<W, kVec>;
  using VI = Vec<I, kVec>;
  const int64_t hidden = p.hidden;
  const int lane = static_cast<int>(threadIdx.x) % kMxTileLanes;
  const int warp = static_cast<int>(threadIdx.x) / kMxTileLanes;
  const int j = lane % kMxStripVecs, h = lane / kMxStripVecs;
  const float gamma_shift = p.zero_centered_gamma ? 1.f : 0.f;
  const Quant quant(p, s.row_table);
  const Quant col_quant(p.colwise_global_amax, s.col_table);  // (MXFP8: no global amax)
  // The next row's scale (the same 32-row group of the swizzled layout).
  const int64_t row_step = p.swizzled_scales ? 16 : block_scale_cols(F::kMode, p.rows, hidden);
  const int chunks = (v_end - v_begin + kMxStripVecs - 1) / kMxStripVecs;
#pragma unroll 1
  for (int strip = warp; strip < tiles * chunks; strip += kMxTileGroups) {
    const int t = strip / chunks;
    const int v = v_begin + (strip - t * chunks) * kMxStripVecs + j;
    const int64_t trow0 = row0 + int64_t{t} * kMxBlock;
    const int nrows = static_cast<int>(p.rows - trow0 < kMxBlock ? p.rows - trow0 : kMxBlock);
    if (nrows <= 0) break;  // (warp-uniform; later strips are later tiles)
    const bool col_ok = v < v_end;  // a whole row block is in or out
    const int mine = min(max(nrows - h * kHalf, 0), kHalf);  // this lane's rows
    const int first = t * kMxBlock + h * kHalf;                // its first, as the statistics count
    const int64_t col = static_cast<int64_t>(v) * kVec;
    float gs[kVec], bs[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) gs[k] = bs[k] = 0.f;
    if (col_ok) {
      VW g, b;
      g.load(static_cast<const W*>(p.gamma) + col);
      if constexpr (!kRms) b.load(static_cast<const W*>(p.beta) + col);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        gs[k] = to_float(g.v[k]) + gamma_shift;
        bs[k] = kRms ? 0.f : to_float(b.v[k]);
      }
    }
    // The values of this lane's row i (zeros where there is none).
    const I* src = in + first * stride + col;
    const float* means = s.row_mean + first;
    const float* rsigmas = s.row_rsigma + first;
    auto values = [&](int i, bool ok, float (&y)[kVec]) {
      if (ok) {
        float x[kVec];
        VI xv;
        xv.load(src + i * stride);
        unpack_floats(xv, x);
        const NormValue<kRms, false> norm(kRms ? 0.f : means[i], rsigmas[i]);  // (gs: shifted)
#pragma unroll
        for (int k = 0; k < kVec; ++k) y[k] = norm(x[k], gs[k], bs[k]);
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) y[k] = 0.f;
      }
    };

    // Pass 1: the row-wise output; the column maxima. Every lane runs every step (the
    // shuffles); rows past the last one are zeros and not written.
    uint8_t* scale = p.block_scales +
                     (col_ok ? block_scale_offset(F::kMode, trow0 + h * kHalf, v / kGroup, p.rows, hidden, p.swizzled_scales) : 0);
    int64_t elem = (trow0 + h * kHalf) * hidden + col;
    float cmax[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) cmax[k] = 0.f;
#pragma unroll 2
    for (int i = 0; i < kHalf; ++i, elem += hidden, scale += row_step) {
      const bool ok = col_ok && i < mine;
      float y[kVec];
      values(i, ok, y);
      float amax = 0.f;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float a = fabsf(y[k]);
        amax = fmaxf(amax, a);
        cmax[k] = fmaxf(cmax[k], a);
      }
#pragma unroll
      for (int m = 1; m < kGroup; m *= 2) amax = fmaxf(amax, platform::shfl_xor(amax, m));
      const float mult = quant.block(scale, amax, 0, ok && j % kGroup == 0);
      if (ok) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) y[k] *= mult;
        Quant::store_codes(y, p.z, elem);
      }
    }
    // Each column block's scale (written once) and multiplier.
    float cinv[kVec];
    if constexpr (F::kNvfp4) {
      const int64_t rb = trow0 / F::kBlock + h;  // this half's column block
      const bool there = col_ok && mine > 0;     // (NVFP4: rows are a multiple of 16)
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const int64_t at = there ? nvfp4_colwise_scale_offset(rb, col + k, p.rows, hidden, p.swizzled_scales) : 0;
        cinv[k] = col_quant.block(p.colwise_block_scales, cmax[k], at, there);
      }
    } else {
      const int64_t rb = trow0 / F::kBlock;
      const bool write = col_ok && h == 0;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        cmax[k] = fmaxf(cmax[k], platform::shfl_xor(cmax[k], kMxStripVecs));  // both halves' rows
        const int64_t at = write ? mx_colwise_scale_offset(rb, col + k, p.rows, hidden, p.swizzled_scales) : 0;
        cinv[k] = col_quant.block(p.colwise_block_scales, cmax[k], at, write);
      }
    }
    // Pass 2: the column-wise output.
    if (!col_ok || mine == 0) continue;
    if constexpr (F::kNvfp4) {
      uint32_t words[kVec][2];  // column k: rows 0-7 of the block, rows 8-15; row i in nibble i % 8
#pragma unroll
      for (int q = 0; q < kHalf / 4; ++q) {
        float y[4][kVec];
#pragma unroll
        for (int r = 0; r < 4; ++r) values(q * 4 + r, true, y[r]);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          float a[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) a[r] = y[r][k] * cinv[k];
          const uint32_t bits = fp4e2m1_codes</*kCanonicalNan=*/true>(a);
          if (q % 2 == 0) {
            words[k][q / 2] = bits;
          } else {
            words[k][q / 2] |= bits << 16;
          }
        }
      }
      const int64_t half_rows = p.rows / 2;  // bytes per column of z
      uint8_t* zc = static_cast<uint8_t*>(p.z_colwise) + col * half_rows + (trow0 + h * kHalf) / 2;
#pragma unroll
      for (int k = 0; k < kVec; ++k, zc += half_rows) {
        *reinterpret_cast<uint2*>(zc) = make_uint2(words[k][0], words[k][1]);
      }
    } else {
      O* zc = static_cast<O*>(p.z_colwise) + (trow0 + h * kHalf) * hidden + col;
#pragma unroll 2
      for (int i = 0; i < mine; ++i, zc += hidden) {
        float y[kVec];
        values(i, true, y);
#pragma unroll
        for (int k = 0; k < kVec; ++k) y[k] *= cinv[k];
        store_floats(y, zc);
      }
    }
  }
}

template <typename Traits>
__global__ void __launch_bounds__(kMxTileThreads, 2) norm_fwd_mx_tile_kernel(const FwdParams p) {
  using I = typename Traits::Input;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr bool kAdd = Traits::kResidualAdd;
  constexpr int kVec = 16 / sizeof(I);
  constexpr int K = kRms ? 1 : 3;
  constexpr int R = kMxTileRowsPerGroup;
  using VI = Vec<I, kVec>;

  __shared__ ReduceSmem<K> smem;  // (group_reduce within 32 lanes does not touch it)
  __shared__ MxTileSmem<Traits> s;
  int phase = 0;

  const int hidden = p.hidden;
  const int nvec = hidden / kVec;
  const int lane = static_cast<int>(threadIdx.x) % kMxTileLanes;
  const int group = static_cast<int>(threadIdx.x) / kMxTileLanes;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kMxBlock;
  const bool first_split = blockIdx.y == 0;

  platform::wait_for_prior_grid();
  mx_tile_fill_tables<Traits>(p, s);

  // Statistics of the tile's rows: runs of kMxRun vectors per lane, merged into the total.
#pragma unroll 1
  for (int j = 0; j < R; ++j) {
    const int local = group * R + j;
    const int64_t row = row0 + local;
    Floats<K> total{};
    if (row < p.rows) {
#pragma unroll 1
      for (int v0 = lane; v0 < nvec; v0 += kMxTileLanes * kMxRun) {
        VI in[kMxRun];
#pragma unroll
        for (int i = 0; i < kMxRun; ++i) {
          const int v = v0 + i * kMxTileLanes;
          if (v < nvec) load_input<I, kVec, kAdd>(p, row * hidden + static_cast<int64_t>(v) * kVec, in[i], first_split);
        }
        RowStats<kRms> run;
#pragma unroll
        for (int i = 0; i < kMxRun; ++i) {
          if (v0 + i * kMxTileLanes < nvec) run.add(in[i]);
        }
        if constexpr (kRms) {
          total.v[0] += run.a;
        } else {
          total = MeanVarOp{}(total, run.to_mean_var());
        }
      }
    }
    Floats<K> part;
    if constexpr (kRms) {
      part = group_reduce(total, AddOp{}, kMxTileLanes, 1, smem, phase);
    } else {
      part = group_reduce(total, MeanVarOp{}, kMxTileLanes, 1, smem, phase);
    }
    if (lane == 0) mx_tile_set_stats<kRms>(p, s, local, row, part, first_split);
  }
  __syncthreads();

  // The output over this split's columns (chunks of 32 vectors), the input read again.
  const int chunks = (nvec + kMxTileLanes - 1) / kMxTileLanes;
  const int per_split = (chunks + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y);
  const int v_begin = min(nvec, static_cast<int>(blockIdx.y) * per_split * kMxTileLanes);
  const int v_end = min(nvec, (static_cast<int>(blockIdx.y) + 1) * per_split * kMxTileLanes);
  mx_tile_output<Traits>(p, row0, 1, v_begin, v_end, s,
                         static_cast<const I*>(kAdd ? p.residual_out : p.x) + row0 * hidden, hidden);
  platform::allow_dependent_grid();
}

}  // namespace normtune
