// What the pipelined layouts (norm_fwd_pipelined.cuh, norm_bwd_pipelined.cuh) share: the ring
// of shared-memory stages that holds the CTA's slice of the next rows, and the exchange of a
// row's partials across the cluster.
//
// SliceRing: S stages (2..4), each holding the CTA's slice of kArrays row arrays (x, then the
// residual or dz), slice = N * G vectors of each. Thread t copies, and later reads back, only
// its own vectors v = first + i * G + t (i < N, v < nvec) of each array, so no barrier is
// needed between a copy and its read, nor before a stage is refilled. Each row's copies are
// one cp.async group: row j's have landed when at most the S - 1 later groups are pending.
//
// ClusterRowExchange: the C CTAs of a cluster each hold a slice of a row and need the row's
// total of K partial floats (the forward's statistics, the backward's row terms).
//
// Each CTA pushes its partial of row j into slot [j % S][rank] of every CTA of the cluster
// (st.async, counted on that CTA's transaction barrier [j % S]) and combines the C slots in
// rank order: the same bits in every CTA. No cluster barrier per row: a CTA sends its partial
// of row j + S (into slot buffer j % S again) only after it has finished row j + S - 1, which
// needed this CTA's partial of row j + S - 1, which this CTA sends only after its CTA barrier of
// that row (the caller's reduction) — after every one of its threads has read the slots of row
// j. A one-warp CTA has no CTA barrier in its reduction: combine() orders its lanes' reads of
// row j - 1's slots before the push of row j itself. The only cluster barrier is arrived at on
// entry (begin(), after the barrier initialization) and waited on before the first remote
// store. A CTA leaves after its last row's partials have all landed in it; none are sent to it
// after that. Every thread of every CTA calls begin(), combine() per row, and end().
#pragma once

#include <normtune/common/platform.h>
#include <normtune/tuning.h>

#include "kernels/reduce.cuh"

namespace normtune {

inline constexpr int kMaxPipelineStages = 4;  // stages of a ring (rows in flight per CTA)

template <typename VI, int N, int kArrays>
struct SliceRing {
  static_assert(sizeof(VI) == 16, "the ring is filled 16 bytes at a time");
  static constexpr size_t stage_bytes(int slice) { return static_cast<size_t>(kArrays) * slice * sizeof(VI); }

  char* base;  // stage 0
  int slice, G, t, first, nvec;

  __device__ __forceinline__ VI* stage(int s) const { return reinterpret_cast<VI*>(base + s * stage_bytes(slice)); }
  // Array a's vector i (this thread's) in stage s.
  __device__ __forceinline__ VI& at(int s, int a, int i) const { return stage(s)[a * slice + i * G + t]; }
  // Issues the copies of row `row` of arrays[0..kArrays) (row-major, `hidden` elements per row) into
  // stage s, none when row >= rows; one group either way.
  template <typename T>
  __device__ __forceinline__ void issue(const T* const* arrays, int64_t row, int64_t rows, int hidden, int s) const {
    constexpr int kVec = sizeof(VI) / sizeof(T);
    if (row < rows) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const int v = first + i * G + t;
        if (v < nvec) {
#pragma unroll
          for (int a = 0; a < kArrays; ++a) {
            platform::cp_async_16(&at(s, a, i), arrays[a] + row * hidden + static_cast<int64_t>(v) * kVec);
          }
        }
      }
    }
    platform::cp_async_commit();
  }
  // Until this thread's copies of the oldest row in flight have landed (S stages in flight).
  __device__ __forceinline__ static void wait(int S) {
    if (S == 1) {
      platform::cp_async_wait_groups<0>();
    } else if (S == 2) {
      platform::cp_async_wait_groups<1>();
    } else if (S == 3) {
      platform::cp_async_wait_groups<2>();
    } else {
      platform::cp_async_wait_groups<3>();
    }
  }
};

template <int K, int kMaxStages>
struct ClusterRowExchange {
  uint64_t bar[kMaxStages];
  float slots[kMaxStages][kMaxCtasPerRow][K];  // [row % S][rank]
  float tickets[kMaxStages];                   // [row % S]: rank 0's word (bits), when sent

  // On entry, with S stages (rows whose exchanges may overlap) and C CTAs per row.
  __device__ __forceinline__ void begin(int S, int C) {
    if (C == 1) return;
    if (threadIdx.x == 0) {
      for (int s = 0; s < S; ++s) platform::mbarrier_init(&bar[s], 1);
      platform::fence_mbarrier_init_cluster();
    }
    platform::cluster_arrive_relaxed();  // waited on before the first remote store
  }

  // Row j's total over the cluster of this CTA's partial `part` (already reduced over the CTA's
  // G threads, the same in each), combined with `op` in rank order. With `with_ticket` (in every
  // CTA of the cluster, or in none), rank 0's thread 0 also sends its word `ticket` to every
  // CTA, on the same barrier: ticket(j, S) reads it after this call, until the CTA's next
  // barrier (the forward's dynamic row schedule: the cluster's rows handed out at no cost in
  // latency).
  template <typename Op>
  __device__ __forceinline__ Floats<K> combine(Floats<K> part, Op op, int j, int S, int G, int C,
                                               int rank, bool with_ticket = false,
                                               unsigned ticket = 0) {
    if (C == 1) return part;
    const int s = j % S;
    const int t = static_cast<int>(threadIdx.x);
    if (G <= kWarp) platform::sync_warp();
    if (t == 0) {
      platform::mbarrier_arrive_expect_tx(&bar[s], (C * K + (with_ticket ? 1 : 0)) * sizeof(float));
    }
    if (j == 0) platform::cluster_wait_acquire();  // every CTA has initialized its barriers
    if (t < C) {
#pragma unroll
      for (int k = 0; k < K; ++k) platform::st_async_cluster(&slots[s][rank][k], part.v[k], &bar[s], t);
    }
    if (with_ticket && rank == 0 && t == 0) {
      for (int r = 0; r < C; ++r)
        platform::st_async_cluster(&tickets[s], __uint_as_float(ticket), &bar[s], r);
    }
    platform::mbarrier_wait_parity(&bar[s], static_cast<unsigned>(j / S) & 1u);
#pragma unroll
    for (int k = 0; k < K; ++k) part.v[k] = slots[s][0][k];
    for (int r = 1; r < C; ++r) {
      Floats<K> next;
#pragma unroll
      for (int k = 0; k < K; ++k) next.v[k] = slots[s][r][k];
      part = op(part, next);
    }
    return part;
  }

  // Rank 0's word sent with row j's partials (combine's with_ticket).
  __device__ __forceinline__ unsigned ticket(int j, int S) const {
    return __float_as_uint(tickets[j % S]);
  }

  // After the last row: `rows` rows were combined (none: complete the entry barrier).
  __device__ __forceinline__ void end(int rows, int C) {
    if (C > 1 && rows == 0) platform::cluster_wait_acquire();
  }
};

}  // namespace normtune
