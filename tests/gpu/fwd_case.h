// One forward call on the GPU against the fp64 reference: inputs, poisoned outputs, the
// nvte_* call, the comparison.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <normtune/reference.h>

#include "gpu_test_util.h"

namespace normtune::test {

// The per-tensor scale of an FP8 z in these cases (values up to ~8 stay far from saturation).
inline constexpr double kFp8CaseScale = 4.0;

struct FwdCase {
  NormType norm = NormType::kRMSNorm;
  bool fused_add = false;
  bool in_place = false;  // fused add: residual_out is residual
  DType wtype = DType::kBFloat16;
  DType itype = DType::kBFloat16;
  DType otype = DType::kBFloat16;
  size_t rows = 7;
  size_t hidden = 4096;
  bool zero_centered_gamma = false;
  bool gamma_in_wtype = false;  // zero-centered gamma + 1 rounded to gamma's dtype (cuDNN)
  bool with_amax = false;  // a high-precision z with an amax buffer (FP8 z always has one)
  size_t x_offset = 0;  // bytes past an aligned allocation
  size_t z_offset = 0;
  size_t gamma_offset = 0;
  float epsilon = 1e-5f;
  uint32_t seed = 1;
  int multiprocessor_count = 0;
  Specials x_specials;  // NaN/Inf put into x
  uint8_t poison = 0xFF;  // the outputs' poison byte (0xFF: NaN; untouched() expects it)
  double fp8_scale = kFp8CaseScale;  // an FP8 z's per-tensor scale (larger: codes saturate)
  // x's distribution: normal, mean x_mean (NaN: 0.5 for LayerNorm, so that the mean matters;
  // 0 for RMSNorm), standard deviation x_stddev; 0 gives rows of one value, x_mean.
  double x_mean = std::nan("");
  double x_stddev = 1.0;
  // z's absolute tolerance when it must exceed the dtype's: rows whose offset is large against
  // their spread lose to fp32 what the mean's rounding costs, |mean| * 2^-24 * rsigma * |gamma|
  // per rounding, in every correct fp32 kernel (TransformerEngine's too).
  double z_atol = 0.0;

