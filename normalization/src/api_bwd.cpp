// nvte_rmsnorm_bwd, nvte_rmsnorm_bwd_add, nvte_layernorm_bwd: validate, build the key,
// select the kernel, answer the workspace query, run.
#include <limits>
#include <utility>

#include <normtune/common/device_info.h>
#include <normtune/tuning.h>

#include "api_common.h"
#include "norm_bwd_args.h"

namespace normtune {

namespace {

struct BwdTensors {
  NVTETensor dz, x, add, mu, rsigma, gamma, dx, dgamma, dbeta, workspace;
};

void norm_bwd(NormType norm, bool add_grad, const BwdTensors& t, int multiprocessorCount,
              bool zero_centered_gamma, cudaStream_t stream) {
  const auto [rows, hidden] = checked_rows_hidden(t.x, multiprocessorCount);
  NORMTUNE_CHECK_ARG(rows <= static_cast<size_t>(std::numeric_limits<int>::max()), "x",
                     "at most 2^31 - 1 rows", rows);

  const Shape row_shape{rows, hidden};
  const Shape vec_shape{hidden};
  const Shape stat_shape{rows};
  const BasicTensor& x = checked_buffer(t.x, "x", row_shape, "[rows, hidden]");
  const BasicTensor& dz = checked_buffer(t.dz, "dz", row_shape, "x's");
  const BasicTensor& rsigma = checked_buffer(t.rsigma, "rsigma", stat_shape, "[rows]");
  const BasicTensor& gamma = checked_buffer(t.gamma, "gamma", vec_shape, "[hidden]");
  const BasicTensor& dx = checked_buffer(t.dx, "dx", row_shape, "x's");
  const BasicTensor& dgamma = checked_buffer(t.dgamma, "dgamma", vec_shape, "[hidden]");
  expect_wide_float(x, "x");
  expect_dtype(dz, "dz", x.dtype);
  expect_dtype(rsigma, "rsigma", DType::kFloat32);
  expect_gamma_dtype(gamma, x.dtype);
  expect_dtype(dx, "dx", x.dtype);
  expect_dtype(dgamma, "dgamma", gamma.dtype);
  const BasicTensor* mu = nullptr;
  const BasicTensor* dbeta = nullptr;
  if (norm == NormType::kLayerNorm) {
    mu = &checked_buffer(t.mu, "mu", stat_shape, "[rows]");
    dbeta = &checked_buffer(t.dbeta, "dbeta", vec_shape, "[hidden]");
    expect_dtype(*mu, "mu", DType::kFloat32);
    expect_dtype(*dbeta, "dbeta", gamma.dtype);
  }
  const BasicTensor* add = nullptr;
  if (add_grad) {
    add = &checked_buffer(t.add, "add", row_shape, "x's");
    expect_dtype(*add, "add", x.dtype);
  }

  NormKey key;
  key.norm = norm;
  key.stage = add_grad ? Stage::kBackwardAdd : Stage::kBackward;
  key.wtype = gamma.dtype;
  key.itype = x.dtype;
  key.otype = x.dtype;
  key.ctype = DType::kFloat32;
  key.hidden_size = static_cast<uint32_t>(hidden);

  BwdArgs args;
  BwdParams& p = args.params;
  p.dz = dz.dptr;
  p.x = x.dptr;
  p.add = add != nullptr ? add->dptr : nullptr;
  p.mu = mu != nullptr ? static_cast<const float*>(mu->dptr) : nullptr;
  p.rsigma = static_cast<const float*>(rsigma.dptr);
  p.gamma = gamma.dptr;
  p.dx = dx.dptr;
  p.dgamma = dgamma.dptr;
  p.dbeta = dbeta != nullptr ? dbeta->dptr : nullptr;
  p.rows = static_cast<int64_t>(rows);
  p.hidden = static_cast<int>(hidden);
  p.zero_centered_gamma = zero_centered_gamma;
  args.sm_bound = multiprocessorCount > 0 ? multiprocessorCount : device_info(current_device()).sm_count;

  // With a plan override (the autotuner), the general kernel runs with that layout.
  const KernelEntry& entry = select_kernel(key, &args, backward_plan_override() != nullptr);
  const size_t bytes = entry.workspace_bytes != nullptr ? entry.workspace_bytes(&args) : 0;
  if (workspace_query(t.workspace, bytes)) return;
  expect_workspace_aligned(t.workspace);
  args.workspace = const_tensor_from_handle(t.workspace, "workspace").data.dptr;

  expect_data(dz, "dz");
  expect_data(x, "x");
  expect_data(rsigma, "rsigma");
  expect_data(gamma, "gamma");
  expect_data(dx, "dx");
  expect_data(dgamma, "dgamma");
  // dx may be dz itself or add itself (in place: every element is read before it is
  // written, by the thread that writes it), but no other input.
  if (dx.dptr != dz.dptr) expect_no_overlap(dx, "dx", dz, "dz");
  expect_no_overlap(dx, "dx", x, "x");
  expect_no_overlap(dx, "dx", gamma, "gamma");
  expect_no_overlap(dx, "dx", rsigma, "rsigma");
  expect_no_overlap(dgamma, "dgamma", dx, "dx");
  expect_no_overlap(dgamma, "dgamma", dz, "dz");
  expect_no_overlap(dgamma, "dgamma", x, "x");
  expect_no_overlap(dgamma, "dgamma", gamma, "gamma");
  if (mu != nullptr) {
    expect_data(*mu, "mu");
    expect_data(*dbeta, "dbeta");
    expect_no_overlap(dx, "dx", *mu, "mu");
    expect_no_overlap(*dbeta, "dbeta", dx, "dx");
    expect_no_overlap(*dbeta, "dbeta", dgamma, "dgamma");
    expect_no_overlap(*dbeta, "dbeta", dz, "dz");
    expect_no_overlap(*dbeta, "dbeta", gamma, "gamma");
  }
  if (add != nullptr) {
    expect_data(*add, "add");
    if (dx.dptr != add->dptr) expect_no_overlap(dx, "dx", *add, "add");
    expect_no_overlap(dgamma, "dgamma", *add, "add");
  }
  const Tensor& ws = const_tensor_from_handle(t.workspace, "workspace");
  for (const auto& [out, name] : {std::pair{&dx, "dx"}, std::pair{&dgamma, "dgamma"},
                                  std::pair{dbeta, "dbeta"}}) {
    if (out != nullptr) expect_no_overlap(*out, name, ws.data, "workspace");
  }

  run_kernel(entry, &args, stream);
}

}  // namespace
}  // namespace normtune

