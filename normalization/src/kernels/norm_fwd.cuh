// Forward RMSNorm / LayerNorm, optionally fused with a residual add.
//
//   RMSNorm:   rsigma = 1 / sqrt(mean(x^2) + eps),             z = x * rsigma * g
//   LayerNorm: mu = mean(x), rsigma = 1 / sqrt(mean((x - mu)^2) + eps),
//              z = (x - mu) * rsigma * g + beta
//   g = gamma, or gamma + 1 with zero-centered gamma (added in fp32).
//   Fused add: residual_out = x + residual (rounded to x's type), then the norm of
//   residual_out, so that the result equals the unfused pair of calls bit for bit.
// Statistics and the output are computed in fp32; mu and rsigma are written in fp32.
//
// Work layout. A row of H elements is nvec = H / kVec vectors. A row belongs to a group of
// G consecutive threads of one CTA, or, with a cluster of C CTAs, to the C CTAs of the
// cluster (then G is the whole CTA). Thread t of the group holds the vectors
//   v = (i * C + cta_rank) * G + t,   i < kN,
// in registers (each pass over i reads G consecutive vectors per CTA: coalesced), so x is
// read once. A CTA holds R = blockDim / G rows at a time and walks row tiles grid-stride
// (persistent), keeping its gamma (and beta) in registers when kN is small.
// kN == 0 is the streaming variant for rows too long for registers: it re-reads the row
// (from L2) instead of holding it.
// LayerNorm's mean and variance come from one reduction (one barrier per row) of per-thread
// (count, mean, M2) partials merged with Chan's formula (see reduce.cuh).
#pragma once

#include <cstdint>
#include <type_traits>

#include <normtune/registry/norm_key.h>

#include "kernels/reduce.cuh"
#include "kernels/norm_fwd_args.h"
#include "kernels/vec.cuh"

