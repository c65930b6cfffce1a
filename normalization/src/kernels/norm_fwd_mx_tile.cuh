// MXFP8 z with column-wise data: the forward over tiles of 32 rows, writing both the
// row-wise output (1x32 blocks along a row) and the column-wise one (32x1 blocks down a
// column), each with its E8M0 scales (kernels/mx_scale.h), in one kernel. Two kernels share
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
// the chunk for rows 4w..4w+3. A row block is kMxBlock / kVec adjacent lanes (shuffles); a
// column block is the 32 rows of the tile, combined over the 8 groups through shared memory.
// Rows past the last one count as absent: they enter no block's max and are not written, so
// the last tile's column blocks cover the rows that exist.
// Both outputs are scaled and rounded exactly as the row-wise kernel does (mx_scale.h):
// E = e8m0(amax / fp8_max) rounded up, codes = fp8(value * 2^(127 - E)), NaN ignored by amax.
// (The row statistics are summed in another order than the row-wise-only kernel's, so a
// row-wise code may differ in its last bit depending on whether column-wise data is asked
// for; each is within the reference's rounding.)
#pragma once

#include "kernels/mx_scale.h"
#include "kernels/norm_fwd.cuh"

namespace normtune {

inline constexpr int kMxTileThreads = 256;
inline constexpr int kMxTileLanes = 32;                               // vectors of a chunk
inline constexpr int kMxTileGroups = kMxTileThreads / kMxTileLanes;   // 8
inline constexpr int kMxTileRowsPerGroup = kMxBlock / kMxTileGroups;  // 4
inline constexpr int kMxRun = 8;                                      // vectors per partial sum

// What the output stage reads and writes in shared memory: the tile's row statistics, each
// group's column maxima of a chunk and the chunk's column scales as 2^(127 - E)
// (lane-minor: no bank conflicts).
template <int kVec>
struct MxTileSmem {
  float row_mean[kMxBlock], row_rsigma[kMxBlock];
  float col_max[kMxTileGroups][kVec][kMxTileLanes];
  float col_inv[kVec][kMxTileLanes];
};

// The row statistics of the tile: thread `lane` of row `local`'s group writes them to shared
// memory (and split/rank 0 to mu and rsigma). `part` is the row's reduced partial: RMSNorm
// {sum x^2}, LayerNorm {count, mean, M2}.
template <bool kRms, int K, int kVec>
__device__ __forceinline__ void mx_tile_set_stats(const FwdParams& p, MxTileSmem<kVec>& s, int local, int64_t row,
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

// Both MXFP8 outputs of the tile's rows [row0, row0 + 32) over the row's vectors [v_begin,
// v_end) (both at block boundaries), from the statistics in `s`; fetch(local_row, v) gives
// the input vector (x, or the sum of the fused add). Every thread of the CTA calls it.
// Per chunk, what is per column or per block is computed once: gamma (+ the zero-centered
// shift) per column, a row block's scale by each of its lanes, a column's scale by one group
// (group k takes element k of the lanes' vectors) and shared through shared memory; the
// scale offsets of a group's rows are one offset plus a stride.
template <typename Traits, typename Fetch>
__device__ __forceinline__ void mx_tile_output(const FwdParams& p, int64_t row0, int v_begin, int v_end,
                                               MxTileSmem<16 / sizeof(typename Traits::Input)>& s, Fetch fetch) {
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  using O = typename Traits::Output;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr int kVec = 16 / sizeof(I);
  constexpr int kGroup = kMxBlock / kVec;  // lanes per row block
  constexpr int R = kMxTileRowsPerGroup;
  static_assert(kVec <= kMxTileGroups, "a group per element of a vector (the column scales)");
  using VW = Vec<W, kVec>;
  const int64_t hidden = p.hidden;
  const int lane = static_cast<int>(threadIdx.x) % kMxTileLanes;
  const int group = static_cast<int>(threadIdx.x) / kMxTileLanes;
  const float gamma_shift = p.zero_centered_gamma ? 1.f : 0.f;
  const float max_code = fp8_max(Elem<O>::kDType);
  const int64_t row_step = p.swizzled_scales ? 16 : mx_scale_cols(hidden);  // next row's scale (same 32-row group)
  O* z = static_cast<O*>(p.z);
  O* zc = static_cast<O*>(p.z_colwise);
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
    const int64_t scale_at = col_ok ? mx_scale_offset(first_row, v / kGroup, hidden, p.swizzled_scales) : 0;
    float y[R][kVec];  // (rows past the last one: never read)
    float cmax[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) cmax[k] = 0.f;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int local = group * R + j;
      const int64_t row = first_row + j;
      const bool ok = col_ok && row < p.rows;
      float amax = 0.f;
      if (ok) {
        float x[kVec];
        unpack_floats(fetch(local, v), x);
        const float mean = kRms ? 0.f : s.row_mean[local], rsigma = s.row_rsigma[local];
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if constexpr (kRms) {
            y[j][k] = x[k] * rsigma * gs[k];
          } else {
            y[j][k] = (x[k] - mean) * rsigma * gs[k] + bs[k];
          }
          const float a = fabsf(y[j][k]);
          amax = fmaxf(amax, a);
          cmax[k] = fmaxf(cmax[k], a);
        }
      }
      // Row-wise: the block's max over its kGroup lanes (every lane takes part).
#pragma unroll
      for (int m = 1; m < kGroup; m *= 2) amax = fmaxf(amax, platform::shfl_xor(amax, m));
      if (ok) {
        const uint8_t e = mx_scale_exponent(amax, max_code);
        const float inv = mx_inverse_scale(e);
        float scaled[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) scaled[k] = y[j][k] * inv;
        store_floats(scaled, z + row * hidden + col);
        if (lane % kGroup == 0) p.block_scales[scale_at + j * row_step] = e;
      }
    }
    // Column-wise: each column's max over the tile's 32 rows (8 groups x R); group k turns
    // element k's into its scale.
#pragma unroll
    for (int k = 0; k < kVec; ++k) s.col_max[group][k][lane] = cmax[k];
    __syncthreads();
    if (group < kVec) {
      float m = s.col_max[0][group][lane];
#pragma unroll
      for (int w = 1; w < kMxTileGroups; ++w) m = fmaxf(m, s.col_max[w][group][lane]);
      const uint8_t ce = mx_scale_exponent(m, max_code);
      s.col_inv[group][lane] = mx_inverse_scale(ce);
      if (col_ok) {
        p.colwise_block_scales[mx_colwise_scale_offset(row0 / kMxBlock, col + group, p.rows, hidden,
                                                       p.swizzled_scales)] = ce;
      }
    }
    __syncthreads();
    float cinv[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) cinv[k] = s.col_inv[k][lane];
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int64_t row = first_row + j;
      if (!col_ok || row >= p.rows) continue;
      float scaled[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) scaled[k] = y[j][k] * cinv[k];
      store_floats(scaled, zc + row * hidden + col);
    }
    // (The next chunk writes col_max after this chunk's second barrier, which follows every
    // read of it, and col_inv after its own first barrier, which follows every read above.)
  }
}

template <typename Traits>
__global__ void __launch_bounds__(kMxTileThreads, 2) norm_fwd_mx_tile_kernel(const FwdParams p) {
  static_assert(Traits::kMxfp8, "the row-tile kernel writes MXFP8 z");
  using I = typename Traits::Input;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr bool kAdd = Traits::kResidualAdd;
  constexpr int kVec = 16 / sizeof(I);
  constexpr int K = kRms ? 1 : 3;
  constexpr int R = kMxTileRowsPerGroup;
  using VI = Vec<I, kVec>;

  __shared__ ReduceSmem<K> smem;  // (group_reduce within 32 lanes does not touch it)
  __shared__ MxTileSmem<kVec> s;
  int phase = 0;

  const int hidden = p.hidden;
  const int nvec = hidden / kVec;
  const int lane = static_cast<int>(threadIdx.x) % kMxTileLanes;
  const int group = static_cast<int>(threadIdx.x) / kMxTileLanes;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kMxBlock;
  const bool first_split = blockIdx.y == 0;

  platform::wait_for_prior_grid();

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
