// The arguments of a forward call, as the C API hands them to a launcher (through the
// registry's opaque pointer) and the launcher to the kernel. Host-visible, no GPU code.
#pragma once

#include <cstdint>

namespace normtune {

struct FwdParams {
  const void* x = nullptr;
  const void* residual = nullptr;  // fused add only
  const void* gamma = nullptr;
  const void* beta = nullptr;      // LayerNorm only
  void* z = nullptr;
  void* residual_out = nullptr;    // fused add only
  float* mu = nullptr;             // LayerNorm only
  float* rsigma = nullptr;
  // Per-tensor FP8 z: z = fp8(value * *scale); *amax = max(*amax, max |value|) (atomically,
  // so the caller zeroes it); *scale_inv = 1 / *scale. A high-precision z: amax only, of the
  // values as rounded to z's type. amax and scale_inv may be null.
  const float* scale = nullptr;
  float* amax = nullptr;
  float* scale_inv = nullptr;
  // Block-scaled z (kernels/block_scale.h): the row-wise scales (E8M0 or E4M3 bytes; fp32
  // for 1x128 FP8 blocks), compact or GEMM-swizzled; NVFP4: the global amax (read; null: an
  // encode scale of 1). With column-wise data, that data and its scales too: MXFP8 [rows,
  // hidden] with 32x1 blocks; NVFP4 the transpose [hidden, rows] with 16x1 blocks, encoded with
  // the column-wise global amax (the row-wise one when z has none of its own).
  uint8_t* block_scales = nullptr;
  const float* global_amax = nullptr;
  bool swizzled_scales = false;
  void* z_colwise = nullptr;
  uint8_t* colwise_block_scales = nullptr;
  const float* colwise_global_amax = nullptr;
  int64_t rows = 0;
  int hidden = 0;
  float epsilon = 0.f;
  bool zero_centered_gamma = false;
  // Geometry, chosen by the launcher.
  int threads_per_row = 0;  // G
  int ctas_per_row = 1;     // C
  int vecs_per_thread = 0;  // staged layout: vectors of the CTA's slice per thread (MXFP8
                            // column-wise tile on chip: vectors of the CTA's slice per row)
  bool stage_weights = false;  // staged layout: gamma (and beta) copied to shared memory with x
  int stages = 2;              // pipelined layout: rows in flight per CTA (2..kMaxPipelineStages)
  // Pipelined layout, one CTA per row: the counter (zeroed by the launcher, in the caller's
  // workspace) from which the CTAs take their rows after the first `stages` each; null (and
  // always on clusters): every CTA or cluster walks a fixed sequence of rows
  // (norm_fwd_pipelined.cuh).
  unsigned* row_counter = nullptr;
  int tiles_per_cta = 1;       // column-wise tile on chip, one CTA per row: tiles of 32 rows per CTA
};

struct FwdArgs {
  FwdParams params;
  int sm_bound = 0;       // multiprocessorCount: bounds the persistent grid
  bool clusters = false;  // the device can launch thread-block clusters
  void* workspace = nullptr;  // the caller's workspace (the native kernels need none; cuDNN may)
  // The cuDNN backend: TE's zero-centered-gamma-in-weight-dtype switch, read once per call, so
  // that the workspace answer and the run see the same plan.
  bool cudnn_gamma_in_wtype = false;
};

}  // namespace normtune
