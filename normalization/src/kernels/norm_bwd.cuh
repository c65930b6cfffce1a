// Backward RMSNorm / LayerNorm, optionally adding a gradient (bwd_add: dx += add).
//
// With y = (x - mu) * rsigma (RMSNorm: mu = 0), g = gamma (+ 1 with zero-centered gamma),
// dy = dz * g and, over the row, c1 = mean(dy * y), c2 = mean(dy) (RMSNorm: c2 = 0):
//   dx     = rsigma * (dy - c2 - y * c1)   (+ add)
//   dgamma = sum over rows of dz * y,   dbeta = sum over rows of dz   (LayerNorm)
// rsigma and mu are the forward's fp32 statistics. Arithmetic is fp32.
//
// dgamma/dbeta are reduced in two deterministic stages, with no atomics and no memset:
//  1. each program (a CTA of the register-resident kernel, or a row range of the column
//     kernel) accumulates its rows in fp32 and writes one partial row of every column to
//     the workspace, [K][programs][row_stride] (K = 1: dgamma; K = 2: dgamma, dbeta);
//  2. norm_bwd_finalize_kernel sums the partial rows of each column in a fixed order and
//     writes dgamma/dbeta in gamma's dtype.
// RMSNorm with one program (a single row, or a grid of one CTA or one cluster) writes dgamma
// itself (p.direct_grads; as the finalize would round it: 0 + partial) and no finalize kernel
// is launched: one kernel per call, what decode-sized calls need. (LayerNorm keeps the
// finalize: its kernel writing dgamma and dbeta measured slower; see launch_bwd.)
// The same multiprocessorCount gives the same programs, hence the same bits, on every run.
//
// Kernels:
//  - norm_bwd_kernel (kN >= 1): the row is held in registers (kN vectors per thread, the
//    forward's layout: G threads per row, R = blockDim / G rows per CTA), so x and dz are
//    read once; a persistent grid walks row tiles; gamma is held in registers with one
//    vector per thread, else re-read per row (from L1/L2); the CTA's R row groups are
//    combined in shared memory before the partial row is written. Latency is hidden by
//    occupancy (up to 2 vectors per thread fit 64 registers: 1024 threads per SM) rather
//    than by prefetching the next row, which would not fit.
//  - long rows (kN == 0): norm_bwd_row_terms_kernel streams each row once to get c1, c2
//    (to the workspace), then norm_bwd_columns_kernel tiles the columns: each thread owns a
//    vector of columns over a range of rows, so its dgamma partial stays in registers.
//    x and dz are read twice.
//  - long rows over a cluster (norm_bwd_pipelined.cuh): each CTA's slice of x and dz staged in
//    shared memory, the row terms exchanged between the CTAs; x and dz read once.
#pragma once

#include <cstdint>

#include <normtune/registry/norm_key.h>

#include "kernels/reduce.cuh"
#include "kernels/vec.cuh"
#include "kernels/norm_bwd_args.h"

namespace normtune {

// What is computed: gamma's type (and dgamma's), the type of x, dz, dx (and add), the norm,
// and whether a gradient is added to dx.
template <typename W, typename I, NormType kNorm_, Stage kStage_>
struct BwdTraits {
  static_assert(kStage_ == Stage::kBackward || kStage_ == Stage::kBackwardAdd, "a backward stage");
  using Weight = W;
  using Input = I;
  using Output = I;  // dx
  static constexpr NormType kNorm = kNorm_;
  static constexpr Stage kStage = kStage_;
  static constexpr bool kRmsNorm = kNorm_ == NormType::kRMSNorm;
  static constexpr bool kAddGrad = kStage_ == Stage::kBackwardAdd;
  static constexpr int kOutputs = kRmsNorm ? 1 : 2;  // dgamma (+ dbeta): also the row terms
};

// The compile-time part of a BwdPlan, as the kernels see it: 0 means "decided at run time";
// kN == 0 is BwdLayout::kColumns, kPipelined BwdLayout::kPipelined (with kC CTAs per row and,
// with one, kR row groups per CTA), else BwdLayout::kRegisters.
template <int kVec_, int kN_, int kHidden_ = 0, int kG_ = 0, bool kPipelined_ = false, int kC_ = 0, int kR_ = 0>
struct BwdShape {
  static constexpr int kVec = kVec_;
  static constexpr int kN = kN_;
  static constexpr int kHidden = kHidden_;
  static constexpr int kG = kG_;
  static constexpr bool kPipelined = kPipelined_;
  static constexpr int kC = kC_;
  static constexpr int kR = kR_;
};

inline constexpr int kBwdColumnThreads = 256;  // CTA of the column kernel
inline constexpr int kBwdColumnRows = 4;       // rows the column kernel loads at once

// The per-element arithmetic, shared by all kernels. kShift: gamma's offset known at compile
// time (0, or 1 for zero-centered gamma: no add per element), or -1: `shift` at run time.
template <typename Traits, int kShift = -1>
struct BwdMath {
  float mu, rsigma, shift;

