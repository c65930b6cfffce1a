// Block-scaled z with column-wise data (MXFP8, NVFP4), the tile held on chip: x read once.
//
// A tile is 32 rows (one MXFP8 column block's height, two of NVFP4's). Its columns are split
// over a cluster of C CTAs (p.ctas_per_row; C = 1 without clusters) in whole row blocks (32
// columns; NVFP4: 16): CTA `rank` holds rows [row0, row0 + 32) x its slice of
// p.vecs_per_thread vectors per row in dynamic shared memory, so that every row block and
// every column block of its slice is local. Rows short enough for one CTA may give a CTA
// T = p.tiles_per_cta tiles (rows [row0, row0 + 32T)), so that its eight warps have strips
// to take in the output stage.
//   1. Load: the slice into shared memory (cp.async; the fused add adds x and residual in
//      fp32, rounds to x's type, writes residual_out and keeps the sum).
//   2. Statistics: warp w takes rows 4Tw..4Tw+4T-1 of the slice; per row the slice's partial
//      (RMSNorm: sum x^2; LayerNorm: count, mean and M2 about the slice's own mean, two
//      passes over shared memory), pushed into slot [rank] of every CTA of the cluster. One
//      cluster barrier; then each CTA merges the C partials of a row in rank order (the same
//      bits in every CTA) into mu and rsigma; rank 0 writes them out. (One CTA: the partial
//      is the row's statistics.)
//   3. Output: both outputs of the slice from shared memory (mx_tile_output).
// A CTA's remote stores all come before its arrival on the one cluster barrier and every CTA
// waits on it before going on, so no CTA leaves while another still writes into it.
#pragma once

#include "kernels/norm_fwd_mx_tile.cuh"

