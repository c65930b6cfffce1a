// Sums over a group of threads, a CTA, and a thread-block cluster, in a fixed order (the
// same bits on every run).
#pragma once

#include <normtune/common/platform.h>

namespace normtune {

inline constexpr int kWarp = platform::kWarpSize;
inline constexpr int kMaxWarpsPerCta = 1024 / kWarp;

// Shared state of the reductions of one CTA. Buffers alternate between consecutive
// reductions, so each reduction needs a single barrier: a buffer is written again only two
// reductions later, after every thread has passed the barrier of the reduction in between.
struct ReduceSmem {
  float warp_sums[2][kMaxWarpsPerCta];
  float cta_sum[2];  // read by the other CTAs of the cluster
};

// Sum of v over the `group` consecutive threads (a power of two below the warp size, or a
// multiple of it), returned to every thread of the group. `cluster` CTAs (1 = no cluster)
// each hold a part of the row; then the group is the whole CTA. `phase` counts the
// reductions made so far by this CTA, identically in all threads.
__device__ __forceinline__ float group_sum(float v, int group, int cluster, ReduceSmem& smem,
                                           int& phase) {
  const int width = group < kWarp ? group : kWarp;
#pragma unroll
  for (int offset = kWarp / 2; offset >= 1; offset /= 2) {
    if (offset < width) v += platform::shfl_xor(v, offset);
  }
  if (group <= kWarp && cluster == 1) return v;

  const int buf = phase & 1;
  ++phase;
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (group > kWarp) {
    if (lane == 0) smem.warp_sums[buf][warp] = v;
    __syncthreads();
    const int warps_per_group = group / kWarp;
    const int first = (warp / warps_per_group) * warps_per_group;
    v = 0.f;
    for (int w = 0; w < warps_per_group; ++w) v += smem.warp_sums[buf][first + w];
  }
  if (cluster > 1) {
    if (threadIdx.x == 0) smem.cta_sum[buf] = v;
    platform::cluster_sync();
    v = 0.f;
    for (int r = 0; r < cluster; ++r) v += *platform::cluster_map_shared(&smem.cta_sum[buf], r);
  }
  return v;
}

}  // namespace normtune
