// Backward RMSNorm / LayerNorm (optionally adding a gradient), pipelined layout for rows too
// long for one CTA's registers: the backward counterpart of norm_fwd_pipelined.cuh, so that x
// and dz are read from HBM once (the column-tiled path reads them twice).
//
// Persistent CTAs; a row is split over a thread-block cluster of C CTAs (C = 1: one CTA).
// CTA `rank` of cluster k walks rows k, k + K, k + 2K, ... (K clusters in the grid); thread t
// copies, and later reads back, the vectors v = rank * (N * G) + i * G + t (i < N) of x and
// of dz of each row into a ring of S stages of shared memory (cp.async, p.stages = 1..4), so
// that the next S - 1 rows' copies are in flight while this row reduces and writes dx. Only
// its own bytes: no barrier between a copy and its read, and none before a stage is refilled.
// Per row: the slice's row terms (sum dy * y, and sum dy for LayerNorm) are reduced in the CTA
// and, with C > 1, summed over the cluster in rank order through distributed shared memory, the
// same bits in every CTA, with no cluster barrier per row (pipeline.cuh).
// Then dx of the slice from the staged copies. gamma's slice is held in registers (loaded
// once); the dgamma (and dbeta) partials of the CTA's columns stay in registers over all its
// rows, and at the end each CTA writes its columns of partial row k (program k = the
// cluster): every (program, column) written exactly once, summed by norm_bwd_finalize_kernel
// in a fixed order. With one CTA per row (C = 1), P = p.partial_cluster CTAs of a cluster
// (each walking its own rows over every column) first sum their partials on chip, in rank
// order through distributed shared memory, and write one partial row between them: P times
// fewer fp32 partial rows to write and for the finalize to read (at 4096x4096, 264 rows of
// 16 KiB per output were about 9% of the bytes of x, dz and dx). Or, without a cluster, a CTA
// of R row groups (BwdPlan::rows_per_cta, 2 vectors per thread): group r of G threads of CTA
// b walks rows b * R + r, b * R + r + R * gridDim.x, ... with its own ring, reduces its rows
// on a named barrier of its own (the groups do not wait for one another), and at the end the
// CTA sums the R groups' partials in group order through its drained shared memory into one
// partial row. The clusters, hence the programs and the bits, follow from
// multiprocessorCount as in the other layouts.
// In place (dx over dz): a row's dz is copied on chip before its dx is written, and the rows
// in flight are other rows.
#pragma once

#include "kernels/pipeline.cuh"
#include "kernels/norm_bwd.cuh"

namespace normtune {

// The ring: per stage the CTA's slice of x, then of dz.
template <typename Traits, typename Shape>
using BwdRing = SliceRing<Vec<typename Traits::Input, Shape::kVec>, Shape::kN, 2>;

// Stages this thread's dgamma (and dbeta) partials of every column it holds in `scratch`
// ([K][hidden] floats: vector v of output o at o * hidden + v * kVec), after a CTA barrier
// (every thread's last reads of the ring are done: scratch overlaps it).
template <typename Traits, int kVec, int N>
__device__ __forceinline__ void stage_partials(const GradAccum<Traits, kVec> (&acc)[N], float* scratch, int G, int t,
                                               int nvec) {
  constexpr int K = Traits::kOutputs;
  static_assert(kVec % 4 == 0, "partials staged and summed four floats at a time");
  const int hidden = nvec * kVec;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int v = i * G + t;
    if (v < nvec) {
#pragma unroll
      for (int o = 0; o < K; ++o) {
#pragma unroll
        for (int k = 0; k < kVec; k += 4) {
          *reinterpret_cast<float4*>(scratch + o * hidden + v * kVec + k) =
              make_float4(acc[i].v[o][k], acc[i].v[o][k + 1], acc[i].v[o][k + 2], acc[i].v[o][k + 3]);
        }
      }
    }
  }
}

