// Measuring on the GPU, shared by `normtune bench` and `normtune tune`: device memory,
// NVTETensor handles, random inputs, CUDA-event timing with the L2 flushed, verification
// against the fp64 reference.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <normtune/common/dtype.h>
#include <normtune/common/platform.h>
#include <normtune/registry/op.h>
#include <normtune/transformer_engine.h>

namespace normtune::bench {

struct DeviceMem {
  void* ptr = nullptr;
  explicit DeviceMem(size_t bytes);
  ~DeviceMem();
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
};

struct Handle {
  NVTETensor h;
  Handle(void* p, std::vector<size_t> shape, DType t);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator NVTETensor() const { return h; }
};

// A call's workspace by TransformerEngine's two-call protocol: the call is made once with a
// default (empty) workspace tensor, which only sets the size, then the workspace is
// allocated with exactly that shape (outside any timed region).
using CallWithWorkspace = std::function<void(NVTETensor workspace, cudaStream_t stream)>;
class Workspace {
 public:
  Workspace(const CallWithWorkspace& call, cudaStream_t stream);
  size_t bytes() const { return bytes_; }
  operator NVTETensor() const { return *handle_; }

 private:
  size_t bytes_ = 0;
  std::unique_ptr<DeviceMem> mem_;
  std::unique_ptr<Handle> handle_;
};

// What a forward call writes as z: x's dtype, per-tensor-scaled FP8 e4m3 (scale kFp8Scale;
// amax and scale_inv written too), MXFP8 e4m3 row-wise with compact E8M0 scales, MXFP8 e4m3
// row-wise and column-wise (32x1 blocks), both with compact scales; NVFP4 (global amax
// kNvfp4GlobalAmax), MXFP4 and 1x128-block FP8 e4m3, row-wise with compact scales.
enum class ZFormat { kSame, kFp8, kMxfp8, kMxfp8Colwise, kNvfp4, kNvfp4Colwise, kMxfp4, kFp8Block };
inline constexpr float kFp8Scale = 8.f;
inline constexpr float kNvfp4GlobalAmax = 16.f;
// "same", "fp8", "mxfp8", "mxfp8c", "nvfp4", "nvfp4c", "mxfp4", "fp8b128"
bool z_format_from_name(std::string_view name, ZFormat* out);
inline bool is_mxfp8(ZFormat f) { return f == ZFormat::kMxfp8 || f == ZFormat::kMxfp8Colwise; }
// Whether z has column-wise data too (mxfp8c: [rows, hidden]; nvfp4c: the transpose).
inline bool has_colwise(ZFormat f) { return f == ZFormat::kMxfp8Colwise || f == ZFormat::kNvfp4Colwise; }
// z's block scaling (kNone for same and fp8).
ScalingMode block_scaling_of(ZFormat f);
const char* z_format_name(ZFormat f);

// z of a [rows, hidden] forward call in a ZFormat: its device buffers and its NVTETensor
// (nvfp4c: with the column-wise transpose too; its global amax the row-wise one).
class ZOutput {
 public:
  ZOutput(ZFormat format, DType input, size_t rows, size_t hidden);
  ~ZOutput();
  ZOutput(const ZOutput&) = delete;
  ZOutput& operator=(const ZOutput&) = delete;
  operator NVTETensor() const { return handle_; }
  ZFormat format() const { return format_; }
  DType dtype() const { return dtype_; }
  void* data() const { return data_.ptr; }
  void* block_scales() const { return block_scales_ ? block_scales_->ptr : nullptr; }  // block-scaled
  const float* global_amax() const { return amax_ ? static_cast<const float*>(amax_->ptr) : nullptr; }  // NVFP4
  size_t scale_cols() const { return scale_cols_; }
  void* colwise_data() const { return colwise_data_ ? colwise_data_->ptr : nullptr; }  // column-wise data
  // Bytes of the data the call writes (with column-wise data: both copies).
  size_t data_bytes() const;
  // Bytes the call writes besides the data (one scale per block).
  size_t scale_bytes() const;
  // Every output byte set to 0xFF (NaN in every format) and amax to 0 (the caller zeroes
  // TransformerEngine's running max), on the stream.
  void poison(cudaStream_t stream) const;
  // Row r, dequantized (code x scale_inv, or x its block's scale), and the tolerance of each
  // of its elements against the fp64 value `want`: the format's rounding (one code either
  // side: an fp32 value next to a rounding midpoint) plus fp32 error.
  // (Block-scaled z: from the scales load_scales() copied last.)
  std::vector<double> row(size_t r) const;
  // Copies the whole row-wise scale tensor to the host (once per call to verify: row() reads it).
  void load_scales() const;
  double tolerance(double want, size_t col) const;  // of the row row() read last
  // MXFP8: the E8M0 scale of the block holding column col of the row row() read last.
  uint8_t block_exponent(size_t col) const;
  // With column-wise data: row r of the column-wise output, each element dequantized with
  // its column's scale for r's 32-row (MXFP8) or 16-row (NVFP4, from the transpose) block
  // (those scales, as multipliers of a code, into *scales). NVFP4: from the copy load_scales()
  // made of the whole column-wise output.
  std::vector<double> colwise_row(size_t r, std::vector<double>* scales) const;
  // Per-tensor FP8: the amax and scale_inv the call wrote.
  float amax() const;
  float scale_inv() const;