  __device__ __forceinline__ float y(float x) const { return (x - mu) * rsigma; }
  __device__ __forceinline__ float dy(float dz, float g) const {
    if constexpr (kShift == 0) {
      return dz * g;
    } else if constexpr (kShift == 1) {
      return dz * (g + 1.f);
    } else {
      return dz * (g + shift);
    }
  }
  // Row terms of one element: (dy * y, dy).
  __device__ __forceinline__ void add_terms(float x, float dz, float g,
                                            Floats<Traits::kOutputs>& s) const {
    add_terms_of_y(y(x), dz, g, s);
  }
  // The same with y(x) given (computed once for these terms and the dgamma partial).
  __device__ __forceinline__ void add_terms_of_y(float yx, float dz, float g, Floats<Traits::kOutputs>& s) const {
    add_terms_of_dy(yx, dy(dz, g), s);
  }
  // The same with dy given as well.
  __device__ __forceinline__ void add_terms_of_dy(float yx, float d, Floats<Traits::kOutputs>& s) const {
    s.v[0] += d * yx;
    if constexpr (!Traits::kRmsNorm) s.v[1] += d;
  }
  __device__ __forceinline__ float dx(float x, float dz, float g, float c1, float c2) const {
    return dx_of_dy(x, dy(dz, g), c1, c2);
  }
  __device__ __forceinline__ float dx_of_dy(float x, float d, float c1, float c2) const {
    if constexpr (Traits::kRmsNorm) {
      return rsigma * (d - y(x) * c1);
    } else {
      return fmaf(rsigma, d, fmaf(-rsigma * c1, y(x), -rsigma * c2));
    }
  }
};

template <typename Traits, int kShift = -1>
__device__ __forceinline__ BwdMath<Traits, kShift> bwd_math(const BwdParams& p, int64_t row) {
  return {Traits::kRmsNorm ? 0.f : p.mu[row], p.rsigma[row], p.zero_centered_gamma ? 1.f : 0.f};
}

// The added gradient's vector at `off` (bwd_add; zeros, never read, otherwise).
template <typename Traits, int kVec>
__device__ __forceinline__ Vec<typename Traits::Input, kVec> load_add(const BwdParams& p, int64_t off) {
  Vec<typename Traits::Input, kVec> a{};
  if constexpr (Traits::kAddGrad) a.load(static_cast<const typename Traits::Input*>(p.add) + off);
  return a;
}

// dx of one vector (rounded once to I, after adding `a`, the added gradient's vector at `off`,
// for bwd_add), stored at `off`.
template <typename Traits, int kVec, int kShift>
__device__ __forceinline__ void store_dx(const BwdParams& p, int64_t off, const BwdMath<Traits, kShift>& m,
                                         const Vec<typename Traits::Input, kVec>& x,
                                         const Vec<typename Traits::Input, kVec>& dz,
                                         const Vec<typename Traits::Weight, kVec>& g, float c1, float c2,
                                         const Vec<typename Traits::Input, kVec>& a) {
  using I = typename Traits::Input;
  float xf[kVec], dzf[kVec], gf[kVec], d[kVec];
  unpack_floats(x, xf);
  unpack_floats(dz, dzf);
  unpack_floats(g, gf);
  [[maybe_unused]] float af[kVec];
  if constexpr (Traits::kAddGrad) unpack_floats(a, af);
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    d[k] = m.dx(xf[k], dzf[k], gf[k], c1, c2);
    if constexpr (Traits::kAddGrad) d[k] += af[k];
  }
  store_floats(d, static_cast<I*>(p.dx) + off);  // (16-bit dx: two per conversion, stored as words)
}