  std::string describe() const {
    return detail::concat(norm == NormType::kRMSNorm ? "RMSNorm" : "LayerNorm",
                          x_specials.empty() ? "" : " (NaN/Inf in x)",
                          fused_add ? (in_place ? "+add(in place)" : "+add") : "", " ", rows, "x",
                          hidden, " w=", dtype_name(wtype), " i=", dtype_name(itype),
                          " o=", dtype_name(otype), zero_centered_gamma ? " zero_centered" : "",
                          gamma_in_wtype ? " (gamma+1 in wtype)" : "", with_amax ? " +amax" : "",
                          is_fp8(otype) ? detail::concat(" scale ", fp8_scale) : std::string(),
                          " offsets=", x_offset, "/", gamma_offset, "/", z_offset);
  }
};

// The fp64 reference of a forward call on host arrays (eps 1e-5; residual null: no add).
inline reference::FwdOutputs reference_fwd(NormType norm, size_t rows, size_t hidden, const HostArray& x,
                                           const HostArray* residual, const HostArray& gamma,
                                           const HostArray& beta, bool zero_centered_gamma, DType itype) {
  const std::vector<double> xv = x.values(), gv = gamma.values(), bv = beta.values();
  const std::vector<double> rv = residual != nullptr ? residual->values() : std::vector<double>{};
  reference::FwdInputs in;
  in.norm = norm;
  in.rows = static_cast<int64_t>(rows);
  in.hidden = static_cast<int64_t>(hidden);
  in.x = xv.data();
  in.residual = residual != nullptr ? rv.data() : nullptr;
  in.gamma = gv.data();
  in.beta = bv.data();
  in.epsilon = 1e-5f;
  in.zero_centered_gamma = zero_centered_gamma;
  in.itype = itype;
  return reference::norm_fwd(in);
}

struct FwdResult {
  HostArray z, residual_out, mu, rsigma;
  HostArray amax, scale_inv;  // per-tensor FP8 z
  KernelChoice kernel;
};

// The case's inputs, as FwdProblem makes them (tests that check an output exactly rebuild them).
inline HostArray case_x(const FwdCase& c) {
  const double mean = std::isnan(c.x_mean) ? (c.norm == NormType::kLayerNorm ? 0.5 : 0.0) : c.x_mean;
  HostArray x(c.itype, c.rows * c.hidden);
  if (c.x_stddev == 0.0) {
    for (size_t i = 0; i < x.count; ++i) x.set(i, mean);
  } else {
    x = random_array(c.itype, c.rows * c.hidden, c.seed, mean, c.x_stddev);
  }
  return with_specials(std::move(x), c.x_specials);
}
inline HostArray case_gamma(const FwdCase& c) {
  return random_array(c.wtype, c.hidden, c.seed + 2, c.zero_centered_gamma ? 0.0 : 1.0, 0.2);
}
inline HostArray case_beta(const FwdCase& c) { return random_array(c.wtype, c.hidden, c.seed + 3, 0.0, 0.5); }

// The buffers and handles of one case: random inputs, NaN-poisoned outputs, the nvte_* call
// with any workspace (either call of the two-call protocol), the comparison. An FP8 otype
// gets TransformerEngine's per-tensor buffers: scale, amax (zeroed), scale_inv (poisoned).
class FwdProblem {
 public:
  explicit FwdProblem(const FwdCase& c)
      : c_(c),
        n_(c.rows * c.hidden),
        ln_(c.norm == NormType::kLayerNorm),
        x_(case_x(c)),
        residual_(random_array(c.itype, n_, c.seed + 1, 0.0, 1.0)),
        gamma_(case_gamma(c)),
        beta_(case_beta(c)),
        d_x_(DeviceArray::from_host(x_, c.x_offset)),
        d_res_(DeviceArray::from_host(residual_, c.x_offset)),
        d_gamma_(DeviceArray::from_host(gamma_, c.gamma_offset)),
        d_beta_(DeviceArray::from_host(beta_, c.gamma_offset)),
        d_z_(c.otype, n_, c.z_offset),
        d_res_out_(c.itype, n_, c.x_offset),
        d_mu_(DType::kFloat32, c.rows),
        d_rs_(DType::kFloat32, c.rows),
        d_scale_(DeviceArray::from_host(scalar(c.fp8_scale))),
        d_amax_(DeviceArray::from_host(scalar(0.0))),
        d_sinv_(DType::kFloat32, 1),
        t_x_(d_x_, {c.rows, c.hidden}),
        t_res_(d_res_, {c.rows, c.hidden}),
        t_res_out_(residual_out(), {c.rows, c.hidden}),
        t_gamma_(d_gamma_, {c.hidden}),
        t_beta_(d_beta_, {c.hidden}),
        t_z_(d_z_, {c.rows, c.hidden}),
        t_mu_(d_mu_, {c.rows}),
        t_rs_(d_rs_, {c.rows}) {
    d_z_.poison(c.poison);
    d_res_out_.poison(c.poison);
    d_mu_.poison(c.poison);
    d_rs_.poison(c.poison);
    d_sinv_.poison();
    if (is_fp8(c.otype)) {
      t_z_.set_param(kNVTEScale, d_scale_, {1});
      t_z_.set_param(kNVTEAmax, d_amax_, {1});
      t_z_.set_param(kNVTERowwiseScaleInv, d_sinv_, {1});
    } else if (c.with_amax) {
      t_z_.set_param(kNVTEAmax, d_amax_, {1});
    }
  }
  // z's amax buffer set to v (FP8 z, or with_amax): a call folds its max into it.
  void set_amax(double v) const {
    HostArray h(DType::kFloat32, 1);
    h.set(0, v);
    NORMTUNE_CUDA_CHECK(cudaMemcpy(d_amax_.ptr, h.raw.data(), sizeof(float), cudaMemcpyHostToDevice));
  }