// Four floats of partial row `partial_row` of output o (quad q of its columns); RMSNorm's one
// program writing dgamma itself (p.direct_grads): those columns of dgamma, as the finalize
// would round them.
template <typename Traits>
__device__ __forceinline__ void store_partial_quad(const BwdParams& p, int o, int64_t partial_row, int q, float4 sum) {
  if constexpr (Traits::kOutputs == 1) {
    if (p.direct_grads) {
      using W = typename Traits::Weight;
      W* out = static_cast<W*>(p.dgamma) + 4 * q;
      out[0] = from_float<W>(0.f + sum.x);
      out[1] = from_float<W>(0.f + sum.y);
      out[2] = from_float<W>(0.f + sum.z);
      out[3] = from_float<W>(0.f + sum.w);
      return;
    }
  }
  *reinterpret_cast<float4*>(p.partials + (static_cast<int64_t>(o) * p.programs + partial_row) * p.row_stride + 4 * q) =
      sum;
}

__device__ __forceinline__ void add_quad(float4& sum, const float4& u) {
  sum.x += u.x;
  sum.y += u.y;
  sum.z += u.z;
  sum.w += u.w;
}

// The dgamma (and dbeta) partials of the P CTAs of this cluster, each over every column of
// the rows it walked, summed in rank order into partial row `partial_row`: each CTA stages its
// K x hidden floats in `scratch` (its own shared memory, free: the ring has drained), and CTA
// r sums and writes the r-th of P column ranges. Every thread of every CTA of the cluster
// calls it; no CTA leaves while another may still read its shared memory.
template <typename Traits, int kVec, int N>
__device__ __forceinline__ void cluster_sum_partials(const BwdParams& p, const GradAccum<Traits, kVec> (&acc)[N],
                                                     float* scratch, int G, int nvec, int P, int64_t partial_row) {
  constexpr int K = Traits::kOutputs;
  const int hidden = nvec * kVec;
  const int t = static_cast<int>(threadIdx.x);
  stage_partials<Traits, kVec, N>(acc, scratch, G, t, nvec);
  platform::cluster_arrive_release();
  platform::cluster_wait_acquire();  // every CTA's partials are staged
  const int rank = platform::cluster_rank();
  const int quads = hidden / 4;
  const int per_rank = (quads + P - 1) / P;
  const int q_end = min(quads, (rank + 1) * per_rank);
  for (int q = rank * per_rank + t; q < q_end; q += static_cast<int>(blockDim.x)) {
#pragma unroll
    for (int o = 0; o < K; ++o) {
      float4 sum = *platform::cluster_map_shared(reinterpret_cast<float4*>(scratch + o * hidden) + q, 0);
      for (int r = 1; r < P; ++r) {
        add_quad(sum, *platform::cluster_map_shared(reinterpret_cast<float4*>(scratch + o * hidden) + q, r));
      }
      store_partial_quad<Traits>(p, o, partial_row, q, sum);
    }
  }
  platform::cluster_arrive_release();
  platform::cluster_wait_acquire();
}

// The same within one CTA of R row groups (each walking its own rows over every column): the
// groups' partials staged side by side in the drained ring ([group][K][hidden]), then summed
// in group order by all the CTA's threads into partial row `partial_row`.
template <typename Traits, int kVec, int N>
__device__ __forceinline__ void cta_sum_partials(const BwdParams& p, const GradAccum<Traits, kVec> (&acc)[N],
                                                 float* scratch, int G, int t, int group, int R, int nvec,
                                                 int64_t partial_row) {
  constexpr int K = Traits::kOutputs;
  const int hidden = nvec * kVec;
  stage_partials<Traits, kVec, N>(acc, scratch + static_cast<int64_t>(group) * K * hidden, G, t, nvec);
  __syncthreads();  // every group's partials are staged
  const int quads = hidden / 4;
  for (int q = static_cast<int>(threadIdx.x); q < quads; q += static_cast<int>(blockDim.x)) {
#pragma unroll
    for (int o = 0; o < K; ++o) {
      const float4* at = reinterpret_cast<const float4*>(scratch + o * hidden) + q;
      float4 sum = at[0];
      for (int r = 1; r < R; ++r) add_quad(sum, at[static_cast<int64_t>(r) * K * hidden / 4]);
      store_partial_quad<Traits>(p, o, partial_row, q, sum);
    }
  }
}

