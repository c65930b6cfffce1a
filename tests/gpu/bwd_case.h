// One backward call on the GPU against the fp64 reference: inputs (with the forward's
// statistics from the fp64 reference, stored in fp32), NaN-poisoned outputs and workspace,
// the nvte_* call through the two-call workspace protocol, the comparison.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <normtune/reference.h>

#include "gpu_test_util.h"

namespace normtune::test {

struct BwdCase {
  NormType norm = NormType::kRMSNorm;
  bool add = false;       // nvte_rmsnorm_bwd_add
  bool in_place = false;  // dx is dz
  bool in_place_of_add = false;  // dx is add (with `add`)
  DType wtype = DType::kBFloat16;
  DType itype = DType::kBFloat16;
  size_t rows = 7;
  size_t hidden = 4096;
  bool zero_centered_gamma = false;
  bool gamma_in_wtype = false;  // zero-centered gamma + 1 rounded to gamma's dtype (cuDNN)
  size_t x_offset = 0;  // bytes past an aligned allocation: x, dz, dx, add
  size_t gamma_offset = 0;
  uint32_t seed = 1;
  int multiprocessor_count = 0;
  Specials x_specials;  // NaN/Inf put into x (the statistics follow from it)
  uint8_t poison = 0xFF;  // the outputs' poison byte (0xFF: NaN; untouched() expects it)