  FwdProblem(const FwdProblem&) = delete;
  FwdProblem& operator=(const FwdProblem&) = delete;

  const FwdCase& params() const { return c_; }
  // Later calls (and check()) with this epsilon: the same buffers, another scalar.
  void set_epsilon(float epsilon) { c_.epsilon = epsilon; }

  // The entry point of the case, with `workspace` (a size query or a real call).
  void call(NVTETensor workspace, cudaStream_t stream = nullptr) const {
    if (c_.fused_add) {
      normtune_rmsnorm_add_fwd(t_x_, t_res_, t_gamma_, c_.epsilon, t_z_, t_res_out_, t_rs_, workspace,
                               c_.multiprocessor_count, c_.zero_centered_gamma, stream);
    } else if (ln_) {
      nvte_layernorm_fwd(t_x_, t_gamma_, t_beta_, c_.epsilon, t_z_, t_mu_, t_rs_, workspace, c_.multiprocessor_count,
                         c_.zero_centered_gamma, stream);
    } else {
      nvte_rmsnorm_fwd(t_x_, t_gamma_, c_.epsilon, t_z_, t_rs_, workspace, c_.multiprocessor_count,
                       c_.zero_centered_gamma, stream);
    }
  }

  // The outputs now (after the device is idle) and the last kernel this thread ran.
  FwdResult outputs() const {
    NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
    FwdResult r;
    r.kernel = last_kernel();
    r.z = d_z_.to_host();
    r.rsigma = d_rs_.to_host();
    if (ln_) r.mu = d_mu_.to_host();
    if (c_.fused_add) r.residual_out = residual_out().to_host();
    r.amax = d_amax_.to_host();
    r.scale_inv = d_sinv_.to_host();
    return r;
  }

  // Whether nothing was written: every poisoned output is still NaN, and an in-place
  // residual_out (the residual itself) still holds the residual.
  ::testing::AssertionResult untouched() const {
    NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
    const std::string what = c_.describe();
    if (d_amax_.to_host().get(0) != 0.0) return ::testing::AssertionFailure() << what << ": amax was written";
    for (const DeviceArray* out : {&d_z_, &d_mu_, &d_rs_, &d_res_out_, &d_sinv_}) {
      const HostArray h = out->to_host();
      for (size_t i = 0; i < h.count; ++i) {
        if (!std::isnan(h.get(i))) {
          return ::testing::AssertionFailure() << what << ": an output was written (element " << i << " = " << h.get(i) << ")";
        }
      }
    }
    if (c_.in_place) {
      ::testing::AssertionResult same = same_bits(d_res_.to_host(), residual_, what + " residual (in place)");
      if (!same) return same;
    }
    return ::testing::AssertionSuccess();
  }

  // x + residual, added in fp32 and rounded once to x's type, on the host: what residual_out
  // must hold, bit for bit.
  HostArray residual_sum() const {
    HostArray sum(c_.itype, n_);
    for (size_t i = 0; i < n_; ++i) {
      sum.set(i, static_cast<double>(static_cast<float>(x_.get(i)) + static_cast<float>(residual_.get(i))));
    }
    return sum;
  }

