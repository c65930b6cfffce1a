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
// The output stage: the columns in chunks of 32 vectors. Lane l of group w holds vector l of
// the chunk for rows 4w..4w+3. A row block is (block / kVec) adjacent lanes (shuffles); a
// column block is the 32 rows of the tile (MXFP8), or each half of them (NVFP4: groups 0-3
// and 4-7), combined over its groups through shared memory. Rows past the last one count as
// absent: they enter no block's max and are not written, so the last tile's column blocks
// cover the rows that exist (NVFP4: rows are a multiple of 16, a half is there or not).
// Both outputs are scaled and rounded exactly as the row-wise kernels do (block_quant.cuh):
//   MXFP8: E = e8m0(amax / fp8_max) rounded up, codes = fp8(value * 2^(127 - E)), NaN
//     ignored by amax; the column-wise data [rows, hidden] as the row-wise.
//   NVFP4: an E4M3 scale per block from its amax and the encode scale (the row-wise global
//     amax for rows, the column-wise one for columns), e2m1 codes; the column-wise data is
//     the transpose [hidden, rows] (block_scale.h): a thread packs its 4 rows of a column
//     into 16 bits, the chunk's packed codes go through shared memory, and each column's
//     16 rows leave as one 8-byte store.
// (The row statistics are summed in another order than the row-wise-only kernel's, so a
// row-wise code may differ in its last bit depending on whether column-wise data is asked
// for; each is within the reference's rounding.)
#pragma once

#include "kernels/block_quant.cuh"
#include "kernels/mx_scale.h"
#include "kernels/norm_fwd.cuh"

namespace normtune {

inline constexpr int kMxTileThreads = 256;
inline constexpr int kMxTileLanes = 32;                               // vectors of a chunk
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
  static constexpr int kGroupsPerColBlock = kBlock / kMxTileRowsPerGroup;  // 8 or 4
  static constexpr int kVec = 16 / sizeof(typename Traits::Input);
  static constexpr int kChunkCols = kMxTileLanes * kVec;
};

