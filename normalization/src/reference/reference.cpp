#include <normtune/reference.h>

#include <cmath>

#include <normtune/common/convert.h>
#include <normtune/common/error.h>

namespace normtune::reference {

double round_to(DType t, double v) {
  const float f = static_cast<float>(v);  // exact when v holds a value of a narrower type
  switch (t) {
    case DType::kFloat32: return f;
    case DType::kFloat16: return fp16_to_float(float_to_fp16(f));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(f));
    default: break;
  }
  NORMTUNE_ERROR("reference::round_to: expected fp32, fp16 or bf16, got ", dtype_name(t));
}

FwdOutputs norm_fwd(const FwdInputs& in) {
  const int64_t rows = in.rows;
  const int64_t hidden = in.hidden;
  const bool rms = in.norm == NormType::kRMSNorm;
  FwdOutputs out;
  out.z.resize(static_cast<size_t>(rows * hidden));
  out.rsigma.resize(static_cast<size_t>(rows));
  if (!rms) out.mu.resize(static_cast<size_t>(rows));
  if (in.residual != nullptr) out.residual_out.resize(static_cast<size_t>(rows * hidden));

  std::vector<double> v(static_cast<size_t>(hidden));
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = in.x + r * hidden;
    for (int64_t h = 0; h < hidden; ++h) {
      if (in.residual != nullptr) {
        const float sum = static_cast<float>(x[h]) + static_cast<float>(in.residual[r * hidden + h]);
        v[h] = round_to(in.itype, sum);
        out.residual_out[r * hidden + h] = v[h];
      } else {
        v[h] = x[h];
      }
    }
    double mean = 0;
    if (!rms) {
      for (int64_t h = 0; h < hidden; ++h) mean += v[h];
      mean /= static_cast<double>(hidden);
    }
    double sq = 0;
    for (int64_t h = 0; h < hidden; ++h) sq += (v[h] - mean) * (v[h] - mean);
    const double rsigma = 1.0 / std::sqrt(sq / static_cast<double>(hidden) + in.epsilon);
    out.rsigma[r] = rsigma;
    if (!rms) out.mu[r] = mean;
    for (int64_t h = 0; h < hidden; ++h) {
      const double g = in.gamma[h] + (in.zero_centered_gamma ? 1.0 : 0.0);
      double y = (v[h] - mean) * rsigma * g;
      if (!rms) y += in.beta[h];
      out.z[r * hidden + h] = y;
    }
  }
  return out;
}

BwdOutputs norm_bwd(const BwdInputs& in) {
  const int64_t rows = in.rows;
  const int64_t hidden = in.hidden;
  const bool rms = in.norm == NormType::kRMSNorm;
  const auto n = static_cast<size_t>(rows * hidden);
  const auto h = static_cast<size_t>(hidden);
  BwdOutputs out;
  out.dx.resize(n);
  out.dx_scale.resize(n);
  out.dgamma.assign(h, 0.0);
  out.dgamma_scale.assign(h, 0.0);
  if (!rms) {
    out.dbeta.assign(h, 0.0);
    out.dbeta_scale.assign(h, 0.0);
  }
  std::vector<double> y(h), dy(h);
  for (int64_t r = 0; r < rows; ++r) {
    const double mu = rms ? 0.0 : in.mu[r];
    const double rs = in.rsigma[r];
    double c1 = 0, c2 = 0;
    for (int64_t k = 0; k < hidden; ++k) {
      const double dz = in.dz[r * hidden + k];
      y[k] = (in.x[r * hidden + k] - mu) * rs;
      dy[k] = dz * (in.gamma[k] + (in.zero_centered_gamma ? 1.0 : 0.0));
      c1 += dy[k] * y[k];
      c2 += dy[k];
      out.dgamma[k] += dz * y[k];
      out.dgamma_scale[k] += std::fabs(dz * y[k]);
      if (!rms) {
        out.dbeta[k] += dz;
        out.dbeta_scale[k] += std::fabs(dz);
      }
    }
    c1 /= static_cast<double>(hidden);
    c2 = rms ? 0.0 : c2 / static_cast<double>(hidden);
    for (int64_t k = 0; k < hidden; ++k) {
      const int64_t i = r * hidden + k;
      const double a = in.add != nullptr ? in.add[i] : 0.0;
      out.dx[i] = rs * (dy[k] - c2 - y[k] * c1) + a;
      out.dx_scale[i] = rs * (std::fabs(dy[k]) + std::fabs(c2) + std::fabs(y[k] * c1)) + std::fabs(a);
    }
  }
  return out;
}

}  // namespace normtune::reference