namespace normtune {

// What is computed: element types, the norm, the stage (Forward or ForwardAdd) and z's
// scaling (kNone: unquantized or per-tensor FP8; otherwise block-scaled, kernels/block_scale.h:
// kMxfp8_1D, FP8 with an E8M0 scale per 32 consecutive elements of a row; kBlock1D, FP8 with
// an fp32 scale per 128; kNvfp4_1D, e2m1 with an E4M3 scale per 16; kMxfp4_1D, e2m1 with an
// E8M0 scale per 32).
template <typename W, typename I, typename O, NormType kNorm_, Stage kStage_,
          ScalingMode kScaling_ = ScalingMode::kNone>
struct FwdTraits {
  static_assert(kStage_ == Stage::kForward || kStage_ == Stage::kForwardAdd, "a forward stage");
  static_assert(kScaling_ != ScalingMode::kBlock2D, "forward outputs: unquantized, per-tensor FP8 or 1-D blocks");
  static_assert((kScaling_ == ScalingMode::kNvfp4_1D || kScaling_ == ScalingMode::kMxfp4_1D) ==
                    (Elem<O>::kDType == DType::kFloat4E2M1),
                "e2m1 z exactly with NVFP4 or MXFP4 scaling");
  static_assert(kScaling_ == ScalingMode::kNone || Elem<O>::kDType == DType::kFloat4E2M1 || kIsFp8<O>,
                "block-scaled z holds fp8 or e2m1 codes");
  using Weight = W;
  using Input = I;
  using Output = O;
  static constexpr NormType kNorm = kNorm_;
  static constexpr Stage kStage = kStage_;
  static constexpr ScalingMode kScaling = kScaling_;
  static constexpr bool kMxfp8 = kScaling_ == ScalingMode::kMxfp8_1D;
  static constexpr bool kBlockScaled = kScaling_ != ScalingMode::kNone;
  static constexpr bool kRmsNorm = kNorm_ == NormType::kRMSNorm;
  static constexpr bool kResidualAdd = kStage_ == Stage::kForwardAdd;
};

// The compile-time part of a FwdPlan, as the kernel sees it: 0 means "decided at run time";
// kN == 0 is FwdLayout::kStreaming (see make_fwd_shape in launch/norm_fwd_launch.cuh).
template <int kVec_, int kN_, int kHidden_ = 0, int kG_ = 0, int kC_ = 0,
          bool kDynamicRows_ = false>
struct FwdShape {
  static constexpr int kVec = kVec_;        // elements per vector
  static constexpr int kN = kN_;            // vectors per thread held in registers; 0: stream
  static constexpr int kHidden = kHidden_;  // compile-time hidden size (tuned kernels)
  static constexpr int kG = kG_;            // threads per row
  static constexpr int kC = kC_;            // CTAs per row (cluster size)
  // The pipelined layout on clusters: rows drawn from the row counter (FwdPlan::dynamic_rows;
  // a tuned line's, so kC is fixed too).
  static constexpr bool kDynamicRows = kDynamicRows_;
  static_assert(!kDynamicRows || kC_ > 1, "dynamic_rows: a compile-time cluster");
};

// The input of the norm, vector by vector: x, or x + residual added in fp32 and rounded to
// I (written to residual_out when `store`, once per element).
template <typename I, int kVec, bool kAdd>
__device__ __forceinline__ void load_input(const FwdParams& p, int64_t offset, Vec<I, kVec>& in,
                                           bool store) {
  in.load(static_cast<const I*>(p.x) + offset);
  if constexpr (kAdd) {
    Vec<I, kVec> r;
    r.load(static_cast<const I*>(p.residual) + offset);
#pragma unroll
    for (int k = 0; k < kVec; ++k) in.v[k] = from_float<I>(to_float(in.v[k]) + to_float(r.v[k]));
    if (store) in.store(static_cast<I*>(p.residual_out) + offset);
  }
}

// A later pass over a row the first pass has read: the input again (x, or residual_out).
template <typename I, int kVec, bool kAdd>
__device__ __forceinline__ void reload_input(const FwdParams& p, int64_t offset, Vec<I, kVec>& in) {
  in.load(static_cast<const I*>(kAdd ? p.residual_out : p.x) + offset);
}

// Per-thread statistics of the row. RMSNorm: sum(v^2). LayerNorm: the count, sum(d) and
// sum(d^2) of d = v - shift, shift being the thread's first value (short sums of a local
// spread: no cancellation); to_mean_var() turns them into (count, mean, M2) for MeanVarOp.
template <bool kRms>
struct RowStats {
  float a = 0.f, b = 0.f, count = 0.f, shift = 0.f;

  template <typename I, int kVec>
  __device__ __forceinline__ void add(const Vec<I, kVec>& in) {
    float x[kVec];
    unpack_floats(in, x);
    if constexpr (kRms) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) a += x[k] * x[k];
    } else {
      if (count == 0.f) shift = x[0];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float d = x[k] - shift;
        a += d;
        b += d * d;
      }
      count += kVec;
    }
  }
  __device__ __forceinline__ Floats<3> to_mean_var() const {
    if (count == 0.f) return {{0.f, 0.f, 0.f}};
    const float m = __fdividef(a, count);  // count: a small integer (see MeanVarOp)
    return {{count, shift + m, fmaxf(b - a * m, 0.f)}};
  }
  // (mean, V) for equal_count_mean_var, V the mean squared deviation; inv_count: 1 / count,
  // a constant of the layout. (No elements: (0, 0).)
  __device__ __forceinline__ Floats<2> to_mean_v(float inv_count) const {
    const float m = a * inv_count;
    return {{shift + m, fmaxf(b - a * m, 0.f) * inv_count}};
  }
};

// Whether every thread of a row holds as many elements as every other (then LayerNorm's row
// statistics merge by equal_count_mean_var): a tuned line (hidden size, threads per row,
// vectors per thread and CTAs per row constants) whose layout covers the row exactly.
template <typename Shape>
inline constexpr bool kEqualRowCounts = Shape::kHidden > 0 && Shape::kG > 0 && Shape::kN > 0 && Shape::kC > 0 &&
                                        Shape::kHidden == Shape::kC * Shape::kG * Shape::kN * Shape::kVec;

