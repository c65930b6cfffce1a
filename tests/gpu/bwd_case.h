// One backward call on the GPU against the fp64 reference: inputs (with the forward's
// statistics from the fp64 reference, stored in fp32), NaN-poisoned outputs and workspace,
// the nvte_* call through the two-call workspace protocol, the comparison.
#pragma once

#include <normtune/reference.h>

#include "gpu_test_util.h"

namespace normtune::test {

struct BwdCase {
  NormType norm = NormType::kRMSNorm;
  bool add = false;       // nvte_rmsnorm_bwd_add
  bool in_place = false;  // dx is dz
  DType wtype = DType::kBFloat16;
  DType itype = DType::kBFloat16;
  size_t rows = 7;
  size_t hidden = 4096;
  bool zero_centered_gamma = false;
  size_t x_offset = 0;  // bytes past an aligned allocation: x, dz, dx, add
  size_t gamma_offset = 0;
  uint32_t seed = 1;
  int multiprocessor_count = 0;

  std::string describe() const {
    return detail::concat(norm == NormType::kRMSNorm ? "RMSNorm" : "LayerNorm", add ? "+add" : "",
                          " bwd ", rows, "x", hidden, " w=", dtype_name(wtype), " i=", dtype_name(itype),
                          zero_centered_gamma ? " zero_centered" : "", in_place ? " in_place" : "",
                          " offsets=", x_offset, "/", gamma_offset, " sms=", multiprocessor_count);
  }
};

struct BwdResult {
  HostArray dx, dgamma, dbeta;
  KernelChoice kernel;
  size_t workspace_bytes = 0;
};

// dx: rounded once to x's type, plus fp32 arithmetic error relative to the size of the
// terms (BwdOutputs::dx_scale). dgamma/dbeta: rounded once to gamma's type, plus fp32
// summation error relative to the sum of |terms| over the rows (so it scales with them).
inline constexpr double kFp32TermError = 1e-5;

// The forward statistics the backward consumes: fp64 reference values stored in fp32.
inline void reference_stats(NormType norm, const HostArray& x, size_t rows, size_t hidden,
                            std::vector<double>* mu, std::vector<double>* rsigma) {
  const std::vector<double> xv = x.values();
  const std::vector<double> ones(hidden, 1.0), zeros(hidden, 0.0);
  reference::FwdInputs in;
  in.norm = norm;
  in.rows = static_cast<int64_t>(rows);
  in.hidden = static_cast<int64_t>(hidden);
  in.x = xv.data();
  in.gamma = ones.data();
  in.beta = zeros.data();
  in.epsilon = 1e-5;
  const reference::FwdOutputs f = reference::norm_fwd(in);
  mu->assign(rows, 0.0);
  rsigma->resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    (*rsigma)[r] = static_cast<float>(f.rsigma[r]);
    if (norm == NormType::kLayerNorm) (*mu)[r] = static_cast<float>(f.mu[r]);
  }
}

inline HostArray float_array(const std::vector<double>& v) {
  HostArray a(DType::kFloat32, v.size());
  for (size_t i = 0; i < v.size(); ++i) a.set(i, v[i]);
  return a;
}

