// Reductions over a group of threads, a CTA, and a thread-block cluster, combining partials
// in a fixed order (the same bits on every run, and in every thread of the group).
#pragma once

#include <normtune/common/platform.h>
#include <normtune/tuning.h>  // kMaxCtaThreads: every kernel's launch bound

namespace normtune {

inline constexpr int kWarp = platform::kWarpSize;
inline constexpr int kMaxWarpsPerCta = kMaxCtaThreads / kWarp;

template <int K>
struct Floats {
  float v[K];
};

// Plain sums (RMSNorm's sum of squares). Commutative bit for bit (IEEE addition), so a
// butterfly step need not order its operands.
struct AddOp {
  static constexpr bool kCommutative = true;
  template <int K>
  __device__ __forceinline__ Floats<K> operator()(const Floats<K>& a, const Floats<K>& b) const {
    Floats<K> r;
#pragma unroll
    for (int k = 0; k < K; ++k) r.v[k] = a.v[k] + b.v[k];
    return r;
  }
};

// (count, mean, M2) partials of a variance, merged with Chan et al.'s formula:
//   n = na + nb, d = mean_b - mean_a, mean = mean_a + d * nb / n, M2 = M2a + M2b + d^2 na nb / n
// Accurate whatever the mean, unlike sum(x^2) - n mean^2. nb / n is the hardware reciprocal
// (2 ulp; n is a count): an IEEE division is a dozen instructions and a slow-path call on
// the reduction's critical path, and made LayerNorm 1.2-1.4x RMSNorm's time on every layout.
// {0, 0, 0} (no elements) is its identity, as all zeros is AddOp's. Branch-free: with no
// element on either side (n = 0, both partials all zeros) wb is 0 and the result is a; a
// branch here put divergent paths on every butterfly step's critical path.
struct MeanVarOp {
  static constexpr bool kCommutative = false;
  __device__ __forceinline__ Floats<3> operator()(const Floats<3>& a, const Floats<3>& b) const {
    const float n = a.v[0] + b.v[0];
    const float wb = __fdividef(b.v[0], fmaxf(n, 1.f));  // n: 0 or a count of at least 1
    const float d = b.v[1] - a.v[1];
    return {{n, a.v[1] + d * wb, a.v[2] + b.v[2] + d * d * a.v[0] * wb}};
  }
};

// Shared state of the reductions of one CTA. Buffers alternate between consecutive
// reductions, so each reduction needs a single barrier: a buffer is written again only two
// reductions later, after every thread has passed the barrier of the reduction in between.
template <int K>
struct ReduceSmem {
  float warp_parts[2][kMaxWarpsPerCta][K];
  float cluster_parts[2][kMaxCtasPerRow][K];  // [buf][rank]: written by CTA `rank` of the cluster
};

// Combines s over each aligned run of `width` lanes (a power of two up to kMaxWidth, at most
// the warp size) by xor shuffles; every lane of a run gets the same bits: op(lo, hi) always
// gets the partial of the lower lanes first.
template <int kMaxWidth, int K, typename Op>
__device__ __forceinline__ Floats<K> butterfly(Floats<K> s, Op op, int width, int lane) {
  static_assert(kMaxWidth <= kWarp, "lanes of one warp");
#pragma unroll
  for (int offset = 1; offset < kMaxWidth; offset *= 2) {
    if (offset < width) {
      Floats<K> other;
#pragma unroll
      for (int k = 0; k < K; ++k) other.v[k] = platform::shfl_xor(s.v[k], offset);
      if constexpr (Op::kCommutative) {
        s = op(s, other);
      } else {
        // The operands ordered by selects, then one op: `lower ? op(s, other) : op(other, s)`
        // ran both orders' code (divergent lanes) on every step.
        const bool lower = (lane & offset) == 0;
        Floats<K> lo, hi;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          lo.v[k] = lower ? s.v[k] : other.v[k];
          hi.v[k] = lower ? other.v[k] : s.v[k];
        }
        s = op(lo, hi);
      }
    }
  }
  return s;
}