// LayerNorm's row statistics (count, mean, M2) over the `group` threads of a row (and `cluster`
// CTAs, as group_reduce): where every thread holds Shape::kN vectors (kEqualRowCounts), merged
// by equal_count_mean_var, with no reciprocal on the butterfly's steps (H100, bf16, session 47,
// docs/perf/h100_2026-12-05_s47/, the staged lines: NVFP4 / MXFP4 z 0.94-0.98 of the time at
// 8192x7168 .. 8192x32768, one row of FP8 z per call in a graph 2.40 -> 2.10 us, a bf16 z
// unmoved); else by MeanVarOp. (The staged and register layouts; the pipelined one keeps
// MeanVarOp, norm_fwd_pipelined.cuh.)
template <typename Shape>
__device__ __forceinline__ Floats<3> row_mean_var(const RowStats<false>& stats, int group, int cluster,
                                                  ReduceSmem<3>& smem, int& phase) {
  if constexpr (kEqualRowCounts<Shape>) {
    constexpr int kCount = Shape::kN * Shape::kVec;
    return equal_count_mean_var(stats.to_mean_v(1.f / kCount), static_cast<float>(kCount), group, cluster, smem,
                                phase);
  } else {
    return group_reduce(stats.to_mean_var(), MeanVarOp{}, group, cluster, smem, phase);
  }
}

// What the output stage needs besides the statistics: the FP8 scale and this thread's
// running max |value| (FP8 z: of the values before scaling; a high-precision z with an amax
// buffer, `track` set: of the outputs as rounded to z's type). Unused for MXFP8 z.
struct OutputScale {
  float scale = 1.f;
  float amax = 0.f;
  bool track = false;
};

// One output value in fp32: (x - mean) * rsigma * g (+ b), g = gamma, or gamma + shift with
// kShift (zero-centered gamma; without kShift no add is spent on it); LayerNorm's beta joins
// in one fma. (x - mean) is rounded before the product, as TE does:
// the one-fma form x * rsigma - mean * rsigma saves an instruction per element but is off by
// up to 2^-24 |mean| rsigma, visible where a row is (nearly) constant and rsigma is
// 1 / sqrt(eps) (a row of 100s: 2^-24 * 100 * 316 = 0.002, where z should be beta). Block-
// scaled z does not hide it: a block's step follows its own values, so a block of beta near 0
// would encode the error. (On the staged block-scaled LayerNorm lines it measured 1-4% faster,
// H200 session 46, docs/perf/h200_2026-12-05_s46/; kept out for this reason.)
// With kShift, `shift` is what is added to gamma: 1 (with_gamma_shift's zero-centered path), or
// a run-time 0 or 1 where one loop serves both (the registers and pipelined kernels: two
// copies of the output loop spilled at 64 registers, 24-116 bytes in their 2- and 4-vector
// fp16 kernels; the staged kernels, one row per CTA, keep the compile-time choice).
template <bool kRms, bool kShift>
struct NormValue {
  float mean, rsigma, shift;
  __device__ __forceinline__ NormValue(float mu, float rs, float gamma_shift = 1.f)
      : mean(mu), rsigma(rs), shift(gamma_shift) {}
  __device__ __forceinline__ float operator()(float x, float g, float b) const {
    const float gs = kShift ? g + shift : g;
    if constexpr (kRms) return x * rsigma * gs;
    return fmaf((x - mean) * rsigma, gs, b);
  }
};

