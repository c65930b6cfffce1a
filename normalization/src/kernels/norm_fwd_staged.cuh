// Forward RMSNorm / LayerNorm (optionally with the residual add), staged layout: what each
// CTA holds of a row is copied global -> shared memory with cp.async, so that x is read
// from HBM once, every load of the slice is in flight at the same time without occupying
// registers, and several short-lived CTAs per SM overlap one another's loads, reductions
// and stores (the structure of QuACK's forward; see ../shared/PERF.md).
//
// Layout. A CTA holds R = blockDim / G rows, or, with a cluster of C CTAs per row, the C-th
// part of one row (R = 1). Thread t of a row's group copies, and later reads back, the
// vectors  v = rank * (N * G) + i * G + t  (i < N) of the row: only its own bytes, so no
// barrier is needed between the copy and the first read. The CTA then exits: the grid has
// one CTA (one cluster) per row tile.
// Reduction: warp shuffles, one CTA barrier (reduce.cuh), and with C > 1 every CTA sends its
// partial to every CTA of the cluster (st.async into a slot of the peer's shared memory,
// counted on the peer's transaction barrier) and combines the C slots in rank order: the
// same bits in every CTA. The only cluster barrier is arrived at on entry (after the barrier
// initialization) and waited on just before the first remote store, long after the loads
// were issued. A CTA leaves only after every peer's partial has landed in it, and sends
// nothing after that, so no barrier is needed on exit.
// With `stage_weights` (few rows: one wave or less) gamma and beta are copied with x, so
// their latency overlaps x's instead of following the reduction.
// Programmatic dependent launch: nothing global is touched before wait_for_prior_grid().
#pragma once

#include <type_traits>

#include "kernels/block_quant.cuh"
#include "kernels/norm_fwd.cuh"

