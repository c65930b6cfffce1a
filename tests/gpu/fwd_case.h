// One forward call on the GPU against the fp64 reference: inputs, poisoned outputs, the
// nvte_* call, the comparison.
#pragma once

#include <normtune/reference.h>

#include "gpu_test_util.h"

namespace normtune::test {

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
  size_t x_offset = 0;  // bytes past an aligned allocation
  size_t z_offset = 0;
  size_t gamma_offset = 0;
  float epsilon = 1e-5f;
  uint32_t seed = 1;
  int multiprocessor_count = 0;

  std::string describe() const {
    return detail::concat(norm == NormType::kRMSNorm ? "RMSNorm" : "LayerNorm",
                          fused_add ? (in_place ? "+add(in place)" : "+add") : "", " ",
                          rows, "x", hidden, " w=", dtype_name(wtype), " i=", dtype_name(itype),
                          " o=", dtype_name(otype), zero_centered_gamma ? " zero_centered" : "",
                          " offsets=", x_offset, "/", gamma_offset, "/", z_offset);
  }
};

struct FwdResult {
  HostArray z, residual_out, mu, rsigma;
  KernelChoice kernel;
};

// Runs the case; checks every output against the reference when `check` is set.
inline FwdResult run_fwd(const FwdCase& c, bool check = true) {
  const size_t n = c.rows * c.hidden;
  const bool ln = c.norm == NormType::kLayerNorm;
  // LayerNorm inputs get an offset so that the mean matters.
  const HostArray x = random_array(c.itype, n, c.seed, ln ? 0.5 : 0.0, 1.0);
  const HostArray residual = random_array(c.itype, n, c.seed + 1, 0.0, 1.0);
  const HostArray gamma =
      random_array(c.wtype, c.hidden, c.seed + 2, c.zero_centered_gamma ? 0.0 : 1.0, 0.2);
  const HostArray beta = random_array(c.wtype, c.hidden, c.seed + 3, 0.0, 0.5);

  DeviceArray dx = DeviceArray::from_host(x, c.x_offset);
  DeviceArray dres = DeviceArray::from_host(residual, c.x_offset);
  DeviceArray dgamma = DeviceArray::from_host(gamma, c.gamma_offset);
  DeviceArray dbeta = DeviceArray::from_host(beta, c.gamma_offset);
  DeviceArray dz(c.otype, n, c.z_offset);
  DeviceArray dres_out(c.itype, n, c.x_offset);
  DeviceArray dmu(DType::kFloat32, c.rows);
  DeviceArray drs(DType::kFloat32, c.rows);
  dz.poison();
  dres_out.poison();
  dmu.poison();
  drs.poison();
  DeviceArray& res_out = c.in_place ? dres : dres_out;

  TensorHandle tx(dx, {c.rows, c.hidden});
  TensorHandle tres(dres, {c.rows, c.hidden});
  TensorHandle tres_out(res_out, {c.rows, c.hidden});
  TensorHandle tgamma(dgamma, {c.hidden});
  TensorHandle tbeta(dbeta, {c.hidden});
  TensorHandle tz(dz, {c.rows, c.hidden});
  TensorHandle tmu(dmu, {c.rows});
  TensorHandle trs(drs, {c.rows});

  call_with_workspace([&](NVTETensor ws) {
    if (c.fused_add) {
      normtune_rmsnorm_add_fwd(tx, tres, tgamma, c.epsilon, tz, tres_out, trs, ws,
                               c.multiprocessor_count, c.zero_centered_gamma, nullptr);
    } else if (ln) {
      nvte_layernorm_fwd(tx, tgamma, tbeta, c.epsilon, tz, tmu, trs, ws, c.multiprocessor_count,
                         c.zero_centered_gamma, nullptr);
    } else {
      nvte_rmsnorm_fwd(tx, tgamma, c.epsilon, tz, trs, ws, c.multiprocessor_count,
                       c.zero_centered_gamma, nullptr);
    }
  });
  NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());

  FwdResult r;
  r.kernel = last_kernel();
  r.z = dz.to_host();
  r.rsigma = drs.to_host();
  if (ln) r.mu = dmu.to_host();
  if (c.fused_add) r.residual_out = res_out.to_host();

  if (check) {
    const std::vector<double> xv = x.values(), rv = residual.values(), gv = gamma.values(),
                              bv = beta.values();
    reference::FwdInputs in;
    in.norm = c.norm;
    in.rows = static_cast<int64_t>(c.rows);
    in.hidden = static_cast<int64_t>(c.hidden);
    in.x = xv.data();
    in.residual = c.fused_add ? rv.data() : nullptr;
    in.gamma = gv.data();
    in.beta = bv.data();
    in.epsilon = c.epsilon;
    in.zero_centered_gamma = c.zero_centered_gamma;
    in.itype = c.itype;
    const reference::FwdOutputs want = reference::norm_fwd(in);
    const std::string what = c.describe() + " kernel " + r.kernel.name;
    EXPECT_TRUE(close_to_reference(r.z, want.z, output_tolerance(c.otype), what + " z"));
    EXPECT_TRUE(close_to_reference(r.rsigma, want.rsigma, stat_tolerance(), what + " rsigma"));
    if (ln) {
      EXPECT_TRUE(close_to_reference(r.mu, want.mu, stat_tolerance(), what + " mu"));
    }
    if (c.fused_add) {
      // residual_out is x + residual in fp32 rounded to x's type: exact.
      EXPECT_TRUE(close_to_reference(r.residual_out, want.residual_out, {0, 0}, what + " residual_out"));
    }
  }
  return r;
}

}  // namespace normtune::test