// The same from dy = dz * gamma held in registers (the pipelined kernel's short slices).
template <typename Traits, int kVec, int kShift>
__device__ __forceinline__ void store_dx_of_dy(const BwdParams& p, int64_t off, const BwdMath<Traits, kShift>& m,
                                               const Vec<typename Traits::Input, kVec>& x, const float (&dyf)[kVec],
                                               float c1, float c2, const Vec<typename Traits::Input, kVec>& a) {
  using I = typename Traits::Input;
  float xf[kVec], d[kVec];
  unpack_floats(x, xf);
  [[maybe_unused]] float af[kVec];
  if constexpr (Traits::kAddGrad) unpack_floats(a, af);
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    d[k] = m.dx_of_dy(xf[k], dyf[k], c1, c2);
    if constexpr (Traits::kAddGrad) d[k] += af[k];
  }
  store_floats(d, static_cast<I*>(p.dx) + off);
}

// The same, loading the added gradient here.
template <typename Traits, int kVec, int kShift>
__device__ __forceinline__ void store_dx(const BwdParams& p, int64_t off, const BwdMath<Traits, kShift>& m,
                                         const Vec<typename Traits::Input, kVec>& x,
                                         const Vec<typename Traits::Input, kVec>& dz,
                                         const Vec<typename Traits::Weight, kVec>& g, float c1, float c2) {
  store_dx<Traits, kVec>(p, off, m, x, dz, g, c1, c2, load_add<Traits, kVec>(p, off));
}

// dgamma (+ dbeta) partial sums of the columns of one vector.
template <typename Traits, int kVec>
struct GradAccum {
  float v[Traits::kOutputs][kVec];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int o = 0; o < Traits::kOutputs; ++o) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[o][k] = 0.f;
    }
  }
  // Adds this row's terms to the first kCount outputs (dgamma, then dbeta).
  // (Unpacked as store_dx unpacks them, so that y(x) is computed once for both.)
  template <int kCount = Traits::kOutputs, typename I>
  __device__ __forceinline__ void add(const BwdMath<Traits>& m, const Vec<I, kVec>& x,
                                      const Vec<I, kVec>& dz) {
    float xf[kVec], dzf[kVec], yf[kVec];
    unpack_floats(x, xf);
    unpack_floats(dz, dzf);
#pragma unroll
    for (int k = 0; k < kVec; ++k) yf[k] = m.y(xf[k]);
    add_of_y<kCount>(yf, dzf);
  }
  // The same from floats: y = y(x) and dz of each column.
  template <int kCount = Traits::kOutputs>
  __device__ __forceinline__ void add_of_y(const float (&yf)[kVec], const float (&dzf)[kVec]) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      v[0][k] += dzf[k] * yf[k];
      if constexpr (kCount > 1) v[1][k] += dzf[k];
    }
  }
  // Writes output o's kVec columns starting at `col` of partial row `program` (RMSNorm with
  // one program and p.direct_grads: of dgamma itself).
  __device__ __forceinline__ void store(const BwdParams& p, int o, int64_t program, int col) const {
    if constexpr (Traits::kOutputs == 1) {
      if (p.direct_grads) {
        using W = typename Traits::Weight;
        W* out = static_cast<W*>(p.dgamma) + col;
#pragma unroll
        for (int k = 0; k < kVec; ++k) out[k] = from_float<W>(0.f + v[0][k]);
        return;
      }
    }
    float* dst = p.partials + (static_cast<int64_t>(o) * p.programs + program) * p.row_stride + col;
    if constexpr (kVec % 4 == 0) {
      Vec<float, kVec> out;
#pragma unroll
      for (int k = 0; k < kVec; ++k) out.v[k] = v[o][k];
      out.store(dst);
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) dst[k] = v[o][k];
    }
  }
};

// Where a thread keeps its dgamma (+ dbeta) partials: the first kBwdRegOutputs outputs in
// registers (up to 16 floats, 2 vectors at most), the others in shared memory
// (thread-private slots, conflict-free 16-byte accesses), so that the registers hold x and
// dz without spills.
template <typename Traits, typename Shape>
inline constexpr int kBwdRegOutputs =
    platform::kIsHip || Shape::kVec % 4 != 0 ? Traits::kOutputs
    : Shape::kN >= 4                          ? 0
    : Shape::kN * Shape::kVec * Traits::kOutputs <= 16 ? Traits::kOutputs
    : Shape::kN * Shape::kVec <= 16           ? 1
                                              : 0;