  std::string describe() const {
    return detail::concat(norm == NormType::kRMSNorm ? "RMSNorm" : "LayerNorm", add ? "+add" : "",
                          x_specials.empty() ? "" : " (NaN/Inf in x)", " bwd ", rows, "x", hidden,
                          " w=", dtype_name(wtype), " i=", dtype_name(itype),
                          zero_centered_gamma ? " zero_centered" : "",
                          gamma_in_wtype ? " (gamma+1 in wtype)" : "", in_place ? " in_place" : "",
                          in_place_of_add ? " in_place(add)" : "", " offsets=", x_offset, "/",
                          gamma_offset, " sms=", multiprocessor_count);
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

// dx, dgamma (and, for LayerNorm, dbeta) of one backward call against the fp64 reference of
// `in`, with the tolerances above (dx by x's type, the gradients by gamma's).
inline void expect_bwd_matches_reference(const reference::BwdInputs& in, DType itype, DType wtype,
                                         const HostArray& dx, const HostArray& dgamma, const HostArray& dbeta,
                                         const std::string& what) {
  const reference::BwdOutputs want = reference::norm_bwd(in);
  EXPECT_TRUE(close_to_reference(dx, want.dx, {output_tolerance(itype).rtol, 1e-6}, what + " dx", &want.dx_scale,
                                 kFp32TermError));
  EXPECT_TRUE(close_to_reference(dgamma, want.dgamma, {output_tolerance(wtype).rtol, 1e-6}, what + " dgamma",
                                 &want.dgamma_scale, kFp32TermError));
  if (in.norm == NormType::kLayerNorm) {
    EXPECT_TRUE(close_to_reference(dbeta, want.dbeta, {output_tolerance(wtype).rtol, 1e-6}, what + " dbeta",
                                   &want.dbeta_scale, kFp32TermError));
  }
}

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

// The buffers and handles of one case: random inputs, the forward's statistics, NaN-poisoned
// outputs, the nvte_* call with any workspace (either call of the two-call protocol), the
// comparison.
class BwdProblem {
 public:
  explicit BwdProblem(const BwdCase& c)
      : c_(c),
        n_(c.rows * c.hidden),
        ln_(c.norm == NormType::kLayerNorm),
        x_(with_specials(random_array(c.itype, n_, c.seed, ln_ ? 0.5 : 0.0, 1.0), c.x_specials)),
        dz_(random_array(c.itype, n_, c.seed + 1, 0.0, 1.0)),
        add_(random_array(c.itype, n_, c.seed + 2, 0.0, 1.0)),
        gamma_(random_array(c.wtype, c.hidden, c.seed + 3, c.zero_centered_gamma ? 0.0 : 1.0, 0.2)),
        stats_(stats_of(c, x_)),
        d_x_(DeviceArray::from_host(x_, c.x_offset)),
        d_dz_(DeviceArray::from_host(dz_, c.x_offset)),
        d_add_(DeviceArray::from_host(add_, c.x_offset)),
        d_gamma_(DeviceArray::from_host(gamma_, c.gamma_offset)),
        d_mu_(DeviceArray::from_host(float_array(stats_.mu))),
        d_rs_(DeviceArray::from_host(float_array(stats_.rsigma))),
        d_dx_(c.itype, n_, c.x_offset),
        d_dgamma_(c.wtype, c.hidden, c.gamma_offset),
        d_dbeta_(c.wtype, c.hidden, c.gamma_offset),
        t_x_(d_x_, {c.rows, c.hidden}),
        t_dz_(d_dz_, {c.rows, c.hidden}),
        t_add_(d_add_, {c.rows, c.hidden}),
        t_gamma_(d_gamma_, {c.hidden}),
        t_mu_(d_mu_, {c.rows}),
        t_rs_(d_rs_, {c.rows}),
        t_dx_(dx_out(), {c.rows, c.hidden}),
        t_dgamma_(d_dgamma_, {c.hidden}),
        t_dbeta_(d_dbeta_, {c.hidden}) {
    d_dx_.poison(c.poison);
    d_dgamma_.poison(c.poison);
    d_dbeta_.poison(c.poison);
  }
  BwdProblem(const BwdProblem&) = delete;
  BwdProblem& operator=(const BwdProblem&) = delete;

  const BwdCase& params() const { return c_; }

  // The entry point of the case, with `workspace` (a size query or a real call).
  void call(NVTETensor workspace, cudaStream_t stream = nullptr) const {
    if (c_.add) {
      nvte_rmsnorm_bwd_add(t_dz_, t_x_, t_add_, t_rs_, t_gamma_, t_dx_, t_dgamma_, workspace, c_.multiprocessor_count,
                           c_.zero_centered_gamma, stream);
    } else if (ln_) {
      nvte_layernorm_bwd(t_dz_, t_x_, t_mu_, t_rs_, t_gamma_, t_dx_, t_dgamma_, t_dbeta_, workspace,
                         c_.multiprocessor_count, c_.zero_centered_gamma, stream);
    } else {
      nvte_rmsnorm_bwd(t_dz_, t_x_, t_rs_, t_gamma_, t_dx_, t_dgamma_, workspace, c_.multiprocessor_count,
                       c_.zero_centered_gamma, stream);
    }
  }

  // The outputs now (after the device is idle) and the last kernel this thread ran.
  BwdResult outputs() const {
    NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
    BwdResult r;
    r.kernel = last_kernel();
    r.dx = dx_out().to_host();
    r.dgamma = d_dgamma_.to_host();
    if (ln_) r.dbeta = d_dbeta_.to_host();
    return r;
  }

  // Whether nothing was written: dgamma, dbeta and a separate dx are still NaN; an in-place
  // dx (dz itself) still holds dz.
  ::testing::AssertionResult untouched() const {
    NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
    const std::string what = c_.describe();
    for (const DeviceArray* out : {&d_dx_, &d_dgamma_, &d_dbeta_}) {
      const HostArray h = out->to_host();
      for (size_t i = 0; i < h.count; ++i) {
        if (!std::isnan(h.get(i))) {
          return ::testing::AssertionFailure() << what << ": an output was written (element " << i << " = " << h.get(i) << ")";
        }
      }
    }
    if (c_.in_place) {
      ::testing::AssertionResult same = same_bits(d_dz_.to_host(), dz_, what + " dz (in place)");
      if (!same) return same;
    }
    if (c_.in_place_of_add) {
      ::testing::AssertionResult same = same_bits(d_add_.to_host(), add_, what + " add (in place)");
      if (!same) return same;
    }
    return ::testing::AssertionSuccess();
  }

  // dx, dgamma (and dbeta) against the fp64 reference.
  void check(const BwdResult& r) const {
    const bool rounded = c_.zero_centered_gamma && c_.gamma_in_wtype;  // (then a plain gamma)
    const std::vector<double> xv = x_.values(), dzv = dz_.values(), av = add_.values();
    const std::vector<double> gv =
        rounded ? gamma_plus_one_in_wtype(gamma_).values() : gamma_.values();
    reference::BwdInputs in;
    in.norm = c_.norm;
    in.rows = static_cast<int64_t>(c_.rows);
    in.hidden = static_cast<int64_t>(c_.hidden);
    in.dz = dzv.data();
    in.x = xv.data();
    in.add = c_.add ? av.data() : nullptr;
    in.mu = stats_.mu.data();
    in.rsigma = stats_.rsigma.data();
    in.gamma = gv.data();
    in.zero_centered_gamma = c_.zero_centered_gamma && !rounded;
    expect_bwd_matches_reference(in, c_.itype, c_.wtype, r.dx, r.dgamma, r.dbeta,
                                 c_.describe() + " kernel " + r.kernel.name);
  }

 private:
  struct Stats {
    std::vector<double> mu, rsigma;
  };
  static Stats stats_of(const BwdCase& c, const HostArray& x) {
    Stats s;
    reference_stats(c.norm, x, c.rows, c.hidden, &s.mu, &s.rsigma);
    return s;
  }
  const DeviceArray& dx_out() const {
    return c_.in_place ? d_dz_ : c_.in_place_of_add ? d_add_ : d_dx_;
  }

  const BwdCase c_;
  const size_t n_;
  const bool ln_;
  const HostArray x_, dz_, add_, gamma_;
  const Stats stats_;
  DeviceArray d_x_, d_dz_, d_add_, d_gamma_, d_mu_, d_rs_, d_dx_, d_dgamma_, d_dbeta_;
  TensorHandle t_x_, t_dz_, t_add_, t_gamma_, t_mu_, t_rs_, t_dx_, t_dgamma_, t_dbeta_;
};

// Runs the case through the two-call protocol, with the workspace NaN-poisoned (every partial
// must be written before it is read); checks dx, dgamma (and dbeta) against the reference
// when `check` is set.
inline BwdResult run_bwd(const BwdCase& c, bool check = true) {
  const BwdProblem p(c);
  TensorHandle query;
  p.call(query.get());
  const NVTEShape shape = nvte_tensor_shape(query);
  EXPECT_EQ(shape.ndim, 1u);
  EXPECT_EQ(nvte_tensor_type(query), kNVTEByte);
  const size_t bytes = shape.ndim == 1 ? shape.data[0] : 0;
  EXPECT_GE(bytes, 1u) << "every size the query answers is at least one byte";
  // As TransformerEngine's binding does: a new tensor of exactly the answered shape and dtype.
  DeviceBuffer mem(bytes);
  if (bytes > 0) NORMTUNE_CUDA_CHECK(cudaMemset(mem.get(), 0xFF, bytes));
  TensorHandle ws(mem.get(), {bytes}, static_cast<DType>(nvte_tensor_type(query)));
  p.call(ws.get());
  BwdResult r = p.outputs();
  r.workspace_bytes = bytes;
  if (check) p.check(r);
  return r;
}

}  // namespace normtune::test
