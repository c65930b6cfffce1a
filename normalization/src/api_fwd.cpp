// nvte_rmsnorm_fwd, nvte_layernorm_fwd, normtune_rmsnorm_add_fwd: validate, build the key,
// answer the workspace query, select and run the kernel.
#include <cmath>
#include <limits>

#include <normtune/common/device_info.h>

#include "api_common.h"
#include "norm_fwd_args.h"
#include "norm_fwd_plan.h"

namespace normtune {

namespace {

struct FwdTensors {
  NVTETensor x, residual, gamma, beta, z, residual_out, mu, rsigma, workspace;
};

void norm_fwd(NormType norm, bool fused_add, const FwdTensors& t, float epsilon,
              int multiprocessorCount, bool zero_centered_gamma, cudaStream_t stream) {
  const auto [rows, hidden] = checked_rows_hidden(t.x, multiprocessorCount);
  NORMTUNE_CHECK_ARG(epsilon >= 0.f && std::isfinite(epsilon), "epsilon", "a finite value >= 0",
                     epsilon);

  const Shape row_shape{rows, hidden};
  const Shape vec_shape{hidden};
  const Shape stat_shape{rows};
  const BasicTensor& x = checked_buffer(t.x, "x", row_shape, "[rows, hidden]");
  const BasicTensor& gamma = checked_buffer(t.gamma, "gamma", vec_shape, "[hidden]");
  const BasicTensor& z = checked_buffer(t.z, "z", row_shape, "x's");
  const BasicTensor& rsigma = checked_buffer(t.rsigma, "rsigma", stat_shape, "[rows]");
  expect_wide_float(x, "x");
  expect_gamma_dtype(gamma, x.dtype);
  const bool z_ok = z.dtype == x.dtype ||
                    (x.dtype == DType::kFloat32 && (z.dtype == DType::kBFloat16 || z.dtype == DType::kFloat16));
  NORMTUNE_CHECK_ARG(z_ok, "z",
                     detail::concat("dtype ", dtype_name(x.dtype),
                                    x.dtype == DType::kFloat32 ? ", bf16 or fp16" : " (x's)"),
                     detail::concat(dtype_name(z.dtype),
                                    is_fp8(z.dtype) || is_fp4(z.dtype)
                                        ? " (quantized outputs are not supported yet)"
                                        : ""));
  expect_dtype(rsigma, "rsigma", DType::kFloat32);

  const BasicTensor* beta = nullptr;
  const BasicTensor* mu = nullptr;
  if (norm == NormType::kLayerNorm) {
    beta = &checked_buffer(t.beta, "beta", vec_shape, "[hidden]");
    mu = &checked_buffer(t.mu, "mu", stat_shape, "[rows]");
    expect_dtype(*beta, "beta", gamma.dtype);
    expect_dtype(*mu, "mu", DType::kFloat32);
  }
  const BasicTensor* residual = nullptr;
  const BasicTensor* residual_out = nullptr;
  if (fused_add) {
    residual = &checked_buffer(t.residual, "residual", row_shape, "x's");
    residual_out = &checked_buffer(t.residual_out, "residual_out", row_shape, "x's");
    expect_dtype(*residual, "residual", x.dtype);
    expect_dtype(*residual_out, "residual_out", x.dtype);
  }

  if (workspace_query(t.workspace, 0)) return;

  expect_data(x, "x");
  expect_data(gamma, "gamma");
  expect_data(z, "z");
  expect_data(rsigma, "rsigma");
  expect_no_overlap(z, "z", x, "x");
  expect_no_overlap(z, "z", gamma, "gamma");
  expect_no_overlap(rsigma, "rsigma", x, "x");
  if (beta != nullptr) {
    expect_data(*beta, "beta");
    expect_data(*mu, "mu");
    expect_no_overlap(z, "z", *beta, "beta");
    expect_no_overlap(*mu, "mu", x, "x");
    expect_no_overlap(*mu, "mu", rsigma, "rsigma");
  }
  if (residual != nullptr) {
    expect_data(*residual, "residual");
    expect_data(*residual_out, "residual_out");
    expect_no_overlap(z, "z", *residual, "residual");
    expect_no_overlap(z, "z", *residual_out, "residual_out");
    expect_no_overlap(*residual_out, "residual_out", x, "x");
    // residual_out may be residual itself (in place), but not a shifted view of it.
    if (residual_out->dptr != residual->dptr) {
      expect_no_overlap(*residual_out, "residual_out", *residual, "residual");
    }
  }

  NormKey key;
  key.norm = norm;
  key.stage = fused_add ? Stage::kForwardAdd : Stage::kForward;
  key.wtype = gamma.dtype;
  key.itype = x.dtype;
  key.otype = z.dtype;
  key.ctype = DType::kFloat32;
  key.hidden_size = static_cast<uint32_t>(hidden);
  // Zero-centered gamma is a run-time parameter of every forward kernel, not a key flag.

  if (rows == 0) return;

  const DeviceInfo& dev = device_info(current_device());
  FwdArgs args;
  FwdParams& p = args.params;
  p.x = x.dptr;
  p.gamma = gamma.dptr;
  p.z = z.dptr;
  p.rsigma = static_cast<float*>(rsigma.dptr);
  if (beta != nullptr) {
    p.beta = beta->dptr;
    p.mu = static_cast<float*>(mu->dptr);
  }
  if (residual != nullptr) {
    p.residual = residual->dptr;
    p.residual_out = residual_out->dptr;
  }
  p.rows = static_cast<int64_t>(rows);
  p.hidden = static_cast<int>(hidden);
  p.epsilon = epsilon;
  p.zero_centered_gamma = zero_centered_gamma;
  args.sm_bound = multiprocessorCount > 0 ? multiprocessorCount : dev.sm_count;
  args.clusters = dev.supports_clusters;
  run_selected(key, &args, stream, forward_plan_override() != nullptr);
}

}  // namespace
}  // namespace normtune

