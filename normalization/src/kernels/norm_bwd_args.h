// The arguments of a backward call, as the C API hands them to a launcher (through the
// registry's opaque pointer) and the launcher to the kernels. Host-visible, no GPU code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace normtune {

struct BwdParams {
  const void* dz = nullptr;
  const void* x = nullptr;
  const void* add = nullptr;     // bwd_add only: dx = norm backward + add
  const float* mu = nullptr;     // LayerNorm only
  const float* rsigma = nullptr;
  const void* gamma = nullptr;
  void* dx = nullptr;
  void* dgamma = nullptr;
  void* dbeta = nullptr;         // LayerNorm only
  int64_t rows = 0;
  int hidden = 0;
  bool zero_centered_gamma = false;
  // Workspace, laid out by the launcher (see norm_bwd_launch.cuh).
  float* partials = nullptr;     // [K][programs][row_stride] fp32: dgamma, then dbeta (LN)
  float* row_terms = nullptr;    // long rows: [rows][2] the row means of dz*g*y and dz*g
  int programs = 0;              // partial rows to reduce
  int row_stride = 0;            // floats per partial row (hidden rounded up to 4)
  int threads_per_row = 0;       // G of the register-resident kernel
  int64_t rows_per_program = 0;  // long rows: rows each column-tile CTA walks
  int ctas_per_row = 1;          // pipelined layout: CTAs sharing a row (a cluster when > 1)
  int stages = 2;                // pipelined layout: rows in flight per CTA (2..kMaxPipelineStages)
  int partial_cluster = 1;       // pipelined layout, one CTA per row: CTAs (a cluster when > 1) whose
                                 // partials are summed on chip into one partial row
  bool direct_grads = false;     // RMSNorm, one program (register or pipelined layout): it writes
                                 // dgamma in gamma's type itself, and no finalize kernel runs
  bool finalize_starts_next = false;  // the finalize lets the stream's next kernel start early
                                      // (programmatic dependent launch; LayerNorm)
};

struct BwdArgs {
  BwdParams params;
  void* workspace = nullptr;     // the caller's workspace (16-byte aligned), may be null for the query
  int sm_bound = 0;              // multiprocessorCount: bounds the persistent grid
  bool clusters = false;         // the device can launch thread-block clusters
  size_t smem_per_cta = 0;       // the device's opt-in shared memory per CTA (0: no limit)
  // The cuDNN backend: TE's zero-centered-gamma-in-weight-dtype switch, read once per call, so
  // that the workspace answer and the run see the same plan.
  bool cudnn_gamma_in_wtype = false;
};

}  // namespace normtune