// What the output stage reads and writes in shared memory: the tile's row statistics, each
// group's column maxima of a chunk and the chunk's column multipliers (lane-minor: no bank
// conflicts); NVFP4: the multipliers of every E4M3 scale code for the row-wise and the
// column-wise encode scales (BlockQuantizer's table), and the chunk's column-wise codes,
// [group][column], 4 rows' codes each.
template <typename Traits>
struct MxTileSmem {
  using F = MxTileFormat<Traits>;
  static constexpr int kTable = F::kNvfp4 ? kNvfp4ScaleCodes : 1;
  float row_mean[kMxBlock], row_rsigma[kMxBlock];
  float col_max[kMxTileGroups][F::kVec][kMxTileLanes];
  float col_inv[F::kColBlocks][F::kVec][kMxTileLanes];
  float row_table[kTable], col_table[kTable];
  alignas(16) uint16_t codes[F::kNvfp4 ? kMxTileGroups : 1][F::kNvfp4 ? F::kChunkCols : 1];
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

// Both outputs of the tile's rows [row0, row0 + 32) over the row's vectors [v_begin, v_end)
// (both at row-block boundaries), from the statistics in `s`; fetch(local_row, v) gives the
// input vector (x, or the sum of the fused add). Every thread of the CTA calls it.
// Per chunk, what is per column or per block is computed once: gamma (+ the zero-centered
// shift) per column, a row block's scale by each of its lanes, a column block's scale by one
// group (task q = column block b, element k of the lanes' vectors, taken by group q % 8) and
// shared through shared memory; the scale offsets of a group's rows are one offset plus a
// stride.
template <typename Traits, typename Fetch>
__device__ __forceinline__ void mx_tile_output(const FwdParams& p, int64_t row0, int v_begin, int v_end,
                                               MxTileSmem<Traits>& s, Fetch fetch) {
  using W = typename Traits::Weight;
  using O = typename Traits::Output;
  using F = MxTileFormat<Traits>;
  using Quant = BlockQuantizer<Traits>;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr int kVec = F::kVec;
  constexpr int kGroup = F::kBlock / kVec;  // lanes per row block
  constexpr int R = kMxTileRowsPerGroup;
  using VW = Vec<W, kVec>;
  const int64_t hidden = p.hidden;
  const int lane = static_cast<int>(threadIdx.x) % kMxTileLanes;
  const int group = static_cast<int>(threadIdx.x) / kMxTileLanes;
  const float gamma_shift = p.zero_centered_gamma ? 1.f : 0.f;
  const Quant quant(p, s.row_table);
  const Quant col_quant(p.colwise_global_amax, s.col_table);  // (MXFP8: no global amax)
  // The next row's scale (the same 32-row group of the swizzled layout).
  const int64_t row_step = p.swizzled_scales ? 16 : block_scale_cols(F::kMode, p.rows, hidden);
#pragma unroll 1
  for (int v0 = v_begin; v0 < v_end; v0 += kMxTileLanes) {
    const int v = v0 + lane;
    const bool col_ok = v < v_end;  // a whole row block is in or out
    const int64_t col = static_cast<int64_t>(v) * kVec;
    float gs[kVec], bs[kVec];
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
    const int64_t first_row = row0 + group * R;
    const int64_t scale_at =
        col_ok ? block_scale_offset(F::kMode, first_row, v / kGroup, p.rows, hidden, p.swizzled_scales) : 0;
    float y[R][kVec];  // (rows past the last one: zeros, never written out)
    float cmax[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) cmax[k] = 0.f;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int local = group * R + j;
      const int64_t row = first_row + j;
      const bool ok = col_ok && row < p.rows;
      float amax = 0.f;
#pragma unroll
      for (int k = 0; k < kVec; ++k) y[j][k] = 0.f;
      if (ok) {
        float x[kVec];
        unpack_floats(fetch(local, v), x);
        const NormValue<kRms, false> norm(kRms ? 0.f : s.row_mean[local], s.row_rsigma[local]);  // (gs: shifted)
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          y[j][k] = norm(x[k], gs[k], bs[k]);
          const float a = fabsf(y[j][k]);
          amax = fmaxf(amax, a);
          cmax[k] = fmaxf(cmax[k], a);
        }
      }
      // Row-wise: the block's max over its kGroup lanes (every lane takes part).
#pragma unroll
      for (int m = 1; m < kGroup; m *= 2) amax = fmaxf(amax, platform::shfl_xor(amax, m));
      const float mult = quant.block(p, amax, scale_at + j * row_step, ok && lane % kGroup == 0);
      if (ok) {
        float scaled[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) scaled[k] = y[j][k] * mult;
        Quant::store_codes(scaled, p.z, row * hidden + col);
      }
    }
    // Column-wise: each column block's max over its groups (R rows each); task q = (block b,
    // element k) turns it into the block's scale and multiplier.
#pragma unroll
    for (int k = 0; k < kVec; ++k) s.col_max[group][k][lane] = cmax[k];
    __syncthreads();
    for (int q = group; q < F::kColBlocks * kVec; q += kMxTileGroups) {
      const int b = q / kVec, k = q % kVec;
      float m = s.col_max[b * F::kGroupsPerColBlock][k][lane];
#pragma unroll
      for (int w = 1; w < F::kGroupsPerColBlock; ++w) m = fmaxf(m, s.col_max[b * F::kGroupsPerColBlock + w][k][lane]);
      const int64_t rb = row0 / F::kBlock + b;  // the column block's index down the column
      const bool there = col_ok && rb * F::kBlock < p.rows;
      const int64_t at = F::kNvfp4 ? nvfp4_colwise_scale_offset(rb, col + k, p.rows, hidden, p.swizzled_scales)
                                   : mx_colwise_scale_offset(rb, col + k, p.rows, hidden, p.swizzled_scales);
      s.col_inv[b][k][lane] = col_quant.block(p.colwise_block_scales, m, at, there);
    }
    __syncthreads();
    float cinv[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) cinv[k] = s.col_inv[group / F::kGroupsPerColBlock][k][lane];
    if constexpr (F::kNvfp4) {
      // The transpose: this thread's 4 rows of each of its columns as 16 bits (row 4w + j in
      // nibble j), to shared memory in one vector store; then each (column, column block) of
      // the chunk, 16 rows from 4 groups, leaves as 8 bytes (rows / 2 bytes per column of z).
      uint32_t words[kVec / 2];
#pragma unroll
      for (int k = 0; k < kVec; k += 2) {
        float a[R], c[R];
#pragma unroll
        for (int j = 0; j < R; ++j) {
          a[j] = y[j][k] * cinv[k];
          c[j] = y[j][k + 1] * cinv[k + 1];
        }
        words[k / 2] = fp4e2m1_codes</*kCanonicalNan=*/true>(a) | (fp4e2m1_codes</*kCanonicalNan=*/true>(c) << 16);
      }
      uint16_t* mine = &s.codes[group][lane * kVec];
      if constexpr (kVec == 8) {
        *reinterpret_cast<uint4*>(mine) = make_uint4(words[0], words[1], words[2], words[3]);
      } else {
        static_assert(kVec == 4, "4 or 8 elements per vector");
        *reinterpret_cast<uint2*>(mine) = make_uint2(words[0], words[1]);
      }
      __syncthreads();
      uint8_t* zc = static_cast<uint8_t*>(p.z_colwise);
      const int64_t col_end = static_cast<int64_t>(v_end) * kVec, col_begin = static_cast<int64_t>(v0) * kVec;
      const int64_t half_rows = p.rows / 2;  // bytes per column of z
      for (int q = static_cast<int>(threadIdx.x); q < F::kColBlocks * F::kChunkCols; q += kMxTileThreads) {
        const int cc = q % F::kChunkCols, b = q / F::kChunkCols;
        const int64_t c = col_begin + cc, r = row0 + b * F::kBlock;
        if (c >= col_end || r >= p.rows) continue;
        const int g = b * F::kGroupsPerColBlock;
        const uint2 w = make_uint2(s.codes[g][cc] | (static_cast<uint32_t>(s.codes[g + 1][cc]) << 16),
                                   s.codes[g + 2][cc] | (static_cast<uint32_t>(s.codes[g + 3][cc]) << 16));
        *reinterpret_cast<uint2*>(zc + c * half_rows + r / 2) = w;
      }
      // (The next chunk writes codes after its own second barrier, which every thread reaches
      // only after the reads above.)
    } else {
      O* zc = static_cast<O*>(p.z_colwise);
#pragma unroll
      for (int j = 0; j < R; ++j) {
        const int64_t row = first_row + j;
        if (!col_ok || row >= p.rows) continue;
        float scaled[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) scaled[k] = y[j][k] * cinv[k];
        store_floats(scaled, zc + row * hidden + col);
      }
    }
    // (The next chunk writes col_max after this chunk's second barrier, which follows every
    // read of it, and col_inv after its own first barrier, which follows every read above.)
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
  mx_tile_output<Traits>(p, row0, v_begin, v_end, s, [&](int local, int v) {
    VI in;
    reload_input<I, kVec, kAdd>(p, (row0 + local) * hidden + static_cast<int64_t>(v) * kVec, in);
    return in;
  });
  platform::allow_dependent_grid();
}

}  // namespace normtune