  // Every output against the fp64 reference.
  void check(const FwdResult& r) const {
    const bool rounded = c_.zero_centered_gamma && c_.gamma_in_wtype;  // (then a plain gamma)
    const std::vector<double> xv = x_.values(), rv = residual_.values(), bv = beta_.values();
    const std::vector<double> gv =
        rounded ? gamma_plus_one_in_wtype(gamma_).values() : gamma_.values();
    reference::FwdInputs in;
    in.norm = c_.norm;
    in.rows = static_cast<int64_t>(c_.rows);
    in.hidden = static_cast<int64_t>(c_.hidden);
    in.x = xv.data();
    in.residual = c_.fused_add ? rv.data() : nullptr;
    in.gamma = gv.data();
    in.beta = bv.data();
    in.epsilon = c_.epsilon;
    in.zero_centered_gamma = c_.zero_centered_gamma && !rounded;
    in.itype = c_.itype;
    const reference::FwdOutputs want = reference::norm_fwd(in);
    const std::string what = c_.describe() + " kernel " + r.kernel.name;
    if (is_fp8(c_.otype)) {
      // Codes against value x scale, saturated at the format's largest finite value (448,
      // 57344): within one code (3 or 2 significand bits: a code either side of the nearest
      // when fp32 and fp64 straddle a midpoint), subnormal spacing absolute; amax the max
      // |value| (fp32, NaN values ignored); scale_inv exactly 1 / scale in fp32.
      const bool e4m3 = c_.otype == DType::kFloat8E4M3;
      const double top = e4m3 ? 448.0 : 57344.0;
      std::vector<double> scaled(want.z.size());
      double amax = 0;
      for (size_t i = 0; i < scaled.size(); ++i) {
        scaled[i] = std::clamp(want.z[i] * c_.fp8_scale, -top, top);
        amax = std::max(amax, std::fabs(want.z[i]));
      }
      const Tolerance code{e4m3 ? 1.0 / 8 : 1.0 / 4, e4m3 ? 0x1p-9 : 0x1p-16};
      EXPECT_TRUE(close_to_reference(r.z, scaled, code, what + " z (fp8 codes)"));
      EXPECT_NEAR(r.amax.get(0), amax, 2e-5 * amax) << what << " amax";
      EXPECT_EQ(static_cast<float>(r.scale_inv.get(0)), 1.f / static_cast<float>(c_.fp8_scale)) << what;
    } else {
      Tolerance tol = output_tolerance(c_.otype);
      tol.atol = std::max(tol.atol, c_.z_atol);
      EXPECT_TRUE(close_to_reference(r.z, want.z, tol, what + " z"));
      if (c_.with_amax) {
        // The max |z| of the values as written: exact.
        double amax = 0;
        for (size_t i = 0; i < r.z.count; ++i) amax = std::max(amax, std::fabs(r.z.get(i)));
        EXPECT_EQ(r.amax.get(0), amax) << what << " amax of z";
      }
    }
    EXPECT_TRUE(close_to_reference(r.rsigma, want.rsigma, stat_tolerance(), what + " rsigma"));
    if (ln_) {
      EXPECT_TRUE(close_to_reference(r.mu, want.mu, stat_tolerance(), what + " mu"));
    }
    if (c_.fused_add) {
      // residual_out is x + residual in fp32 rounded to x's type: exact.
      EXPECT_TRUE(close_to_reference(r.residual_out, want.residual_out, {0, 0}, what + " residual_out"));
    }
  }

 private:
  const DeviceArray& residual_out() const { return c_.in_place ? d_res_ : d_res_out_; }

  FwdCase c_;
  const size_t n_;
  const bool ln_;
  const HostArray x_, residual_, gamma_, beta_;
  static HostArray scalar(double v) {
    HostArray h(DType::kFloat32, 1);
    h.set(0, v);
    return h;
  }

  DeviceArray d_x_, d_res_, d_gamma_, d_beta_, d_z_, d_res_out_, d_mu_, d_rs_, d_scale_, d_amax_, d_sinv_;
  TensorHandle t_x_, t_res_, t_res_out_, t_gamma_, t_beta_, t_z_, t_mu_, t_rs_;
};

// Runs the case through the two-call workspace protocol; checks every output against the
// reference when `check` is set.
inline FwdResult run_fwd(const FwdCase& c, bool check = true) {
  const FwdProblem p(c);
  call_with_workspace([&](NVTETensor ws) { p.call(ws); });
  FwdResult r = p.outputs();
  if (check) p.check(r);
  return r;
}

}  // namespace normtune::test