// The partials of a group's W warps (group > kWarp; each lane holding its warp's) combined by
// a butterfly over the lanes (log2 W steps, not a chain of W - 1): each warp's lane 0 writes its
// partial to `parts` (at least K values per warp), the group passes one barrier (`barrier` as
// group_reduce's), and lane l takes partial l mod P (P the power of two >= W; past W the op's
// identity, all zeros), so every aligned run of P lanes, in every warp of the group, combines
// the same values in the same order: the same bits everywhere.
template <int K, int KS, typename Op>
__device__ __forceinline__ Floats<K> combine_warps(Floats<K> s, Op op, int group, float (&parts)[kMaxWarpsPerCta][KS],
                                                   int barrier) {
  static_assert(K <= KS, "a warp's slot holds its partial");
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) parts[warp][k] = s.v[k];
  }
  // (Every reduction of a group wider than a warp passes a barrier of the group: the
  // pipelined backward's statistics relay counts on it, norm_bwd_pipelined.cuh.)
  if (barrier == 0) {
    __syncthreads();
  } else {
    platform::group_barrier(barrier, group);
  }
  const int warps_per_group = group / kWarp;
  const int first = (warp / warps_per_group) * warps_per_group;
  int span = 1;
  while (span < warps_per_group) span *= 2;
  const int w = lane & (span - 1);
#pragma unroll
  for (int k = 0; k < K; ++k) s.v[k] = w < warps_per_group ? parts[first + w][k] : 0.f;
  return butterfly<kMaxWarpsPerCta>(s, op, span, lane);
}

// group_reduce's steps past its first butterfly (each lane holding its warp's run of the
// group): the group's warps (group > kWarp, combine_warps), then the cluster (cluster > 1),
// with op; `buf` the reduction's buffer (phase & 1, phase counted past it).
template <int K, typename Op>
__device__ __forceinline__ Floats<K> reduce_warps_and_cluster(Floats<K> s, Op op, int group, int cluster,
                                                              ReduceSmem<K>& smem, int buf, int phase, int barrier) {
  if (group > kWarp) s = combine_warps(s, op, group, smem.warp_parts[buf], barrier);
  if (cluster > 1) {
    // Push, then one cluster barrier: thread r writes this CTA's partial into slot [rank] of
    // CTA r, and after the barrier every CTA combines the slots of its own shared memory in
    // rank order (the same bits in every CTA). The first reduction first completes the
    // barrier the kernel arrived at on entry (every CTA of the cluster has started, so its
    // shared memory exists). A slot buffer is written again two reductions later, after every
    // CTA passed the barrier in between, so after reading it. Nothing remote is touched after
    // the last barrier: a CTA may exit without waiting for its peers.
    if (phase == 1) platform::cluster_wait_acquire();
    const int rank = platform::cluster_rank();
    if (static_cast<int>(threadIdx.x) < cluster) {
      float* slot = platform::cluster_map_shared(&smem.cluster_parts[buf][rank][0], static_cast<int>(threadIdx.x));
#pragma unroll
      for (int k = 0; k < K; ++k) slot[k] = s.v[k];
    }
    platform::cluster_arrive_release();
    platform::cluster_wait_acquire();
#pragma unroll
    for (int k = 0; k < K; ++k) s.v[k] = smem.cluster_parts[buf][0][k];
    for (int r = 1; r < cluster; ++r) {
      Floats<K> next;
#pragma unroll
      for (int k = 0; k < K; ++k) next.v[k] = smem.cluster_parts[buf][r][k];
      s = op(s, next);
    }
  }
  return s;
}