 private:
  ZFormat format_;
  DType dtype_;
  size_t rows_, hidden_, scale_rows_ = 0, scale_cols_ = 0;
  DeviceMem data_;
  std::unique_ptr<DeviceMem> scale_, amax_, scale_inv_, block_scales_, colwise_data_, colwise_scales_;
  size_t colwise_scale_rows_ = 0, colwise_scale_cols_ = 0;
  mutable std::vector<uint8_t> host_scales_;
  mutable std::vector<double> host_units_;  // row() of a block-scaled z: each block's decode scale
  mutable std::vector<uint8_t> host_all_scales_;  // load_scales()
  mutable std::vector<uint8_t> host_colwise_, host_colwise_scales_;  // load_scales(), nvfp4c
  NVTETensor handle_;
};

struct Timing {
  double median_us = 0, p10_us = 0, p90_us = 0;
};

class Timer {
 public:
  explicit Timer(size_t l2_bytes);
  ~Timer();
  cudaStream_t stream() const { return stream_; }
  // Median over reps of fn's time on the stream, with the L2 flushed (by writing a buffer
  // twice its size) before each repetition.
  Timing time(const std::function<void(cudaStream_t)>& fn, int warmup, int reps);
  // Per-call time of `calls` back-to-back calls captured in one CUDA graph (launch gaps
  // removed), median over reps of graph launches. Inputs stay in L2: this is latency.
  Timing time_graph(const std::function<void(cudaStream_t)>& fn, int calls, int reps);
  // Host time per call: the CPU's wall time to issue `calls` back-to-back calls (no waiting
  // in between; the stream drained before each batch), median over reps batches. What a
  // framework's eager loop pays per call on the CPU (argument checks, kernel selection,
  // plan lookup, launch); meaningful where the GPU keeps up (small calls).
  Timing time_host(const std::function<void(cudaStream_t)>& fn, int calls, int reps);

 private:
  size_t flush_bytes_;
  DeviceMem flush_;
  cudaStream_t stream_{};
  cudaEvent_t start_{}, stop_{};
};

// Normal random values (mean, stddev) rounded to t; a 1M-element window repeated.
void fill_random(void* dev, DType t, size_t n, uint32_t seed, double mean, double stddev);

// Compares z and rsigma of a forward call with the fp64 reference: every row when
// rows x hidden <= 16M, else 64 sampled rows. Returns "ok (N rows)"; throws on a mismatch.
std::string verify(const OpInfo& op, DType t, size_t rows, size_t hidden, const void* x,
                   const void* residual, const void* gamma, const void* beta, const ZOutput& z,
                   const void* rsigma, float eps);

// Compares dx of a backward call with the fp64 reference (every row when rows x hidden <=
// 16M, then dgamma/dbeta too; else dx of 64 sampled rows). "ok (...)"; throws on a mismatch.
std::string verify_bwd(const OpInfo& op, DType t, size_t rows, size_t hidden, const void* dz,
                       const void* x, const void* add, const void* mu, const void* rsigma,
                       const void* gamma, const void* dx, const void* dgamma, const void* dbeta);

// For one measurement: TransformerEngine's switches set to the backend asked for ("native":
// nvte_enable_cudnn_norm_fwd/bwd(false); "cudnn": true; "auto": left as they are), and back
// to "never called" (the variables decide) after.
class BackendScope {
 public:
  explicit BackendScope(const std::string& backend);
  ~BackendScope();
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  bool set_;
};

// Bandwidth of a 2 GiB device-to-device copy (read + write bytes), TB/s.
double copy_peak_tbps(Timer& timer, int reps);

}  // namespace normtune::bench