// Runs the case; checks dx, dgamma (and dbeta) against the reference when `check` is set.
inline BwdResult run_bwd(const BwdCase& c, bool check = true) {
  const size_t n = c.rows * c.hidden;
  const bool ln = c.norm == NormType::kLayerNorm;
  const HostArray x = random_array(c.itype, n, c.seed, ln ? 0.5 : 0.0, 1.0);
  const HostArray dz = random_array(c.itype, n, c.seed + 1, 0.0, 1.0);
  const HostArray add = random_array(c.itype, n, c.seed + 2, 0.0, 1.0);
  const HostArray gamma =
      random_array(c.wtype, c.hidden, c.seed + 3, c.zero_centered_gamma ? 0.0 : 1.0, 0.2);
  std::vector<double> mu, rsigma;
  reference_stats(c.norm, x, c.rows, c.hidden, &mu, &rsigma);

  DeviceArray d_x = DeviceArray::from_host(x, c.x_offset);
  DeviceArray d_dz = DeviceArray::from_host(dz, c.x_offset);
  DeviceArray d_add = DeviceArray::from_host(add, c.x_offset);
  DeviceArray d_gamma = DeviceArray::from_host(gamma, c.gamma_offset);
  DeviceArray d_mu = DeviceArray::from_host(float_array(mu));
  DeviceArray d_rs = DeviceArray::from_host(float_array(rsigma));
  DeviceArray d_dx(c.itype, n, c.x_offset);
  DeviceArray d_dgamma(c.wtype, c.hidden, c.gamma_offset);
  DeviceArray d_dbeta(c.wtype, c.hidden, c.gamma_offset);
  d_dx.poison();
  d_dgamma.poison();
  d_dbeta.poison();
  DeviceArray& dx_out = c.in_place ? d_dz : d_dx;

  TensorHandle t_x(d_x, {c.rows, c.hidden});
  TensorHandle t_dz(d_dz, {c.rows, c.hidden});
  TensorHandle t_add(d_add, {c.rows, c.hidden});
  TensorHandle t_gamma(d_gamma, {c.hidden});
  TensorHandle t_mu(d_mu, {c.rows});
  TensorHandle t_rs(d_rs, {c.rows});
  TensorHandle t_dx(dx_out, {c.rows, c.hidden});
  TensorHandle t_dgamma(d_dgamma, {c.hidden});
  TensorHandle t_dbeta(d_dbeta, {c.hidden});

  auto call = [&](NVTETensor ws) {
    if (c.add) {
      nvte_rmsnorm_bwd_add(t_dz, t_x, t_add, t_rs, t_gamma, t_dx, t_dgamma, ws, c.multiprocessor_count,
                           c.zero_centered_gamma, nullptr);
    } else if (ln) {
      nvte_layernorm_bwd(t_dz, t_x, t_mu, t_rs, t_gamma, t_dx, t_dgamma, t_dbeta, ws,
                         c.multiprocessor_count, c.zero_centered_gamma, nullptr);
    } else {
      nvte_rmsnorm_bwd(t_dz, t_x, t_rs, t_gamma, t_dx, t_dgamma, ws, c.multiprocessor_count,
                       c.zero_centered_gamma, nullptr);
    }
  };
  // The two-call protocol, with the workspace NaN-poisoned: every partial must be written
  // before it is read.
  TensorHandle ws;
  call(ws.get());
  const NVTEShape shape = nvte_tensor_shape(ws);
  EXPECT_EQ(shape.ndim, 1u);
  EXPECT_EQ(nvte_tensor_type(ws), kNVTEByte);
  BwdResult r;
  r.workspace_bytes = shape.ndim == 1 ? shape.data[0] : 0;
  DeviceBuffer ws_mem(r.workspace_bytes);
  if (r.workspace_bytes > 0) NORMTUNE_CUDA_CHECK(cudaMemset(ws_mem.get(), 0xFF, r.workspace_bytes));
  ws.set(ws_mem.get(), {r.workspace_bytes}, DType::kByte);
  call(ws.get());
  NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());

  r.kernel = last_kernel();
  r.dx = dx_out.to_host();
  r.dgamma = d_dgamma.to_host();
  if (ln) r.dbeta = d_dbeta.to_host();

  if (check) {
    const std::vector<double> xv = x.values(), dzv = dz.values(), av = add.values(), gv = gamma.values();
    reference::BwdInputs in;
    in.norm = c.norm;
    in.rows = static_cast<int64_t>(c.rows);
    in.hidden = static_cast<int64_t>(c.hidden);
    in.dz = dzv.data();
    in.x = xv.data();
    in.add = c.add ? av.data() : nullptr;
    in.mu = mu.data();
    in.rsigma = rsigma.data();
    in.gamma = gv.data();
    in.zero_centered_gamma = c.zero_centered_gamma;
    const reference::BwdOutputs want = reference::norm_bwd(in);
    const std::string what = c.describe() + " kernel " + r.kernel.name;
    EXPECT_TRUE(close_to_reference(r.dx, want.dx, {output_tolerance(c.itype).rtol, 1e-6}, what + " dx",
                                   &want.dx_scale, kFp32TermError));
    EXPECT_TRUE(close_to_reference(r.dgamma, want.dgamma, {output_tolerance(c.wtype).rtol, 1e-6},
                                   what + " dgamma", &want.dgamma_scale, kFp32TermError));
    if (ln) {
      EXPECT_TRUE(close_to_reference(r.dbeta, want.dbeta, {output_tolerance(c.wtype).rtol, 1e-6},
                                     what + " dbeta", &want.dbeta_scale, kFp32TermError));
    }
  }
  return r;
}

}  // namespace normtune::test
