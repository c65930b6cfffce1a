// MXFP8 z with column-wise data: the forward over tiles of 32 rows, writing both the
// row-wise output (1x32 blocks along a row) and the column-wise one (32x1 blocks down a
// column), each with its E8M0 scales (kernels/mx_scale.h), in one kernel.
//
// A CTA of kMxTileThreads threads takes one tile of 32 rows (grid.x) and a range of its
// columns (grid.y: column splits, when there are too few tiles to fill the device).
//   Statistics: warp-sized lane group w (of 8) reduces rows 4w..4w+3 of the tile, each row
//   read whole by its 32 lanes (every split reads the whole rows: the statistics need them);
//   mu and rsigma are written by split 0. The fused add has one split (the launcher's rule):
//   its CTA writes residual_out = x + residual here and reads that sum back for the output
//   (residual_out may be residual itself, so the output cannot add them again).
//   Output: the columns in chunks of 32 vectors. Lane l of group w holds vector l of the
//   chunk for rows 4w..4w+3, computed again from the input (a second read, from L2 when the
//   tile is recent). A row block is kMxBlock / kVec adjacent lanes (shuffles); a column block
//   is the 32 rows of the tile, combined over the 8 groups through shared memory. Rows past
//   the last one count as absent: they enter no block's max and are not written, so the
//   last tile's column blocks cover the rows that exist.
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

template <typename Traits>
__global__ void __launch_bounds__(kMxTileThreads, 2) norm_fwd_mx_tile_kernel(const FwdParams p) {
  static_assert(Traits::kMxfp8, "the row-tile kernel writes MXFP8 z");
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  using O = typename Traits::Output;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr bool kAdd = Traits::kResidualAdd;
  constexpr int kVec = 16 / sizeof(I);
  constexpr int kGroup = kMxBlock / kVec;  // lanes per row block
  constexpr int K = kRms ? 1 : 3;
  constexpr int R = kMxTileRowsPerGroup;
  using VI = Vec<I, kVec>;
  using VW = Vec<W, kVec>;

  __shared__ ReduceSmem<K> smem;  // (group_reduce within 32 lanes does not touch it)
  __shared__ float row_mean[kMxBlock], row_rsigma[kMxBlock];
  __shared__ float col_max[kMxTileGroups][kVec][kMxTileLanes];  // lane-minor: no bank conflicts
  int phase = 0;

  const int hidden = p.hidden;
  const int nvec = hidden / kVec;
  const int lane = static_cast<int>(threadIdx.x) % kMxTileLanes;
  const int group = static_cast<int>(threadIdx.x) / kMxTileLanes;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kMxBlock;
  const bool first_split = blockIdx.y == 0;
  const float inv_hidden = 1.f / static_cast<float>(hidden);
  const float gamma_shift = p.zero_centered_gamma ? 1.f : 0.f;
  const float max_code = fp8_max(Elem<O>::kDType);

  platform::wait_for_prior_grid();

  // Statistics of the tile's rows.
#pragma unroll 1
  for (int j = 0; j < R; ++j) {
    const int local = group * R + j;
    const int64_t row = row0 + local;
    RowStats<kRms> stats;
    if (row < p.rows) {
      for (int v = lane; v < nvec; v += kMxTileLanes) {
        VI in;
        load_input<I, kVec, kAdd>(p, row * hidden + static_cast<int64_t>(v) * kVec, in, first_split);
        stats.add(in);
      }
    }
    Floats<K> part;
    if constexpr (kRms) {
      part = group_reduce(Floats<1>{{stats.a}}, AddOp{}, kMxTileLanes, 1, smem, phase);
    } else {
      part = group_reduce(stats.to_mean_var(), MeanVarOp{}, kMxTileLanes, 1, smem, phase);
    }
    const float mean = kRms ? 0.f : part.v[K == 3 ? 1 : 0];
    const float rsigma = rsqrtf(part.v[K - 1] * inv_hidden + p.epsilon);
    if (lane == 0) {
      row_mean[local] = mean;
      row_rsigma[local] = row < p.rows ? rsigma : 0.f;
      if (first_split && row < p.rows) {
        p.rsigma[row] = rsigma;
        if constexpr (!kRms) p.mu[row] = mean;
      }
    }
  }
  __syncthreads();

  // The output, chunk by chunk of this split's columns.
  const int chunks = (nvec + kMxTileLanes - 1) / kMxTileLanes;
  const int per_split = (chunks + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y);
  const int chunk_end = min(chunks, (static_cast<int>(blockIdx.y) + 1) * per_split);
  O* z = static_cast<O*>(p.z);
  O* zc = static_cast<O*>(p.z_colwise);
#pragma unroll 1
  for (int chunk = static_cast<int>(blockIdx.y) * per_split; chunk < chunk_end; ++chunk) {
    const int v = chunk * kMxTileLanes + lane;
    const bool col_ok = v < nvec;  // a whole row block is in or out (hidden % 32 == 0)
    const int64_t col = static_cast<int64_t>(v) * kVec;
    VW g, b;
    if (col_ok) {
      g.load(static_cast<const W*>(p.gamma) + col);
      if constexpr (!kRms) b.load(static_cast<const W*>(p.beta) + col);
    }
    float y[R][kVec];
    float cmax[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) cmax[k] = 0.f;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int local = group * R + j;
      const int64_t row = row0 + local;
      const bool ok = col_ok && row < p.rows;
      float amax = 0.f;
      if (ok) {
        VI in;
        if constexpr (kAdd) {
          reload_input<I, kVec, true>(p, row * hidden + col, in);  // the sum this CTA wrote above
        } else {
          in.load(static_cast<const I*>(p.x) + row * hidden + col);
        }
        const float mean = row_mean[local], rsigma = row_rsigma[local];
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          y[j][k] = (to_float(in.v[k]) - mean) * rsigma * (to_float(g.v[k]) + gamma_shift);
          if constexpr (!kRms) y[j][k] += to_float(b.v[k]);
          amax = fmaxf(amax, fabsf(y[j][k]));
          cmax[k] = fmaxf(cmax[k], fabsf(y[j][k]));
        }
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) y[j][k] = 0.f;
      }
      // Row-wise: the block's max over its kGroup lanes (every lane takes part).