// One 512-thread CTA per SM (128 registers): x and dz live in shared memory, the registers
// hold gamma's slice and the fp32 partials (N * kVec * outputs floats: 32 at N = 2 for
// LayerNorm, 32 at N = 4 for RMSNorm, 64 for LayerNorm at N = 4).
template <typename Traits, typename Shape, int kShift>
__device__ __forceinline__ void norm_bwd_pipelined_body(const BwdParams& p) {
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  constexpr int K = Traits::kOutputs;
  constexpr int kVec = Shape::kVec;
  constexpr int N = Shape::kN;
  static_assert(Shape::kPipelined && N >= 1, "norm_bwd_pipelined_kernel holds kN vectors per thread");
  using VI = Vec<I, kVec>;
  using VW = Vec<W, kVec>;

  extern __shared__ __align__(kDynamicSmemAlign) uint4 bwd_ring[];
  __shared__ ReduceSmem<K> smem;
  __shared__ ClusterRowExchange<K, kMaxPipelineStages> exchange;
  int phase = 0;
  platform::allow_dependent_grid();  // the finalize kernel may be scheduled early

  const int hidden = Shape::kHidden ? Shape::kHidden : p.hidden;
  const int G = Shape::kG ? Shape::kG : p.threads_per_row;  // threads of a row (of its slice)
  const int C = Shape::kC ? Shape::kC : p.ctas_per_row;
  // Row groups of the CTA (one CTA per row only): group `group` of G threads walks its own
  // rows with its own ring, as a CTA of G threads would. (kR: a tuned line's one group, a
  // constant, so that its kernel is the kernel without groups; 0: at run time.)
  const int R = Shape::kR ? Shape::kR : C == 1 ? static_cast<int>(blockDim.x) / G : 1;
  const int group = R > 1 ? static_cast<int>(threadIdx.x) / G : 0;
  const int nvec = hidden / kVec;
  const int slice = N * G;
  const int S = p.stages;
  const int t = static_cast<int>(threadIdx.x) - group * G;
  const int rank = C > 1 ? platform::cluster_rank() : 0;
  // The CTA's rows: first, first + row_step, ...; group r takes the r-th after each. Every
  // group of the CTA makes the same number of steps (a group past the last row idles through
  // its last), so that the CTA-wide barriers where there are no named ones (AMD) match up.
  const int64_t first = C > 1 ? blockIdx.x / C : int64_t{blockIdx.x} * R;
  const int64_t row_step = int64_t{gridDim.x} / C * R;
  const float inv_hidden = 1.f / static_cast<float>(hidden);
  const int barrier = R > 1 ? 1 + group : 0;  // the group's own (named) barrier

  exchange.begin(S, C);

  auto vec_of = [&](int i) { return rank * slice + i * G + t; };  // the row's vector index
  // The ring: x and dz of the group's next S rows.
  using Ring = BwdRing<Traits, Shape>;
  const Ring ring{reinterpret_cast<char*>(bwd_ring) + static_cast<size_t>(group) * S * Ring::stage_bytes(slice),
                  slice, G, t, rank * slice, nvec};
  const I* const inputs[2] = {static_cast<const I*>(p.x), static_cast<const I*>(p.dz)};
  auto issue = [&](int64_t row, int s) { ring.issue(inputs, row, p.rows, hidden, s); };

  platform::wait_for_prior_grid();  // programmatic dependent launch: nothing global before it
  // gamma's slice (and below, the first row's statistics) loaded before the ring's copies are
  // issued, so that their latency overlaps the copies' address arithmetic; and this CTA's
  // partials of its columns.
  const W* gamma = static_cast<const W*>(p.gamma);
  VW g[N];
  GradAccum<Traits, kVec> acc[N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    acc[i].clear();
    if (vec_of(i) < nvec) g[i].load(gamma + static_cast<int64_t>(vec_of(i)) * kVec);
  }

  // Up to 16 elements per thread, dy = dz * gamma stays in registers from the row terms to dx,
  // which then reads only x back from the ring.
  constexpr bool kHoldDy = N * kVec <= 16;
  [[maybe_unused]] float dy_r[kHoldDy ? N : 1][kVec];

  // The row's statistics are loaded a row ahead (relayed two rows ahead: below), and the added
  // gradient's slice before the reduction: neither load's latency is on the row's path (the
  // ring holds x and dz only).
  BwdMath<Traits, kShift> m_next{};
  if (first + group < p.rows) m_next = bwd_math<Traits, kShift>(p, first + group);
  // LayerNorm at 4 vectors per thread (64 fp32 partials: its registers full) relays them
  // instead, in a group wider than a warp: loaded by every thread, ptxas moved (mu, rsigma)
  // into uniform registers right after the loads, so every row waited for them (H200, ncu,
  // 1024x262144: 8.2 cycles per issued instruction, a third of them L1TEX stalls). Thread 0
  // of the group loads the pair of the row after next; at the start of the next row it stores
  // it in `relay`, which the group reads a row later, after the barrier of that row's
  // reduction (a slot is written again two rows later, after the barrier of the row between,
  // which every thread passes after reading it). Measured (tools/ab.sh, session 29, best of 2):
  // LayerNorm 1024x262144 629.2 -> 496.7 us; with it LayerNorm's 4-vector layouts won at 32768
  // and 65536 too (their lines). Relayed the same way without the row ahead (thread 0 loading
  // the next row's pair and storing it before this row's barrier), every kernel got slower but
  // this one: RMSNorm 32768x8192 +14%, bwd_add 4096x65536 +33% (the barrier waited for the load).
  // RMSNorm's bwd_add at 4 vectors relays too: its next rsigma stalled the same way
  // (tools/sass.sh --load-stalls; 120 registers, the added gradient's slice held across the
  // reduction); tools/ab.sh, session 30: 8192x5120 95.1 -> 89.7 us, fp16 1024x262144 628.1 ->
  // 521.8. Only bf16 LayerNorm was timed in session 29; fp16 and fp32 relay the same way (their
  // GPU tests pass). The relay counts on group_reduce's barrier on every row of a group wider
  // than a warp (reduce.cuh); 4 vectors per thread means one row group (plan_fits), so only
  // relay[.][0] is used.
  constexpr bool kRelay = (!Traits::kRmsNorm || Traits::kAddGrad) && N >= 4;
  const bool relayed = kRelay && G > kWarp;
  [[maybe_unused]] __shared__ float2 relay[2][kRelay ? kMaxBwdRowGroups : 1];
  // (thread 0) the pair `relay` gets at the start of the next row: at the top of row j, row
  // j + 1's; after its store, row j + 2's.
  [[maybe_unused]] float2 held{0.f, 0.f};
  [[maybe_unused]] auto pair_of = [&](int64_t r) {  // (mu, rsigma) of row r; zeros past the last
    if (r >= p.rows) return make_float2(0.f, 0.f);
    const BwdMath<Traits, kShift> n = bwd_math<Traits, kShift>(p, r);
    return make_float2(n.mu, n.rsigma);
  };
  if constexpr (kRelay) {
    if (relayed && t == 0) held = pair_of(first + group + row_step);
  }
  for (int s = 0; s < S; ++s) issue(first + group + s * row_step, s);
  int j = 0;
  for (int64_t base = first; base < p.rows; base += row_step, ++j) {
    const int64_t row = base + group;
    const bool have = R == 1 || row < p.rows;  // (R = 1: base is the row)
    const int s = j % S;
    BwdMath<Traits, kShift> m = m_next;
    if constexpr (kRelay) {
      if (relayed) {
        if (t == 0) {
          relay[j & 1][group] = held;  // the next row's, read after this row's barrier
          held = pair_of(row + 2 * row_step);
        }
        if (j > 0) {
          const float2 pair = relay[(j - 1) & 1][group];
          m.mu = pair.x;
          m.rsigma = pair.y;
        }
      }
    }
    if (!relayed && row + row_step < p.rows) m_next = bwd_math<Traits, kShift>(p, row + row_step);
    [[maybe_unused]] VI a[N];
    if constexpr (Traits::kAddGrad) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        if (have && vec_of(i) < nvec) {
          a[i] = load_add<Traits, kVec>(p, row * hidden + static_cast<int64_t>(vec_of(i)) * kVec);
        }
      }
    }
    ring.wait(S);  // row j's copies (this thread's) have landed
    VI* xs = ring.stage(s);  // [x slice][dz slice]

    Floats<K> part{};
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (have && vec_of(i) < nvec) {
        float xf[kVec], dzf[kVec], gf[kVec], yf[kVec];
        unpack_floats(xs[i * G + t], xf);
        unpack_floats(xs[slice + i * G + t], dzf);
        unpack_floats(g[i], gf);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          yf[k] = m.y(xf[k]);
          const float d = m.dy(dzf[k], gf[k]);
          if constexpr (kHoldDy) dy_r[i][k] = d;
          m.add_terms_of_dy(yf[k], d, part);
        }
        acc[i].add_of_y(yf, dzf);
      }
    }
    part = group_reduce(part, AddOp{}, G, 1, smem, phase, barrier);
    part = exchange.combine(part, AddOp{}, j, S, G, C, rank);
    const float c1 = part.v[0] * inv_hidden;
    const float c2 = Traits::kRmsNorm ? 0.f : part.v[K - 1] * inv_hidden;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int v = vec_of(i);
      if (have && v < nvec) {
        const int64_t off = row * hidden + static_cast<int64_t>(v) * kVec;
        if constexpr (kHoldDy) {
          store_dx_of_dy<Traits, kVec>(p, off, m, xs[i * G + t], dy_r[i], c1, c2, a[i]);
        } else {
          store_dx<Traits, kVec>(p, off, m, xs[i * G + t], xs[slice + i * G + t], g[i], c1, c2, a[i]);
        }
      }
    }
    // Refill this stage (this thread's own bytes, all read above) with the row after next.
    issue(row + S * row_step, s);
  }
  exchange.end(j, C);
  platform::cp_async_wait_all();  // (the copies issued past the last row are empty groups)

  // One CTA per row in a cluster of P: the P CTAs' partials summed into the cluster's row.
  const int P = C == 1 ? p.partial_cluster : 1;
  if (P > 1) {
    cluster_sum_partials<Traits, kVec, N>(p, acc, reinterpret_cast<float*>(bwd_ring), G, nvec, P, blockIdx.x / P);
    return;
  }
  // R row groups: theirs summed into the CTA's row.
  if (R > 1) {
    cta_sum_partials<Traits, kVec, N>(p, acc, reinterpret_cast<float*>(bwd_ring), G, t, group, R, nvec, blockIdx.x);
    return;
  }
  // This CTA's columns of partial row `program` (the cluster).
  const int64_t program = first;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int v = vec_of(i);
    if (v < nvec) {
#pragma unroll
      for (int o = 0; o < K; ++o) acc[i].store(p, o, program, v * kVec);
    }
  }
}

// LayerNorm: gamma's offset (zero-centered or not) fixed at compile time, no add per element
// (RMSNorm keeps it at run time: at 4096x65536 its two bodies measured 4% slower). With
// LayerNorm's dx in two fmas, measured on the H200 (session 22, `tools/ab.sh`, best of 2):
// LayerNorm 8192x32768 463.7 -> 452.8 us, 4096x65536 504.3 -> 484.4, 1024x262144 711.7 ->
// 671.8; RMSNorm and the shorter rows unchanged (within 1%).
template <typename Traits, typename Shape>
__global__ void __launch_bounds__(kMaxCtaThreads, 1) norm_bwd_pipelined_kernel(const BwdParams p) {
  if constexpr (Traits::kRmsNorm) {
    norm_bwd_pipelined_body<Traits, Shape, -1>(p);
  } else if (p.zero_centered_gamma) {
    norm_bwd_pipelined_body<Traits, Shape, 1>(p);
  } else {
    norm_bwd_pipelined_body<Traits, Shape, 0>(p);
  }
}

}  // namespace normtune