namespace normtune {

// The most shared memory the launcher gives a slice before it adds a CTA to the cluster
// (64 KiB: two CTAs per SM, as registers allow, one loading while the other computes.
// Measured on the H200: 48 KiB with three CTAs per SM (80 registers) was 2-10% slower for
// RMSNorm and LayerNorm, 5-7% faster for the fused add).
inline constexpr size_t kMxSliceBudget = 64 * 1024;

template <typename Traits>
__global__ void __launch_bounds__(kMxTileThreads, 2) norm_fwd_mx_cluster_kernel(const FwdParams p) {
  using I = typename Traits::Input;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr bool kAdd = Traits::kResidualAdd;
  constexpr int kVec = 16 / sizeof(I);
  constexpr int K = kRms ? 1 : 3;
  constexpr int R = kMxTileRowsPerGroup;
  using VI = Vec<I, kVec>;

  extern __shared__ __align__(kDynamicSmemAlign) unsigned char mx_slice_bytes[];
  VI* slice = reinterpret_cast<VI*>(mx_slice_bytes);  // [32][sv]
  __shared__ ReduceSmem<1> smem;  // (group_reduce within 32 lanes does not touch it)
  __shared__ MxTileSmem<Traits> s;
  __shared__ float parts[kMaxCtasPerRow][kMxBlock][K];  // [rank][row]: CTA rank's partial
  int phase = 0;

  const int C = p.ctas_per_row;
  const int rank = C > 1 ? platform::cluster_rank() : 0;
  if (C > 1) platform::cluster_arrive_relaxed();  // waited on before the first remote store
  const int64_t hidden = p.hidden;
  const int nvec = p.hidden / kVec;
  const int sv = p.vecs_per_thread;  // the slice's vectors per row
  const int v_begin = min(nvec, rank * sv);
  const int v_end = min(nvec, v_begin + sv);
  const int width = v_end - v_begin;
  const int T = p.tiles_per_cta;  // (1 on a cluster)
  const int64_t row0 = static_cast<int64_t>(blockIdx.x / C) * kMxBlock * T;
  const int rows_here = static_cast<int>(p.rows - row0 < kMxBlock * T ? p.rows - row0 : kMxBlock * T);
  const int lane = static_cast<int>(threadIdx.x) % kMxTileLanes;
  const int group = static_cast<int>(threadIdx.x) / kMxTileLanes;

  platform::wait_for_prior_grid();
  mx_tile_fill_tables<Traits>(p, s);

  // 1. The slice into shared memory: item i = r * width + c (row r, vector c of the slice),
  // thread t taking items t, t + kMxTileThreads, ... (r and c stepped, not divided).
  const int items = rows_here * width;
  const int dr = kMxTileThreads / width, dc = kMxTileThreads % width;
  int r = static_cast<int>(threadIdx.x) / width, c = static_cast<int>(threadIdx.x) % width;
  auto next = [&] {
    r += dr;
    c += dc;
    if (c >= width) {
      c -= width;
      ++r;
    }
  };
  if constexpr (kAdd) {
    constexpr int kBatch = 4;  // loads in flight per thread before the first store
#pragma unroll 1
    for (int i0 = static_cast<int>(threadIdx.x); i0 < items; i0 += kBatch * kMxTileThreads) {
      VI in[kBatch];
      int64_t at[kBatch];
      int to[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        at[b] = (row0 + r) * hidden + static_cast<int64_t>(v_begin + c) * kVec;
        to[b] = r * sv + c;
        if (i0 + b * kMxTileThreads < items) load_input<I, kVec, true>(p, at[b], in[b], false);
        next();
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (i0 + b * kMxTileThreads >= items) continue;
        in[b].store(static_cast<I*>(p.residual_out) + at[b]);
        slice[to[b]] = in[b];
      }
    }
  } else {
    const I* x = static_cast<const I*>(p.x) + row0 * hidden + static_cast<int64_t>(v_begin) * kVec;
#pragma unroll 4
    for (int i = static_cast<int>(threadIdx.x); i < items; i += kMxTileThreads) {
      platform::cp_async_16(&slice[r * sv + c], x + r * hidden + c * kVec);
      next();
    }
    platform::cp_async_wait_all();
  }
  __syncthreads();

  // 2. Each row's partial over the slice, to every CTA of the cluster; then the rows' totals.
#pragma unroll 1
  for (int j = 0; j < R * T; ++j) {
    const int local = group * R * T + j;
    Floats<K> part{};
    if (local < rows_here) {
      const VI* in = slice + local * sv;
      float a = 0.f;
      for (int c = lane; c < width; c += kMxTileLanes) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) a += kRms ? to_float(in[c].v[k]) * to_float(in[c].v[k]) : to_float(in[c].v[k]);
      }
      const float sum = group_reduce(Floats<1>{{a}}, AddOp{}, kMxTileLanes, 1, smem, phase).v[0];
      if constexpr (kRms) {
        part.v[0] = sum;
      } else {
        const float n = static_cast<float>(width * kVec), mean = sum / n;
        float m2 = 0.f;
        for (int c = lane; c < width; c += kMxTileLanes) {
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            const float d = to_float(in[c].v[k]) - mean;
            m2 += d * d;
          }
        }
        part = {{n, mean, group_reduce(Floats<1>{{m2}}, AddOp{}, kMxTileLanes, 1, smem, phase).v[0]}};
      }
    }
    if (C == 1) {
      if (lane == 0) mx_tile_set_stats<kRms>(p, s, local, row0 + local, part, true);
      continue;
    }
    if (j == 0) platform::cluster_wait_acquire();  // every CTA of the cluster has started
    if (lane < C) {
      float* slot = platform::cluster_map_shared(&parts[rank][local][0], lane);
#pragma unroll
      for (int k = 0; k < K; ++k) slot[k] = part.v[k];
    }
  }
  if (C > 1) {
    platform::cluster_arrive_release();
    platform::cluster_wait_acquire();
  } else {
    __syncthreads();
  }
  if (C > 1 && threadIdx.x < kMxBlock) {
    const int local = static_cast<int>(threadIdx.x);
    Floats<K> total;
#pragma unroll
    for (int k = 0; k < K; ++k) total.v[k] = parts[0][local][k];
    for (int q = 1; q < C; ++q) {
      Floats<K> next;
#pragma unroll
      for (int k = 0; k < K; ++k) next.v[k] = parts[q][local][k];
      if constexpr (kRms) {
        total = AddOp{}(total, next);
      } else {
        total = MeanVarOp{}(total, next);
      }
    }
    mx_tile_set_stats<kRms>(p, s, local, row0 + local, total, rank == 0);
  }
  __syncthreads();

  // 3. Both outputs of the slice.
  mx_tile_output<Traits>(p, row0, T, v_begin, v_end, s,
                         reinterpret_cast<const I*>(slice) - static_cast<int64_t>(v_begin) * kVec,
                         static_cast<int64_t>(sv) * kVec);
  platform::allow_dependent_grid();
}

}  // namespace normtune
