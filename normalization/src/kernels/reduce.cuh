// Sums over a group of threads, a CTA, and a thread-block cluster, in a fixed order (the
// same bits on every run).
#pragma once

#include <normtune/common/platform.h>

namespace normtune {

inline constexpr int kWarp = platform::kWarpSize;
inline constexpr int kMaxCtaThreads = 512;
inline constexpr int kMaxWarpsPerCta = kMaxCtaThreads / kWarp;

// K partial sums reduced together (LayerNorm reduces two: one barrier instead of two).
template <int K>
struct Sums {
  float v[K];
};

// Shared state of the reductions of one CTA. Buffers alternate between consecutive
// reductions, so each reduction needs a single barrier: a buffer is written again only two
// reductions later, after every thread has passed the barrier of the reduction in between.
template <int K>
struct ReduceSmem {
  float warp_sums[2][kMaxWarpsPerCta][K];
  float cta_sums[2][K];  // read by the other CTAs of the cluster
};

// Sums s over the `group` consecutive threads (a power of two up to the warp size, or a
// multiple of it), returned to every thread of the group. With `cluster` > 1 CTAs (each
// holding a part of the row; the group is then the whole CTA) the sum spans the cluster.
// `phase` counts this CTA's reductions so far, identically in all its threads.
template <int K>
__device__ __forceinline__ Sums<K> group_sum(Sums<K> s, int group, int cluster,
                                             ReduceSmem<K>& smem, int& phase) {
  const int width = group < kWarp ? group : kWarp;
#pragma unroll
  for (int offset = kWarp / 2; offset >= 1; offset /= 2) {
    if (offset < width) {
#pragma unroll
      for (int k = 0; k < K; ++k) s.v[k] += platform::shfl_xor(s.v[k], offset);
    }
  }
  if (group <= kWarp && cluster == 1) return s;

  const int buf = phase & 1;
  ++phase;
  if (group > kWarp) {
    const int warp = threadIdx.x / kWarp;
    if (threadIdx.x % kWarp == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) smem.warp_sums[buf][warp][k] = s.v[k];
    }
    __syncthreads();
    const int warps_per_group = group / kWarp;
    const int first = (warp / warps_per_group) * warps_per_group;
#pragma unroll
    for (int k = 0; k < K; ++k) s.v[k] = 0.f;
    for (int w = 0; w < warps_per_group; ++w) {
#pragma unroll
      for (int k = 0; k < K; ++k) s.v[k] += smem.warp_sums[buf][first + w][k];
    }
  }
  if (cluster > 1) {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) smem.cta_sums[buf][k] = s.v[k];
    }
    platform::cluster_sync();
#pragma unroll
    for (int k = 0; k < K; ++k) s.v[k] = 0.f;
    for (int r = 0; r < cluster; ++r) {
      const float* remote = platform::cluster_map_shared(&smem.cta_sums[buf][0], r);
#pragma unroll
      for (int k = 0; k < K; ++k) s.v[k] += remote[k];
    }
  }
  return s;
}

}  // namespace normtune