// Register budget: 64 (1024 threads per SM) up to 2 vectors (or 8 scalars) per thread; 128
// for 4 vectors of x and dz (they alone take 32 registers).
template <typename Traits, typename Shape>
inline constexpr int kBwdMinBlocks =
    (Shape::kVec > 1 && Shape::kN <= 2) || (Shape::kVec == 1 && Shape::kN * Traits::kOutputs <= 8) ? 2 : 1;

// Dynamic shared memory of the register-resident kernel: the partials that live there
// ([kN][outputs in smem][kVec / 4][threads][4] floats), then the in-CTA combine of R > 1
// row groups ([K][R][G * kVec] floats).
template <typename Traits, typename Shape>
constexpr size_t bwd_acc_smem_floats(int threads) {
  return static_cast<size_t>(Shape::kN) * (Traits::kOutputs - kBwdRegOutputs<Traits, Shape>) * Shape::kVec *
         threads;
}
template <typename Traits, typename Shape>
constexpr size_t bwd_smem_bytes(int threads, int rows_per_cta) {
  const size_t combine = rows_per_cta > 1 ? static_cast<size_t>(Traits::kOutputs) * threads * Shape::kVec : 0;
  return sizeof(float) * (bwd_acc_smem_floats<Traits, Shape>(threads) + combine);
}

// The thread-private partials of slot i in shared memory, four floats at a time: outputs
// kFirst.. (the ones not held in registers).
template <typename Traits, int kVec, int kFirst>
struct SmemGradAccum {
  static constexpr int kCount = Traits::kOutputs - kFirst;
  float* base;  // this thread's first float
  int stride;   // floats between consecutive groups of four of one thread: 4 * threads