#pragma unroll
      for (int m = 1; m < kGroup; m *= 2) amax = fmaxf(amax, platform::shfl_xor(amax, m));
      const uint8_t e = mx_scale_exponent(amax, max_code);
      const float inv = mx_inverse_scale(e);
      float scaled[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) scaled[k] = y[j][k] * inv;
      Vec<O, kVec> codes;
      convert_floats(scaled, codes);
      if (ok) {
        codes.store(z + row * hidden + col);
        if (lane % kGroup == 0) p.block_scales[mx_scale_offset(row, v / kGroup, hidden, p.swizzled_scales)] = e;
      }
    }
    // Column-wise: each column's max over the tile's 32 rows (8 groups x R).
#pragma unroll
    for (int k = 0; k < kVec; ++k) col_max[group][k][lane] = cmax[k];
    __syncthreads();
    float cinv[kVec];
    uint8_t ce[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float m = col_max[0][k][lane];
#pragma unroll
      for (int w = 1; w < kMxTileGroups; ++w) m = fmaxf(m, col_max[w][k][lane]);
      ce[k] = mx_scale_exponent(m, max_code);
      cinv[k] = mx_inverse_scale(ce[k]);
    }
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int64_t row = row0 + group * R + j;
      if (!col_ok || row >= p.rows) continue;
      float scaled[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) scaled[k] = y[j][k] * cinv[k];
      Vec<O, kVec> codes;
      convert_floats(scaled, codes);
      codes.store(zc + row * hidden + col);
    }
    if (group == 0 && col_ok) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        p.colwise_block_scales[mx_colwise_scale_offset(static_cast<int64_t>(blockIdx.x), col + k, p.rows, hidden,
                                                       p.swizzled_scales)] = ce[k];
      }
    }
    __syncthreads();  // col_max is written again by the next chunk
  }
  platform::allow_dependent_grid();
}

}  // namespace normtune
