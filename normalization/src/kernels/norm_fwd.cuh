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
#pragma once

#include <cstdint>

#include "kernels/reduce.cuh"
#include "norm_fwd_args.h"
#include "kernels/vec.cuh"

namespace normtune {

// What is computed: element types and the fused variant.
template <typename W, typename I, typename O, bool kRms, bool kAdd>
struct FwdTraits {
  using Weight = W;
  using Input = I;
  using Output = O;
  static constexpr bool kRmsNorm = kRms;
  static constexpr bool kResidualAdd = kAdd;
};

// How the row is laid out over threads; 0 means "decided at run time".
template <int kVec_, int kN_, int kHidden_ = 0, int kG_ = 0, int kC_ = 0>
struct FwdShape {
  static constexpr int kVec = kVec_;        // elements per vector
  static constexpr int kN = kN_;            // vectors per thread held in registers; 0: stream
  static constexpr int kHidden = kHidden_;  // compile-time hidden size (tuned kernels)
  static constexpr int kG = kG_;            // threads per row
  static constexpr int kC = kC_;            // CTAs per row (cluster size)
};

template <typename Traits, typename Shape>
__global__ void __launch_bounds__(1024) norm_fwd_kernel(const FwdParams p) {
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  using O = typename Traits::Output;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr bool kAdd = Traits::kResidualAdd;
  constexpr int kVec = Shape::kVec;
  constexpr int kN = Shape::kN;
  constexpr bool kStream = kN == 0;
  // Holding gamma/beta in registers across rows pays when it costs few registers.
  constexpr bool kHoldWeights = !kStream && kN * kVec * sizeof(W) <= 64;
  using VI = Vec<I, kVec>;
  using VW = Vec<W, kVec>;
  using VO = Vec<O, kVec>;

  __shared__ ReduceSmem smem;
  int phase = 0;

  const int hidden = Shape::kHidden ? Shape::kHidden : p.hidden;
  const int G = Shape::kG ? Shape::kG : p.threads_per_row;
  const int C = Shape::kC ? Shape::kC : p.ctas_per_row;
  const int nvec = hidden / kVec;
  const int rows_per_cta = blockDim.x / G;
  const int t = threadIdx.x % G;
  const int group = threadIdx.x / G;
  const int cta_rank = C > 1 ? platform::cluster_rank() : 0;
  const int64_t first_tile = blockIdx.x / C;
  const int64_t tile_stride = gridDim.x / C;
  const int64_t num_tiles = (p.rows + rows_per_cta - 1) / rows_per_cta;
  const float inv_hidden = 1.f / static_cast<float>(hidden);
  const float gamma_shift = p.zero_centered_gamma ? 1.f : 0.f;

  const I* __restrict__ xg = static_cast<const I*>(p.x);
  // residual and residual_out may alias (in-place add): no __restrict__ on them.
  const I* rg = static_cast<const I*>(p.residual);
  const W* __restrict__ gg = static_cast<const W*>(p.gamma);
  const W* __restrict__ bg = static_cast<const W*>(p.beta);
  O* __restrict__ zg = static_cast<O*>(p.z);
  I* rog = static_cast<I*>(p.residual_out);

  // Vector index of the i-th vector of this thread; stream mode walks i until it passes nvec.
  auto vec_index = [&](int i) { return (i * C + cta_rank) * G + t; };
  const int stream_steps = kStream ? (nvec + G * C - 1) / (G * C) : 0;

  [[maybe_unused]] VW gamma_r[kHoldWeights ? kN : 1];
  [[maybe_unused]] VW beta_r[kHoldWeights ? kN : 1];
  if constexpr (kHoldWeights) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int v = vec_index(i);
      if (v < nvec) {
        gamma_r[i].load(gg + static_cast<int64_t>(v) * kVec);
        if constexpr (!kRms) beta_r[i].load(bg + static_cast<int64_t>(v) * kVec);
      }
    }
  }

  for (int64_t tile = first_tile; tile < num_tiles; tile += tile_stride) {
    const int64_t row = tile * rows_per_cta + group;
    const bool row_ok = row < p.rows;
    const int64_t base = row * hidden;

    // The input of the norm for vector v: x, or x + residual rounded to I (stored as
    // residual_out when `store` is set, once per element).
    auto load_input = [&](int v, VI& in, bool store) {
      in.load(xg + base + static_cast<int64_t>(v) * kVec);
      if constexpr (kAdd) {
        VI r;
        r.load(rg + base + static_cast<int64_t>(v) * kVec);
#pragma unroll
        for (int k = 0; k < kVec; ++k) in.v[k] = from_float<I>(to_float(in.v[k]) + to_float(r.v[k]));
        if (store) in.store(rog + base + static_cast<int64_t>(v) * kVec);
      }
    };

    [[maybe_unused]] VI x_r[kStream ? 1 : kN];
    float sum = 0.f;
    if constexpr (!kStream) {
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        const int v = vec_index(i);
        if (row_ok && v < nvec) {
          load_input(v, x_r[i], true);
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            const float f = to_float(x_r[i].v[k]);
            sum += kRms ? f * f : f;
          }
        }
      }
    } else {
      for (int i = 0; i < stream_steps; ++i) {
        const int v = vec_index(i);
        if (row_ok && v < nvec) {
          VI in;
          load_input(v, in, true);
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            const float f = to_float(in.v[k]);
            sum += kRms ? f * f : f;
          }
        }
      }
    }
    sum = group_sum(sum, G, C, smem, phase);

    float mean = 0.f;
    float rsigma;
    if constexpr (kRms) {
      rsigma = rsqrtf(sum * inv_hidden + p.epsilon);
    } else {
      // Second pass over the held (or re-read) row: the variance about the mean, which
      // keeps its precision when |mean| >> stddev.
      mean = sum * inv_hidden;
      float sq = 0.f;
      if constexpr (!kStream) {
#pragma unroll
        for (int i = 0; i < kN; ++i) {
          if (row_ok && vec_index(i) < nvec) {
#pragma unroll
            for (int k = 0; k < kVec; ++k) {
              const float d = to_float(x_r[i].v[k]) - mean;
              sq += d * d;
            }
          }
        }
      } else {
        for (int i = 0; i < stream_steps; ++i) {
          const int v = vec_index(i);
          if (row_ok && v < nvec) {
            VI in;
            if constexpr (kAdd) {
              in.load(rog + base + static_cast<int64_t>(v) * kVec);
            } else {
              in.load(xg + base + static_cast<int64_t>(v) * kVec);
            }
#pragma unroll
            for (int k = 0; k < kVec; ++k) {
              const float d = to_float(in.v[k]) - mean;
              sq += d * d;
            }
          }
        }
      }
      sq = group_sum(sq, G, C, smem, phase);
      rsigma = rsqrtf(sq * inv_hidden + p.epsilon);
    }

    if (row_ok && t == 0 && cta_rank == 0) {
      p.rsigma[row] = rsigma;
      if constexpr (!kRms) p.mu[row] = mean;
    }

    auto store_output = [&](int v, const VI& in, const VW& gv, const VW& bv) {
      VO out;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float g = to_float(gv.v[k]) + gamma_shift;
        float y = (to_float(in.v[k]) - mean) * rsigma * g;
        if constexpr (!kRms) y += to_float(bv.v[k]);
        out.v[k] = from_float<O>(y);
      }
      out.store(zg + base + static_cast<int64_t>(v) * kVec);
    };
    auto load_weights = [&](int v, VW& gv, VW& bv) {
      gv.load(gg + static_cast<int64_t>(v) * kVec);
      if constexpr (!kRms) bv.load(bg + static_cast<int64_t>(v) * kVec);
    };

    if constexpr (!kStream) {
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        const int v = vec_index(i);
        if (row_ok && v < nvec) {
          if constexpr (kHoldWeights) {
            store_output(v, x_r[i], gamma_r[i], beta_r[i]);
          } else {
            VW gv, bv;
            load_weights(v, gv, bv);
            store_output(v, x_r[i], gv, bv);
          }
        }
      }
    } else {
      for (int i = 0; i < stream_steps; ++i) {
        const int v = vec_index(i);
        if (row_ok && v < nvec) {
          VI in;
          if constexpr (kAdd) {
            in.load(rog + base + static_cast<int64_t>(v) * kVec);
          } else {
            in.load(xg + base + static_cast<int64_t>(v) * kVec);
          }
          VW gv, bv;
          load_weights(v, gv, bv);
          store_output(v, in, gv, bv);
        }
      }
    }
  }
  // No CTA may leave while another CTA of its cluster may still read its shared memory.
  if (C > 1) platform::cluster_sync();
}

}  // namespace normtune