  __device__ __forceinline__ float4* at(int i, int o, int k4) const {
    return reinterpret_cast<float4*>(base + ((i * kCount + o - kFirst) * (kVec / 4) + k4) * stride);
  }
  __device__ __forceinline__ void clear(int i) const {
#pragma unroll
    for (int o = kFirst; o < Traits::kOutputs; ++o) {
#pragma unroll
      for (int k4 = 0; k4 < kVec / 4; ++k4) *at(i, o, k4) = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  // Adds this row's terms of vector slot i from floats: y = y(x) and dz of each column.
  __device__ __forceinline__ void add_of_y(int i, const float (&yf)[kVec], const float (&dzf)[kVec]) const {
#pragma unroll
    for (int k4 = 0; k4 < kVec / 4; ++k4) {
      if constexpr (kFirst == 0) {
        float4 g = *at(i, 0, k4);
        g.x += dzf[k4 * 4 + 0] * yf[k4 * 4 + 0];
        g.y += dzf[k4 * 4 + 1] * yf[k4 * 4 + 1];
        g.z += dzf[k4 * 4 + 2] * yf[k4 * 4 + 2];
        g.w += dzf[k4 * 4 + 3] * yf[k4 * 4 + 3];
        *at(i, 0, k4) = g;
      }
      if constexpr (Traits::kOutputs > 1) {
        float4 b = *at(i, 1, k4);
        b.x += dzf[k4 * 4 + 0];
        b.y += dzf[k4 * 4 + 1];
        b.z += dzf[k4 * 4 + 2];
        b.w += dzf[k4 * 4 + 3];
        *at(i, 1, k4) = b;
      }
    }
  }
  // Fills outputs kFirst.. of `a`.
  __device__ __forceinline__ void load(int i, GradAccum<Traits, kVec>& a) const {
#pragma unroll
    for (int o = kFirst; o < Traits::kOutputs; ++o) {
#pragma unroll
      for (int k4 = 0; k4 < kVec / 4; ++k4) {
        const float4 v = *at(i, o, k4);
        a.v[o][k4 * 4 + 0] = v.x;
        a.v[o][k4 * 4 + 1] = v.y;
        a.v[o][k4 * 4 + 2] = v.z;
        a.v[o][k4 * 4 + 3] = v.w;
      }
    }
  }
};

template <typename Traits, typename Shape>
__global__ void __launch_bounds__(kMaxCtaThreads, (kBwdMinBlocks<Traits, Shape>)) norm_bwd_kernel(const BwdParams p) {
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  constexpr int K = Traits::kOutputs;
  constexpr int kVec = Shape::kVec;
  constexpr int kN = Shape::kN;
  // Registers: x, dz, gamma and the fp32 partials of kN vectors; gamma held across rows at one
  // vector per thread.
  constexpr bool kHoldGamma = kN == 1;
  static_assert(kN >= 1, "norm_bwd_kernel holds rows in registers");
  using VI = Vec<I, kVec>;
  using VW = Vec<W, kVec>;

  constexpr int kRegOutputs = kBwdRegOutputs<Traits, Shape>;
  constexpr bool kAccInSmem = kRegOutputs < K;
  static_assert(!kAccInSmem || kVec % 4 == 0, "shared-memory partials are moved 4 floats at a time");
  __shared__ ReduceSmem<K> smem;
  extern __shared__ __align__(kDynamicSmemAlign) float4 dynamic_smem[];
  int phase = 0;
  platform::allow_dependent_grid();  // the finalize kernel may be scheduled early

  const int hidden = Shape::kHidden ? Shape::kHidden : p.hidden;
  const int G = Shape::kG ? Shape::kG : p.threads_per_row;
  const int nvec = hidden / kVec;
  const int rows_per_cta = blockDim.x / G;
  const int t = threadIdx.x % G;
  const int group = threadIdx.x / G;
  const int64_t num_tiles = (p.rows + rows_per_cta - 1) / rows_per_cta;
  const float inv_hidden = 1.f / static_cast<float>(hidden);
  const I* x = static_cast<const I*>(p.x);
  const I* dz = static_cast<const I*>(p.dz);
  const W* gamma = static_cast<const W*>(p.gamma);
  auto vec_index = [&](int i) { return i * G + t; };

  float* const acc_base = reinterpret_cast<float*>(dynamic_smem);
  float* const combine = acc_base + bwd_acc_smem_floats<Traits, Shape>(blockDim.x);
  const SmemGradAccum<Traits, kVec, kRegOutputs> acc_smem{acc_base + threadIdx.x * 4,
                                                          static_cast<int>(blockDim.x) * 4};

  // Programmatic dependent launch: nothing global is read or written before the previous
  // kernel on the stream has finished (its writes visible).
  platform::wait_for_prior_grid();
  // gamma of this thread's vectors: loaded here and held across rows at one vector per thread;
  // else loaded once per row, with x and dz, for both loops below (reloaded in the dx loop it
  // came vector by vector after each store of dx: a load after a store waits for it, the
  // compiler cannot tell dx from gamma; tools/sass_store_load_chains.py).
  VW g_r[kN];
  [[maybe_unused]] GradAccum<Traits, kVec> acc[kRegOutputs > 0 ? kN : 1];
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    if constexpr (kRegOutputs > 0) acc[i].clear();
    if constexpr (kAccInSmem) acc_smem.clear(i);
    if constexpr (kHoldGamma) {
      if (vec_index(i) < nvec) g_r[i].load(gamma + static_cast<int64_t>(vec_index(i)) * kVec);
    }
  }
  VI x_r[kN], dz_r[kN];
  for (int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const int64_t row = tile * rows_per_cta + group;
    const bool row_ok = row < p.rows;
    BwdMath<Traits> m{};
    if (row_ok) {
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        const int v = vec_index(i);
        if (v < nvec) {
          const int64_t off = row * hidden + static_cast<int64_t>(v) * kVec;
          x_r[i].load(x + off);
          dz_r[i].load(dz + off);
          if constexpr (!kHoldGamma) g_r[i].load(gamma + static_cast<int64_t>(v) * kVec);
        }
      }
      m = bwd_math<Traits>(p, row);
    }

    Floats<K> s{};
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if (row_ok && vec_index(i) < nvec) {
        // Unpacked once; y(x) computed once for the row terms and the dgamma partial.
        float xf[kVec], dzf[kVec], gf[kVec], yf[kVec];
        unpack_floats(x_r[i], xf);
        unpack_floats(dz_r[i], dzf);
        unpack_floats(g_r[i], gf);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          yf[k] = m.y(xf[k]);
          m.add_terms_of_y(yf[k], dzf[k], gf[k], s);
        }
        if constexpr (kRegOutputs > 0) acc[i].template add_of_y<kRegOutputs>(yf, dzf);
        if constexpr (kAccInSmem) acc_smem.add_of_y(i, yf, dzf);
      }
    }
    s = group_reduce(s, AddOp{}, G, 1, smem, phase);
    const float c1 = s.v[0] * inv_hidden;
    const float c2 = Traits::kRmsNorm ? 0.f : s.v[K - 1] * inv_hidden;
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int v = vec_index(i);
      if (row_ok && v < nvec) {
        store_dx<Traits, kVec>(p, row * hidden + static_cast<int64_t>(v) * kVec, m, x_r[i], dz_r[i],
                               g_r[i], c1, c2);
      }
    }
  }

  // This CTA's partial row.
  auto slot = [&](int i) {
    GradAccum<Traits, kVec> a;
    if constexpr (kRegOutputs > 0) a = acc[i];
    if constexpr (kAccInSmem) acc_smem.load(i, a);
    return a;
  };
  if (rows_per_cta == 1) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int v = vec_index(i);
      if (v < nvec) {
        const GradAccum<Traits, kVec> a = slot(i);
#pragma unroll
        for (int o = 0; o < K; ++o) a.store(p, o, blockIdx.x, v * kVec);
      }
    }
    return;
  }
  // R row groups share the columns: combine them in a fixed order, one vector slot at a time.
  const int width = G * kVec;  // columns of slot i: [i * width, (i + 1) * width)
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const GradAccum<Traits, kVec> a = slot(i);
#pragma unroll
    for (int o = 0; o < K; ++o) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) combine[(o * rows_per_cta + group) * width + t * kVec + k] = a.v[o][k];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < K * width; idx += blockDim.x) {
      const int o = idx / width;
      const int c = idx % width;
      const int col = i * width + c;
      if (col < hidden) {
        float sum = combine[o * rows_per_cta * width + c];
        for (int r = 1; r < rows_per_cta; ++r) sum += combine[(o * rows_per_cta + r) * width + c];
        if (K == 1 && p.direct_grads) {
          static_cast<W*>(p.dgamma)[col] = from_float<W>(0.f + sum);
        } else {
          p.partials[(static_cast<int64_t>(o) * p.programs + blockIdx.x) * p.row_stride + col] = sum;
        }
      }
    }
    __syncthreads();
  }
}