// Calls f(std::true_type) for zero-centered gamma, f(std::false_type) otherwise: the output
// loops are compiled once for each.
template <typename F>
__device__ __forceinline__ void with_gamma_shift(bool zero_centered, F&& f) {
  if (zero_centered) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

template <bool kRms, bool kShift, typename I, typename W, typename O, int kVec>
__device__ __forceinline__ void store_output(const Vec<I, kVec>& in, const Vec<W, kVec>& g,
                                             const Vec<W, kVec>& b, const NormValue<kRms, kShift>& norm,
                                             O* z, OutputScale& q) {
  float x[kVec], gf[kVec], bf[kVec], y[kVec];
  unpack_floats(in, x);
  unpack_floats(g, gf);
  if constexpr (!kRms) unpack_floats(b, bf);
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    y[k] = norm(x[k], gf[k], kRms ? 0.f : bf[k]);
    if constexpr (kIsFp8<O>) {  // per-tensor FP8 (block-scaled outputs take their own path)
      q.amax = fmaxf(q.amax, fabsf(y[k]));  // before scaling; fmaxf drops a NaN
      y[k] *= q.scale;
    }
  }
  if constexpr (kIsFp8<O>) {
    store_floats(y, z);
  } else if constexpr (kHalfWords<O, kVec>) {
    uint32_t w[kVec / 2];
    pack_halves<O>(y, w);
    store_words(w, z);
    if (q.track) {
      float r[kVec];
      unpack_halves<O>(w, r);
#pragma unroll
      for (int k = 0; k < kVec; ++k) q.amax = fmaxf(q.amax, fabsf(r[k]));
    }
  } else {
    Vec<O, kVec> out;
    convert_floats(y, out);
    out.store(z);
    if (q.track) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) q.amax = fmaxf(q.amax, fabsf(to_float(out.v[k])));
    }
  }
}

// Whether z is FP8 with one per-tensor scale (not block-scaled).
template <typename Traits>
inline constexpr bool kTensorScaled = kIsFp8<typename Traits::Output> && !Traits::kBlockScaled;
// Whether z may come with an amax (per-tensor FP8, or high precision: not block-scaled).
template <typename Traits>
inline constexpr bool kHasAmax = !Traits::kBlockScaled;

// The scale of a per-tensor FP8 output (1 for other outputs: never read), and whether an
// amax is kept.
template <typename Traits>
__device__ __forceinline__ OutputScale output_scale(const FwdParams& p) {
  OutputScale q;
  if constexpr (kTensorScaled<Traits>) q.scale = *p.scale;
  if constexpr (kHasAmax<Traits>) q.track = p.amax != nullptr;
  return q;
}

// The CTA's max |value| into *amax (one atomic per CTA: the max of non-negative floats is
// the max of their bit patterns as integers, whatever the order), and for FP8 z 1 / scale
// into *scale_inv by CTA 0. Every thread of the CTA calls it, once, at the end.
template <typename Traits>
__device__ __forceinline__ void finish_output(const FwdParams& p, const OutputScale& q, float* warp_max) {
  if constexpr (kTensorScaled<Traits>) {
    if (p.scale_inv != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *p.scale_inv = 1.f / q.scale;
  }
  if constexpr (kHasAmax<Traits>) {
    if (!q.track) return;  // the same for every thread (p.amax)
    float m = q.amax;
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) m = fmaxf(m, platform::shfl_xor(m, offset));
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    __syncthreads();  // warp_max may be shared memory a reduction just read
    if (lane == 0) warp_max[warp] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < static_cast<int>((blockDim.x + kWarp - 1) / kWarp); ++w) m = fmaxf(m, warp_max[w]);
      // Most CTAs find the running max already as large: a plain read spares them the
      // atomic on the one shared address (a stale read only costs an atomic).
      if (__float_as_int(m) > *reinterpret_cast<const volatile int*>(p.amax)) {
        atomicMax(reinterpret_cast<int*>(p.amax), __float_as_int(m));
      }
    }
  }
}

// Register budget: 64 per thread (1024 resident threads per SM) for rows held in up to 4
// vectors per thread; up to 128 for 8 vectors, or streaming. (Measured on the H200: a
// LayerNorm row of 4 vectors runs faster at 64 registers with a few spills than at 128.)
// 40 (three 512-thread CTAs' worth) for the tuned RMSNorm lines of 1 or 2 vectors per thread
// with an unscaled z of 16 or 32 bits, the short rows (H200, bf16, best of 2 in two runs:
// 65536 x 128 13.41 -> 13.06 µs, 131072 x 256 39.10 -> 38.69; docs/perf/h200_2026-12-04_s39/).
// Not for the others: at 40 the fused add's 2-vector lines ran 7-21% slower, LayerNorm with FP8
// z at 128 9%, RMSNorm with FP8 z at 128-256 1%, and the general 2-vector kernels spill
// (RMSNorm 80 bytes). LayerNorm bf16 at 128 on RMSNorm's line (2 vectors, 8 threads, 64 rows,
// persistent, 40 registers, no spill) ran 5% slower than its 4 x 4 x 16 line at 64 (65536 x 128:
// 15.20 vs 14.46 µs, docs/perf/h200_2026-12-05_s46/).
template <typename Traits, typename Shape>
inline constexpr bool kFwdShortRowBudget =
    Shape::kHidden > 0 && Shape::kN >= 1 && Shape::kN <= 2 && Traits::kRmsNorm &&
    !Traits::kResidualAdd && !kIsFp8<typename Traits::Output>;