// Reduces s with op over the `group` consecutive threads (a power of two up to the warp size,
// or a multiple of it); every thread of the group gets the result. With `cluster` > 1 CTAs
// (each holding a part of the row; the group is then the whole CTA) it spans the cluster:
// the kernel must then call platform::cluster_arrive_relaxed() on entry, before the first
// reduction, and cluster_exit() before it returns.
// `phase` counts this CTA's reductions so far, identically in all its threads. op(lo, hi)
// always gets the lower-numbered partial first.
// `barrier`: 0, a group wider than a warp waits with the whole CTA (__syncthreads; every group
// of the CTA reduces at once); else named barrier `barrier` of the group's threads alone
// (platform::group_barrier: groups reduce independently; `phase` then counts this group's
// reductions, cluster must be 1).
template <int K, typename Op>
__device__ __forceinline__ Floats<K> group_reduce(Floats<K> s, Op op, int group, int cluster,
                                                  ReduceSmem<K>& smem, int& phase, int barrier = 0) {
  const int lane = threadIdx.x % kWarp;
  s = butterfly<kWarp>(s, op, group < kWarp ? group : kWarp, lane);
  if (group <= kWarp && cluster == 1) return s;
  const int buf = phase & 1;
  ++phase;
  return reduce_warps_and_cluster(s, op, group, cluster, smem, buf, phase, barrier);
}

// (mean, V) partials of equal counts, V the mean squared deviation from the mean: merged,
//   mean = (mean_a + mean_b) / 2,   V = (V_a + V_b) / 2 + ((mean_b - mean_a) / 2)^2,
// Chan et al.'s formula (MeanVarOp) with na = nb, as V = M2 / n. No count and no reciprocal
// on the critical path (MeanVarOp's nb / n is a MUFU.RCP on every butterfly step), one value
// fewer to shuffle, and commutative bit for bit (a sum, and a square of a difference whose
// sign does not matter), so a step needs no ordering of its operands. Only where every
// partial of a step has as many elements as the other: no identity.
struct EqualMeanVarOp {
  static constexpr bool kCommutative = true;
  __device__ __forceinline__ Floats<2> operator()(const Floats<2>& a, const Floats<2>& b) const {
    const float h = (b.v[0] - a.v[0]) * 0.5f;
    return {{(a.v[0] + b.v[0]) * 0.5f, fmaf(h, h, (a.v[1] + b.v[1]) * 0.5f)}};
  }
};

// LayerNorm's statistics over a group where every thread holds `count` elements: s = (mean, V)
// of the thread's (with count 0, (0, 0): a group past the last row, whole). EqualMeanVarOp over
// the warp's lanes, and over the group's warps where their number is a power of two; then (n,
// mean, M2) as group_reduce(..., MeanVarOp{}, ...) returns them, through MeanVarOp for the
// other warp counts and the cluster.
__device__ __forceinline__ Floats<3> equal_count_mean_var(Floats<2> s, float count, int group, int cluster,
                                                          ReduceSmem<3>& smem, int& phase, int barrier = 0) {
  const int lane = threadIdx.x % kWarp;
  const int width = group < kWarp ? group : kWarp;
  s = butterfly<kWarp>(s, EqualMeanVarOp{}, width, lane);
  float n = count * static_cast<float>(width);
  if (group > kWarp && cluster == 1 && (group / kWarp & (group / kWarp - 1)) == 0) {
    // A power of two of warps: their partials through the same op (smem.warp_parts' first
    // two values; no lane takes an identity), one barrier.
    const int buf = phase & 1;
    ++phase;
    s = combine_warps(s, EqualMeanVarOp{}, group, smem.warp_parts[buf], barrier);
    n = count * static_cast<float>(group);
    return {{n, s.v[0], s.v[1] * n}};
  }
  const Floats<3> r{{n, s.v[0], s.v[1] * n}};
  if (group <= kWarp && cluster == 1) return r;
  const int buf = phase & 1;
  ++phase;
  return reduce_warps_and_cluster(r, MeanVarOp{}, group, cluster, smem, buf, phase, barrier);
}

// What a kernel whose CTAs reduced across a cluster does before it returns: if it made no
// reduction (no rows), complete the barrier it arrived at on entry.
__device__ __forceinline__ void cluster_exit(int cluster, int phase) {
  if (cluster > 1 && phase == 0) platform::cluster_wait_acquire();
}

}  // namespace normtune