namespace normtune {

// Shared memory of one row group: x, then the residual (fused add), then gamma and beta (when
// staged), each n * G vectors.
template <typename Traits, int kVec>
struct StagedLayout {
  using VI = Vec<typename Traits::Input, kVec>;
  using VW = Vec<typename Traits::Weight, kVec>;
  static constexpr int kWeightArrays = Traits::kRmsNorm ? 1 : 2;
  static constexpr size_t group_bytes(int slice_vecs, bool stage_weights) {
    return static_cast<size_t>(slice_vecs) *
           (sizeof(VI) * (Traits::kResidualAdd ? 2 : 1) + (stage_weights ? sizeof(VW) * kWeightArrays : 0));
  }
};

// Copies one vector of T (16 bytes or a multiple) global -> shared.
template <typename V>
__device__ __forceinline__ void stage_vec(V* smem, const V* gmem) {
  static_assert(sizeof(V) % 16 == 0, "staged vectors are whole 16-byte chunks");
#pragma unroll
  for (int c = 0; c < static_cast<int>(sizeof(V) / 16); ++c) {
    platform::cp_async_16(reinterpret_cast<char*>(smem) + 16 * c, reinterpret_cast<const char*>(gmem) + 16 * c);
  }
}

// Register budget. The staged kernel's CTAs are short-lived and several share an SM; at 64
// registers (two 512-thread CTAs) the tuned RMSNorm rows of up to 4 vectors per thread took 46,
// and registers capped residency below what shared memory allows (ncu on the H200, 8192 x 7168
// bf16, 224 threads: 5 CTAs per SM by registers, 8 by shared memory, DRAM at 77% of peak). Those
// kernels get 40 (three 512-thread CTAs' worth); the fused add and block-scaled z hold more per
// vector and keep 64.
// LayerNorm's tuned rows of up to 4 vectors per thread hold gamma and beta from the start (32
// registers at 4 bf16 vectors) and took all 64; at 40 ptxas spilled 60-72 bytes. They get 48
// (ten 128-thread CTAs per SM where 64 gave eight; H200, best of 2, docs/perf/
// h200_2026-12-05_s46/: with FP8 z 0.93-0.95 of the time at 4096x4096 .. 32768x8192, with a
// bf16 z unmoved, one row of FP8 z per call in a graph 2.01 -> 2.37 us), which bounds their CTAs to
// kStagedLnMaxThreads threads (every such table line has at most 256: a static_assert where the
// tuned entries are instantiated; a tuned entry launches only its own plan, and the general
// entry's shapes, kHidden 0, keep kMaxCtaThreads).
template <typename Traits, typename Shape>
inline constexpr bool kStagedLnBudget = !Traits::kRmsNorm && !Traits::kResidualAdd && !Traits::kBlockScaled &&
                                        Shape::kN >= 1 && Shape::kN <= 4 && Shape::kHidden > 0 && Shape::kG > 0;
inline constexpr int kStagedLnMaxThreads = 256;
template <typename Traits, typename Shape>
inline constexpr int kStagedMaxThreads = kStagedLnBudget<Traits, Shape> ? kStagedLnMaxThreads : kMaxCtaThreads;
template <typename Traits, typename Shape>
inline constexpr int kStagedMinBlocks =
    kStagedLnBudget<Traits, Shape> ? 5
    : Traits::kRmsNorm && !Traits::kResidualAdd && !Traits::kBlockScaled && Shape::kN >= 1 && Shape::kN <= 4 ? 3
                                                                                                            : 2;

template <typename Traits, typename Shape>
__global__ void __launch_bounds__((kStagedMaxThreads<Traits, Shape>), (kStagedMinBlocks<Traits, Shape>)) norm_fwd_staged_kernel(const FwdParams p) {
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  using O = typename Traits::Output;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr bool kAdd = Traits::kResidualAdd;
  constexpr int kVec = Shape::kVec;
  constexpr int K = kRms ? 1 : 3;
  using Layout = StagedLayout<Traits, kVec>;
  using VI = typename Layout::VI;
  using VW = typename Layout::VW;

  extern __shared__ __align__(kDynamicSmemAlign) uint4 staged_smem[];
  __shared__ ReduceSmem<K> smem;
  __shared__ uint64_t exchange_bar;
  __shared__ float slots[kMaxCtasPerRow][K];  // [rank]: the partial of CTA `rank` of the cluster
  __shared__ float block_table[kBlockTableSize<Traits>];  // NVFP4 z: BlockQuantizer's multipliers
  int phase = 0;

  const int hidden = Shape::kHidden ? Shape::kHidden : p.hidden;
  const int G = Shape::kG ? Shape::kG : p.threads_per_row;
  const int C = Shape::kC ? Shape::kC : p.ctas_per_row;
  const int N = Shape::kN ? Shape::kN : p.vecs_per_thread;
  const int nvec = hidden / kVec;
  const int slice = N * G;  // vectors of a row this CTA holds
  const int t = threadIdx.x % G;
  const int group = threadIdx.x / G;
  const int rank = C > 1 ? platform::cluster_rank() : 0;
  const int64_t row = static_cast<int64_t>(blockIdx.x / C) * (blockDim.x / G) + group;
  const bool row_ok = row < p.rows;
  const bool stage_weights = p.stage_weights;

  if (C > 1) {
    if (threadIdx.x == 0) {
      platform::mbarrier_init(&exchange_bar, 1);
      platform::fence_mbarrier_init_cluster();
    }
    platform::cluster_arrive_relaxed();  // waited on before the first remote store
  }

  // This group's shared memory.
  char* base = reinterpret_cast<char*>(staged_smem) + group * Layout::group_bytes(slice, stage_weights);
  VI* xs = reinterpret_cast<VI*>(base);
  VI* rs = xs + slice;                                              // fused add: the residual
  VW* gs = reinterpret_cast<VW*>(base + slice * sizeof(VI) * (kAdd ? 2 : 1));  // staged gamma
  VW* bs = gs + slice;                                              // staged beta (LayerNorm)

  const I* x = static_cast<const I*>(p.x) + row * hidden;
  const W* gamma = static_cast<const W*>(p.gamma);
  const W* beta = static_cast<const W*>(p.beta);
  auto vec_of = [&](int i) { return rank * slice + i * G + t; };  // the row's vector index

  // A compile-time shape that covers the row exactly (every tuned line): every vector of every
  // thread lies in the row.
  constexpr bool kExact = Shape::kN > 0 && Shape::kHidden > 0 && Shape::kG > 0 && Shape::kC > 0 &&
                          Shape::kN * Shape::kG * Shape::kC * kVec == Shape::kHidden;
  // (The addresses as the first vector's plus i * G vectors: from vec_of(i) widened to 64
  // bits each address took its own registers.)
  const int64_t off0 = static_cast<int64_t>(vec_of(0)) * kVec;
  auto stage_inputs = [&](int i) {
    const int64_t off = off0 + static_cast<int64_t>(i) * G * kVec;
    const int s = i * G + t;
    stage_vec(xs + s, reinterpret_cast<const VI*>(x + off));
    if constexpr (kAdd) stage_vec(rs + s, reinterpret_cast<const VI*>(static_cast<const I*>(p.residual) + row * hidden + off));
  };
  auto stage_weights_of = [&](int i) {
    const int64_t off = off0 + static_cast<int64_t>(i) * G * kVec;
    const int s = i * G + t;
    stage_vec(gs + s, reinterpret_cast<const VW*>(gamma + off));
    if constexpr (!kRms) stage_vec(bs + s, reinterpret_cast<const VW*>(beta + off));
  };
  auto stage = [&](int i) {
    stage_inputs(i);
    if (stage_weights) stage_weights_of(i);
  };
  platform::wait_for_prior_grid();
  if (row_ok) {
    if constexpr (kExact && Shape::kC == 1) {
      // (Unrolled with no bound to test: each copy's addresses a constant offset from the
      // first's, where the loop of four with its bound test took about fifty instructions an
      // iteration. The weights in a loop of their own: interleaved, their addresses held
      // registers across x's copies.)
#pragma unroll
      for (int i = 0; i < Shape::kN; ++i) stage_inputs(i);
      if (stage_weights) {
#pragma unroll
        for (int i = 0; i < Shape::kN; ++i) stage_weights_of(i);
      }
    } else {
#pragma unroll 4
      for (int i = 0; i < N; ++i) {
        if (vec_of(i) >= nvec) break;
        stage(i);
      }
    }
  }
  // A compile-time vector count and weights not staged: the slice's gamma (and LayerNorm's
  // beta) is loaded into registers while x's copies are in flight, as QuACK does, rather than
  // vector by vector after the reduction (tools/ab.sh on the H200, sessions 30-31, bf16:
  // RMSNorm 4096x4096 21.25 -> 20.70 µs, FP8 z 19.90 -> 18.59, 4096x8192 FP8 34.50 -> 31.30;
  // LayerNorm 4096x8192 at 4 vectors per thread 41.76 -> 38.50). LayerNorm only up to 4
  // vectors per thread: gamma and beta held that long spilled at 8 and made its lines up to
  // 1.6x slower.
  constexpr bool kEarlyWeights = (kRms || Shape::kN <= 4) && Shape::kN > 0 && !Traits::kBlockScaled;
  constexpr int kPre = kEarlyWeights ? Shape::kN : 1;
  [[maybe_unused]] VW gpre[kPre];
  [[maybe_unused]] VW bpre[kRms ? 1 : kPre];
  if constexpr (kEarlyWeights) {
    if (!stage_weights) {
#pragma unroll
      for (int i = 0; i < kPre; ++i) {
        const int v = vec_of(i);
        if (v < nvec) {
          gpre[i].load(gamma + static_cast<int64_t>(v) * kVec);
          if constexpr (!kRms) bpre[i].load(beta + static_cast<int64_t>(v) * kVec);
        }
      }
    }
  }
  if constexpr (kBlockTableSize<Traits> > 1) {  // while the copies are in flight
    BlockQuantizer<Traits>::fill_table(p, block_table);
    __syncthreads();
  }
  platform::cp_async_wait_all();

  RowStats<kRms> stats;
  if (row_ok) {
#pragma unroll 4
    for (int i = 0; i < N; ++i) {
      const int v = vec_of(i);
      if (v >= nvec) break;
      const int s = i * G + t;
      VI in = xs[s];
      if constexpr (kAdd) {
        const VI r = rs[s];
#pragma unroll
        for (int k = 0; k < kVec; ++k) in.v[k] = from_float<I>(to_float(in.v[k]) + to_float(r.v[k]));
        in.store(static_cast<I*>(p.residual_out) + row * hidden + static_cast<int64_t>(v) * kVec);
        xs[s] = in;
      }
      stats.add(in);
    }
  }

  Floats<K> part;
  if constexpr (kRms) {
    part = group_reduce(Floats<1>{{stats.a}}, AddOp{}, G, 1, smem, phase);
  } else {
    part = row_mean_var<Shape>(stats, G, 1, smem, phase);
  }
  if (C > 1) {
    if (threadIdx.x == 0) platform::mbarrier_arrive_expect_tx(&exchange_bar, C * K * sizeof(float));
    platform::cluster_wait_acquire();  // every CTA of the cluster has initialized its barrier
    if (static_cast<int>(threadIdx.x) < C) {
#pragma unroll
      for (int k = 0; k < K; ++k) platform::st_async_cluster(&slots[rank][k], part.v[k], &exchange_bar, threadIdx.x);
    }
    platform::mbarrier_wait_parity(&exchange_bar, 0);
#pragma unroll
    for (int k = 0; k < K; ++k) part.v[k] = slots[0][k];
    for (int r = 1; r < C; ++r) {
      Floats<K> next;
#pragma unroll
      for (int k = 0; k < K; ++k) next.v[k] = slots[r][k];
      if constexpr (kRms) {
        part = AddOp{}(part, next);
      } else {
        part = MeanVarOp{}(part, next);
      }
    }
  }
  platform::allow_dependent_grid();

  const float inv_hidden = 1.f / static_cast<float>(hidden);
  const float mean = kRms ? 0.f : part.v[K == 3 ? 1 : 0];
  const float rsigma = rsqrtf(part.v[K - 1] * inv_hidden + p.epsilon);
  OutputScale q = output_scale<Traits>(p);
  if (row_ok && t == 0 && rank == 0) {
    p.rsigma[row] = rsigma;
    if constexpr (!kRms) p.mu[row] = mean;
  }
  [[maybe_unused]] O* z = static_cast<O*>(p.z) + row * hidden;  // (unscaled z: element-addressed)
  // The output loop below runs as f(staged weights?, zero-centered gamma?), each a compile-time
  // choice: a run-time one inside the loop issued both ways' loads and unpacking, element by
  // element.
  auto for_each_variant = [&](auto&& f) {
    with_gamma_shift(p.zero_centered_gamma, [&](auto shift) {
      if (stage_weights) {
        f(std::true_type{}, shift);
      } else {
        f(std::false_type{}, shift);
      }
    });
  };
  if constexpr (Traits::kBlockScaled) {
    // Block-scaled z (kernels/block_quant.cuh): store_block_scaled_part over this thread's
    // vectors, in each variant (for_each_variant). The exact shapes compute the vectors of a
    // missing row from whatever its shared memory holds (nothing of it is stored).
    const BlockQuantizer<Traits> quant(p, block_table);
    // NVFP4's multiplier folded into the e2m1 conversion (block_codes) on the tuned lines of one
    // CTA per row: 1.2-4.3% faster at 4096-32768 on the H200 (RMSNorm), where those lines are
    // bound by instruction issue; the cluster line at h65536 took two registers more (41: one
    // 512-thread CTA per SM fewer) and ran 7% slower with it (docs/perf/h200_2026-12-05_s43).
    constexpr bool kFoldNvfp4 = Shape::kC == 1;
    // RMSNorm there: the values x * gamma, rsigma in the block's multiplier (block_codes).
    constexpr bool kRowScale = kRms && kFoldNvfp4;
    auto blocks = [&](auto staged_weights, auto shift) {
      const NormValue<kRms, decltype(shift)::value> norm(mean, kRowScale ? 1.f : rsigma);
      auto values = [&](int i, int v, float(&y)[kVec]) {
        const int s = i * G + t;
        VW g;
        [[maybe_unused]] VW bt;
        if constexpr (decltype(staged_weights)::value) {
          g = gs[s];
          if constexpr (!kRms) bt = bs[s];
        } else {
          g.load(gamma + static_cast<int64_t>(v) * kVec);
          if constexpr (!kRms) bt.load(beta + static_cast<int64_t>(v) * kVec);
        }
        // (Unpacked word by word: element by element, a bf16 pair's upper half took a
        // permute and a shift where a mask does.)
        float xf[kVec], gf[kVec], bf[kVec];
        unpack_floats(xs[s], xf);
        unpack_floats(g, gf);
        if constexpr (!kRms) unpack_floats(bt, bf);
#pragma unroll
        for (int k = 0; k < kVec; ++k) y[k] = norm(xf[k], gf[k], kRms ? 0.f : bf[k]);
      };
      store_block_scaled_part<Traits, kVec, Shape::kN, kExact, kFoldNvfp4, kRowScale>(
          p, quant, row, row_ok, hidden, G, N, vec_of(0), values, rsigma);
    };
    for_each_variant(blocks);
  } else if (row_ok) {
    auto outputs = [&](auto staged_weights, auto shift) {
      const NormValue<kRms, decltype(shift)::value> norm(mean, rsigma);
      if constexpr (kEarlyWeights && !decltype(staged_weights)::value) {
#pragma unroll
        for (int i = 0; i < kPre; ++i) {
          const int v = vec_of(i);
          if (v >= nvec) break;
          store_output(xs[i * G + t], gpre[i], bpre[kRms ? 0 : i], norm, z + static_cast<int64_t>(v) * kVec, q);
        }
      } else {
        // In runs of kRun vectors, each run's weights loaded before its first store to z: a
        // load after a store waits for it (the compiler cannot tell z from gamma), so weights
        // loaded vector by vector cost one L1/L2 round trip per vector
        // (tools/sass_store_load_chains.py).
        constexpr int kRun = 4;
#pragma unroll 1
        for (int i0 = 0; i0 < N; i0 += kRun) {
          VW g[kRun];
          [[maybe_unused]] VW b[kRms ? 1 : kRun];
#pragma unroll
          for (int j = 0; j < kRun; ++j) {
            const int i = i0 + j, v = vec_of(i);
            if (i < N && v < nvec) {
              if constexpr (decltype(staged_weights)::value) {
                g[j] = gs[i * G + t];
                if constexpr (!kRms) b[j] = bs[i * G + t];
              } else {
                g[j].load(gamma + static_cast<int64_t>(v) * kVec);
                if constexpr (!kRms) b[j].load(beta + static_cast<int64_t>(v) * kVec);
              }
            }
          }
#pragma unroll
          for (int j = 0; j < kRun; ++j) {
            const int i = i0 + j, v = vec_of(i);
            if (i < N && v < nvec) {
              store_output(xs[i * G + t], g[j], b[kRms ? 0 : j], norm, z + static_cast<int64_t>(v) * kVec, q);
            }
          }
        }
      }
    };
    for_each_variant(outputs);
  }
  finish_output<Traits>(p, q, &smem.warp_parts[0][0][0]);
}

}  // namespace normtune