template <typename Traits, typename Shape>
inline constexpr int kFwdMinBlocks = kFwdShortRowBudget<Traits, Shape>  ? 3
                                     : Shape::kN >= 1 && Shape::kN <= 4 ? 2
                                                                        : 1;

template <typename Traits, typename Shape>
__global__ void __launch_bounds__(kMaxCtaThreads, (kFwdMinBlocks<Traits, Shape>))
    norm_fwd_kernel(const FwdParams p) {
  static_assert(!Traits::kBlockScaled, "block-scaled z takes the staged or pipelined layout");
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  using O = typename Traits::Output;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr bool kAdd = Traits::kResidualAdd;
  constexpr int kVec = Shape::kVec;
  constexpr int kN = Shape::kN;
  constexpr bool kStream = kN == 0;
  constexpr int K = kRms ? 1 : 3;
  // Holding gamma/beta in registers across rows pays when it costs few registers.
  constexpr bool kHoldWeights = !kStream && kN * kVec * sizeof(W) * (kRms ? 1 : 2) <= 32;
  using VI = Vec<I, kVec>;
  using VW = Vec<W, kVec>;

  __shared__ ReduceSmem<K> smem;
  int phase = 0;

  const int hidden = Shape::kHidden ? Shape::kHidden : p.hidden;
  const int G = Shape::kG ? Shape::kG : p.threads_per_row;
  const int C = Shape::kC ? Shape::kC : p.ctas_per_row;
  const int nvec = hidden / kVec;
  const int rows_per_cta = blockDim.x / G;
  const int t = threadIdx.x % G;
  const int group = threadIdx.x / G;
  const int cta_rank = C > 1 ? platform::cluster_rank() : 0;
  if (C > 1) platform::cluster_arrive_relaxed();  // completed by the first cluster reduction
  const int64_t num_tiles = (p.rows + rows_per_cta - 1) / rows_per_cta;
  const float inv_hidden = 1.f / static_cast<float>(hidden);
  const float gamma_shift = p.zero_centered_gamma ? 1.f : 0.f;
  const W* gamma = static_cast<const W*>(p.gamma);
  const W* beta = static_cast<const W*>(p.beta);
  O* z = static_cast<O*>(p.z);

  // Vector index of this thread's i-th vector of the row.
  auto vec_index = [&](int i) { return (i * C + cta_rank) * G + t; };
  const int steps = kStream ? (nvec + G * C - 1) / (G * C) : kN;

  // Programmatic dependent launch: nothing global is read or written before the previous
  // kernel on the stream has finished; the next one may start its own prologue right away.
  platform::wait_for_prior_grid();
  platform::allow_dependent_grid();
  OutputScale q = output_scale<Traits>(p);

  [[maybe_unused]] VW gamma_r[kHoldWeights ? kN : 1];
  [[maybe_unused]] VW beta_r[kHoldWeights ? kN : 1];
  if constexpr (kHoldWeights) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int v = vec_index(i);
      if (v < nvec) {
        gamma_r[i].load(gamma + static_cast<int64_t>(v) * kVec);
        if constexpr (!kRms) beta_r[i].load(beta + static_cast<int64_t>(v) * kVec);
      }
    }
  }

  // Software pipelining across the rows a CTA walks: the next row's x is loaded before
  // this row's reduction and stores, so the memory system never waits on the barrier.
  // (Not with the fused add: it would hold two more rows of registers.)
  constexpr bool kPrefetch = !kStream && !kAdd && kN <= 4;
  const int64_t tile_stride = gridDim.x / C;
  const I* x = static_cast<const I*>(p.x);
  [[maybe_unused]] VI x_r[kStream ? 1 : kN];
  [[maybe_unused]] VI x_next[kPrefetch ? kN : 1];
  if constexpr (kPrefetch) {
    const int64_t row = (blockIdx.x / C) * rows_per_cta + group;
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int v = vec_index(i);
      if (row < p.rows && v < nvec) x_next[i].load(x + row * hidden + static_cast<int64_t>(v) * kVec);
    }
  }

  for (int64_t tile = blockIdx.x / C; tile < num_tiles; tile += tile_stride) {
    const int64_t row = tile * rows_per_cta + group;
    const bool row_ok = row < p.rows;
    const int64_t base = row * hidden;

    RowStats<kRms> stats;
    if constexpr (kPrefetch) {
#pragma unroll
      for (int i = 0; i < kN; ++i) x_r[i] = x_next[i];
      const int64_t next = (tile + tile_stride) * rows_per_cta + group;
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        const int v = vec_index(i);
        if (next < p.rows && v < nvec) x_next[i].load(x + next * hidden + static_cast<int64_t>(v) * kVec);
      }
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        if (row_ok && vec_index(i) < nvec) stats.add(x_r[i]);
      }
    } else if constexpr (!kStream) {
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        const int v = vec_index(i);
        if (row_ok && v < nvec) {
          load_input<I, kVec, kAdd>(p, base + static_cast<int64_t>(v) * kVec, x_r[i], true);
          stats.add(x_r[i]);
        }
      }
    } else {
#pragma unroll 4
      for (int i = 0; i < steps; ++i) {
        const int v = vec_index(i);
        if (row_ok && v < nvec) {
          VI in;
          load_input<I, kVec, kAdd>(p, base + static_cast<int64_t>(v) * kVec, in, true);
          stats.add(in);
        }
      }
    }
    float mean = 0.f;
    float rsigma;
    if constexpr (kRms) {
      const Floats<1> sum = group_reduce(Floats<1>{{stats.a}}, AddOp{}, G, C, smem, phase);
      rsigma = rsqrtf(sum.v[0] * inv_hidden + p.epsilon);
    } else {
      const Floats<3> mv = row_mean_var<Shape>(stats, G, C, smem, phase);
      mean = mv.v[1];
      rsigma = rsqrtf(mv.v[2] * inv_hidden + p.epsilon);
    }
    if (row_ok && t == 0 && cta_rank == 0) {
      p.rsigma[row] = rsigma;
      if constexpr (!kRms) p.mu[row] = mean;
    }

    const NormValue<kRms, true> norm(mean, rsigma, gamma_shift);  // (one loop: see NormValue)
    if constexpr (!kStream) {
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        const int v = vec_index(i);
        if (row_ok && v < nvec) {
          const int64_t off = static_cast<int64_t>(v) * kVec;
          if constexpr (kHoldWeights) {
            store_output(x_r[i], gamma_r[i], beta_r[i], norm, z + base + off, q);
          } else {
            VW g, b;
            g.load(gamma + off);
            if constexpr (!kRms) b.load(beta + off);
            store_output(x_r[i], g, b, norm, z + base + off, q);
          }
        }
      }
    } else {
#pragma unroll 4
      for (int i = 0; i < steps; ++i) {
        const int v = vec_index(i);
        if (row_ok && v < nvec) {
          const int64_t off = static_cast<int64_t>(v) * kVec;
          VI in;
          reload_input<I, kVec, kAdd>(p, base + off, in);
          VW g, b;
          g.load(gamma + off);
          if constexpr (!kRms) b.load(beta + off);
          store_output(in, g, b, norm, z + base + off, q);
        }
      }
    }
  }
  finish_output<Traits>(p, q, &smem.warp_parts[0][0][0]);
  cluster_exit(C, phase);
}

}  // namespace normtune