extern "C" {

void nvte_rmsnorm_bwd(const NVTETensor dz, const NVTETensor x, const NVTETensor rsigma,
                      const NVTETensor gamma, NVTETensor dx, NVTETensor dgamma,
                      NVTETensor workspace, const int multiprocessorCount,
                      const bool zero_centered_gamma, cudaStream_t stream) {
  normtune::norm_bwd(normtune::NormType::kRMSNorm, false,
                     {dz, x, nullptr, nullptr, rsigma, gamma, dx, dgamma, nullptr, workspace},
                     multiprocessorCount, zero_centered_gamma, stream);
}

void nvte_rmsnorm_bwd_add(const NVTETensor dz, const NVTETensor x, const NVTETensor add,
                          const NVTETensor rsigma, const NVTETensor gamma, NVTETensor dx,
                          NVTETensor dgamma, NVTETensor workspace, const int multiprocessorCount,
                          const bool zero_centered_gamma, cudaStream_t stream) {
  normtune::norm_bwd(normtune::NormType::kRMSNorm, true,
                     {dz, x, add, nullptr, rsigma, gamma, dx, dgamma, nullptr, workspace},
                     multiprocessorCount, zero_centered_gamma, stream);
}

void nvte_layernorm_bwd(const NVTETensor dz, const NVTETensor x, const NVTETensor mu,
                        const NVTETensor rsigma, const NVTETensor gamma, NVTETensor dx,
                        NVTETensor dgamma, NVTETensor dbeta, NVTETensor workspace,
                        const int multiprocessorCount, const bool zero_centered_gamma,
                        cudaStream_t stream) {
  normtune::norm_bwd(normtune::NormType::kLayerNorm, false,
                     {dz, x, nullptr, mu, rsigma, gamma, dx, dgamma, dbeta, workspace},
                     multiprocessorCount, zero_centered_gamma, stream);
}

}  // extern "C"