// Long rows, step 1: c1 and c2 of every row (one row per CTA at a time, streamed).
template <typename Traits, typename Shape>
__global__ void __launch_bounds__(kMaxCtaThreads) norm_bwd_row_terms_kernel(const BwdParams p) {
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  constexpr int K = Traits::kOutputs;
  constexpr int kVec = Shape::kVec;
  __shared__ ReduceSmem<K> smem;
  int phase = 0;
  const int hidden = Shape::kHidden ? Shape::kHidden : p.hidden;
  const int nvec = hidden / kVec;
  const float inv_hidden = 1.f / static_cast<float>(hidden);
  const W* gamma = static_cast<const W*>(p.gamma);
  platform::wait_for_prior_grid();  // (programmatic dependent launch, as the main kernels)
  platform::allow_dependent_grid();
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const BwdMath<Traits> m = bwd_math<Traits>(p, row);
    const I* x = static_cast<const I*>(p.x) + row * hidden;
    const I* dz = static_cast<const I*>(p.dz) + row * hidden;
    Floats<K> s{};
#pragma unroll 4
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
      const int64_t off = static_cast<int64_t>(v) * kVec;
      Vec<I, kVec> xv, dzv;
      Vec<W, kVec> g;
      xv.load(x + off);
      dzv.load(dz + off);
      g.load(gamma + off);
#pragma unroll
      for (int k = 0; k < kVec; ++k) m.add_terms(to_float(xv.v[k]), to_float(dzv.v[k]), to_float(g.v[k]), s);
    }
    s = group_reduce(s, AddOp{}, static_cast<int>(blockDim.x), 1, smem, phase);
    if (threadIdx.x == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) p.row_terms[row * 2 + k] = s.v[k] * inv_hidden;
    }
  }
}