extern "C" {

void nvte_layernorm_fwd(const NVTETensor x, const NVTETensor gamma, const NVTETensor beta,
                        const float epsilon, NVTETensor z, NVTETensor mu, NVTETensor rsigma,
                        NVTETensor workspace, const int multiprocessorCount,
                        const bool zero_centered_gamma, cudaStream_t stream) {
  normtune::norm_fwd(normtune::NormType::kLayerNorm, false,
                     {x, nullptr, gamma, beta, z, nullptr, mu, rsigma, workspace}, epsilon,
                     multiprocessorCount, zero_centered_gamma, stream);
}

void nvte_rmsnorm_fwd(const NVTETensor x, const NVTETensor gamma, const float epsilon,
                      NVTETensor z, NVTETensor rsigma, NVTETensor workspace,
                      const int multiprocessorCount, const bool zero_centered_gamma,
                      cudaStream_t stream) {
  normtune::norm_fwd(normtune::NormType::kRMSNorm, false,
                     {x, nullptr, gamma, nullptr, z, nullptr, nullptr, rsigma, workspace}, epsilon,
                     multiprocessorCount, zero_centered_gamma, stream);
}

void normtune_rmsnorm_add_fwd(const NVTETensor x, const NVTETensor residual,
                              const NVTETensor gamma, const float epsilon, NVTETensor z,
                              NVTETensor residual_out, NVTETensor rsigma, NVTETensor workspace,
                              const int multiprocessorCount, const bool zero_centered_gamma,
                              cudaStream_t stream) {
  normtune::norm_fwd(normtune::NormType::kRMSNorm, true,
                     {x, residual, gamma, nullptr, z, residual_out, nullptr, rsigma, workspace},
                     epsilon, multiprocessorCount, zero_centered_gamma, stream);
}

}  // extern "C"
