// The fp64 CPU reference of every normalization normtune computes: one implementation,
// used by the tests, `normtune bench --verify` and the autotuner.
//
// Inputs are given as doubles holding the exact values of the stored elements; outputs are
// exact (fp64) results, before rounding to the output type.
#pragma once

#include <cstdint>
#include <vector>

#include <normtune/common/dtype.h>
#include <normtune/registry/norm_key.h>

namespace normtune::reference {

struct FwdInputs {
  NormType norm = NormType::kRMSNorm;
  int64_t rows = 0;
  int64_t hidden = 0;
  const double* x = nullptr;         // [rows, hidden]
  const double* residual = nullptr;  // [rows, hidden] or nullptr (no fused add)
  const double* gamma = nullptr;     // [hidden]
  const double* beta = nullptr;      // [hidden], LayerNorm only
  double epsilon = 0;
  bool zero_centered_gamma = false;
  DType itype = DType::kFloat32;     // residual_out is x + residual rounded to itype
};

struct FwdOutputs {
  std::vector<double> z;             // [rows, hidden]
  std::vector<double> residual_out;  // [rows, hidden], fused add only
  std::vector<double> mu;            // [rows], LayerNorm only
  std::vector<double> rsigma;        // [rows]
};

// RMSNorm:   rsigma = 1/sqrt(mean(v^2) + eps),  z = v * rsigma * g
// LayerNorm: mu = mean(v), rsigma = 1/sqrt(mean((v - mu)^2) + eps), z = (v - mu) * rsigma * g + beta
// v = x, or with a residual v = round_itype(float(x) + float(residual)) (the fp32 add the
// kernels do, rounded to x's type); g = gamma (+ 1 with zero-centered gamma).
FwdOutputs norm_fwd(const FwdInputs& in);

struct BwdInputs {
  NormType norm = NormType::kRMSNorm;
  int64_t rows = 0;
  int64_t hidden = 0;
  const double* dz = nullptr;      // [rows, hidden]
  const double* x = nullptr;       // [rows, hidden]
  const double* add = nullptr;     // [rows, hidden] or nullptr (no added gradient)
  const double* mu = nullptr;      // [rows], LayerNorm only (the forward's fp32 values)
  const double* rsigma = nullptr;  // [rows]
  const double* gamma = nullptr;   // [hidden]
  bool zero_centered_gamma = false;
};

struct BwdOutputs {
  std::vector<double> dx;          // [rows, hidden]
  std::vector<double> dgamma;      // [hidden]
  std::vector<double> dbeta;       // [hidden], LayerNorm only
  // Error scales for fp32 arithmetic: per element of dx, rsigma * (|dy| + |mean(dy)| +
  // |y * mean(dy * y)|) (+ |add|); per column, the sums of |dz * y| and |dz|.
  std::vector<double> dx_scale, dgamma_scale, dbeta_scale;
};

// y = (x - mu) * rsigma (RMSNorm: mu = 0), g = gamma (+ 1), dy = dz * g:
//   dx = rsigma * (dy - mean(dy) - y * mean(dy * y)) + add   (RMSNorm: no mean(dy) term)
//   dgamma = sum over rows of dz * y,  dbeta = sum over rows of dz
BwdOutputs norm_bwd(const BwdInputs& in);

// Values representable in `t` (fp32, fp16, bf16) rounded to nearest even.
double round_to(DType t, double v);

}  // namespace normtune::reference