// Long rows, step 2: blockIdx.x tiles the columns (a vector per thread), blockIdx.y is the
// program: rows [y * rows_per_program, (y + 1) * rows_per_program).
template <typename Traits, typename Shape>
__global__ void __launch_bounds__(kBwdColumnThreads) norm_bwd_columns_kernel(const BwdParams p) {
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  constexpr int kVec = Shape::kVec;
  constexpr int kRows = kBwdColumnRows;
  const int hidden = Shape::kHidden ? Shape::kHidden : p.hidden;
  const int nvec = hidden / kVec;
  // Launched as a dependent of the row-terms kernel: its results (and, with dx in place of
  // dz, its reads of dz) must be complete first.
  platform::wait_for_prior_grid();
  platform::allow_dependent_grid();
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= nvec) return;
  const int64_t col = static_cast<int64_t>(v) * kVec;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * p.rows_per_program;
  const int64_t last = first + p.rows_per_program < p.rows ? first + p.rows_per_program : p.rows;
  const I* x = static_cast<const I*>(p.x);
  const I* dz = static_cast<const I*>(p.dz);
  Vec<W, kVec> g;
  g.load(static_cast<const W*>(p.gamma) + col);
  GradAccum<Traits, kVec> acc;
  acc.clear();
  for (int64_t r0 = first; r0 < last; r0 += kRows) {
    Vec<I, kVec> xs[kRows], dzs[kRows];
    BwdMath<Traits> ms[kRows];
    float c1[kRows], c2[kRows];
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int64_t row = r0 + j;
      if (row < last) {
        xs[j].load(x + row * hidden + col);
        dzs[j].load(dz + row * hidden + col);
        ms[j] = bwd_math<Traits>(p, row);
        c1[j] = p.row_terms[row * 2];
        c2[j] = Traits::kRmsNorm ? 0.f : p.row_terms[row * 2 + 1];
      }
    }
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int64_t row = r0 + j;
      if (row < last) {
        store_dx<Traits, kVec>(p, row * hidden + col, ms[j], xs[j], dzs[j], g, c1[j], c2[j]);
        acc.add(ms[j], xs[j], dzs[j]);
      }
    }
  }
#pragma unroll
  for (int o = 0; o < Traits::kOutputs; ++o) acc.store(p, o, blockIdx.y, static_cast<int>(col));
}

// Stage 2: out[col] = sum over programs q = 0, 1, ... of partials[o][q][col], in a fixed
// order (slice s of the CTA sums q = s, s + kSlices, ...; then the slices in order).
// blockIdx.y = o (0: dgamma, 1: dbeta). With no programs (no rows) it writes zeros.
// The loads are issued kFinalizeBatch at a time before their sums (the same order): at small
// hidden sizes only hidden / 32 CTAs run it, each slice walking ~programs / 16 partial rows
// (66 at 65536x128 with 1056 programs), so its time is that many L2 round trips divided by
// the loads in flight.
inline constexpr int kFinalizeBatch = 16;
template <typename W>
__global__ void __launch_bounds__(kMaxCtaThreads) norm_bwd_finalize_kernel(const BwdParams p) {
  constexpr int kSlices = kMaxCtaThreads / kWarp;
  __shared__ float parts[kSlices][kWarp];
  const int lane = threadIdx.x % kWarp;
  const int slice = threadIdx.x / kWarp;
  const int col = blockIdx.x * kWarp + lane;
  const int o = blockIdx.y;
  platform::wait_for_prior_grid();  // launched as a dependent of the kernel writing the partials
  if (p.finalize_starts_next) platform::allow_dependent_grid();
  float s = 0.f;
  if (col < p.hidden) {
    const float* src = p.partials + static_cast<int64_t>(o) * p.programs * p.row_stride + col;
    const int64_t step = static_cast<int64_t>(kSlices) * p.row_stride;
    int q = slice;
    for (; q + (kFinalizeBatch - 1) * kSlices < p.programs; q += kFinalizeBatch * kSlices) {
      const float* at = src + static_cast<int64_t>(q) * p.row_stride;
      float v[kFinalizeBatch];
#pragma unroll
      for (int b = 0; b < kFinalizeBatch; ++b) v[b] = at[b * step];
#pragma unroll
      for (int b = 0; b < kFinalizeBatch; ++b) s += v[b];
    }
    for (; q < p.programs; q += kSlices) s += src[static_cast<int64_t>(q) * p.row_stride];
  }
  parts[slice][lane] = s;
  __syncthreads();
  if (slice == 0 && col < p.hidden) {
    float total = parts[0][lane];
    for (int j = 1; j < kSlices; ++j) total += parts[j][lane];
    static_cast<W*>(o == 0 ? p.dgamma : p.dbeta)[col] = from_float<W>(total);
  }
}

}  // namespace normtune
