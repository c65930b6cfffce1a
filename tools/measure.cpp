#include "measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include <normtune/common/convert.h>
#include <normtune/common/error.h>
#include <normtune/normalization.h>
#include <normtune/reference.h>

#include "normalization/src/cudnn/backend_choice.h"
#include "normalization/src/kernels/block_scale.h"

namespace normtune::bench {

DeviceMem::DeviceMem(size_t bytes) { NORMTUNE_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(bytes, 16))); }
DeviceMem::~DeviceMem() { (void)cudaFree(ptr); }

Handle::Handle(void* p, std::vector<size_t> shape, DType t) : h(nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING)) {
  NVTEBasicTensor b{p, static_cast<NVTEDType>(t), nvte_make_shape(shape.data(), shape.size())};
  nvte_set_tensor_param_v2(h, kNVTERowwiseData, &b, sizeof(b));
}
Handle::~Handle() { nvte_destroy_tensor(h); }

Workspace::Workspace(const CallWithWorkspace& call, cudaStream_t stream) {
  Handle query(nullptr, {0}, DType::kByte);
  call(query, stream);
  const NVTEShape shape = nvte_tensor_shape(query);
  NORMTUNE_CHECK(shape.ndim == 1 && shape.data[0] >= 1, "the workspace query did not answer a size");
  bytes_ = shape.data[0];
  mem_ = std::make_unique<DeviceMem>(bytes_);
  handle_ = std::make_unique<Handle>(mem_->ptr, std::vector<size_t>{bytes_}, DType::kByte);
}

bool z_format_from_name(std::string_view name, ZFormat* out) {
  for (const ZFormat f : {ZFormat::kSame, ZFormat::kFp8, ZFormat::kMxfp8, ZFormat::kMxfp8Colwise, ZFormat::kNvfp4,
                          ZFormat::kNvfp4Colwise, ZFormat::kMxfp4, ZFormat::kFp8Block}) {
    if (name == z_format_name(f)) {
      *out = f;
      return true;
    }
  }
  return false;
}

const char* z_format_name(ZFormat f) {
  switch (f) {
    case ZFormat::kSame: return "same";
    case ZFormat::kFp8: return "fp8";
    case ZFormat::kMxfp8: return "mxfp8";
    case ZFormat::kMxfp8Colwise: return "mxfp8c";
    case ZFormat::kNvfp4: return "nvfp4";
    case ZFormat::kNvfp4Colwise: return "nvfp4c";
    case ZFormat::kMxfp4: return "mxfp4";
    case ZFormat::kFp8Block: return "fp8b128";
  }
  return "?";
}

ScalingMode block_scaling_of(ZFormat f) {
  switch (f) {
    case ZFormat::kMxfp8:
    case ZFormat::kMxfp8Colwise: return ScalingMode::kMxfp8_1D;
    case ZFormat::kNvfp4:
    case ZFormat::kNvfp4Colwise: return ScalingMode::kNvfp4_1D;
    case ZFormat::kMxfp4: return ScalingMode::kMxfp4_1D;
    case ZFormat::kFp8Block: return ScalingMode::kBlock1D;
    default: return ScalingMode::kNone;
  }
}

namespace {
constexpr size_t kMxBlockSize = 32;
size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }
double rtol_of(DType t) { return t == DType::kBFloat16 ? 1.0 / 128 : t == DType::kFloat16 ? 1.0 / 1024 : 2e-5; }
std::vector<double> download(const void* dev, DType t, size_t offset, size_t n) {
  std::vector<uint8_t> raw(dtype_storage_bytes(t, n));
  NORMTUNE_CUDA_CHECK(cudaMemcpy(raw.data(), static_cast<const char*>(dev) + dtype_storage_bytes(t, offset),
                                 raw.size(), cudaMemcpyDeviceToHost));
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = dtype_to_float(t, raw.data(), i);
  return v;
}

NVTETensor z_handle(ZFormat f) {
  switch (block_scaling_of(f)) {
    case ScalingMode::kMxfp8_1D: return nvte_create_tensor(NVTE_MXFP8_1D_SCALING);
    case ScalingMode::kNvfp4_1D: return nvte_create_tensor(NVTE_NVFP4_1D_SCALING);
    case ScalingMode::kMxfp4_1D: return nvte_create_tensor(NVTE_NORMTUNE_MXFP4_1D_SCALING);
    case ScalingMode::kBlock1D: return nvte_create_tensor(NVTE_BLOCK_SCALING_1D);
    default: return nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
  }
}
DType z_dtype(ZFormat f, DType input) {
  if (f == ZFormat::kSame) return input;
  return block_codes_fp4(block_scaling_of(f)) ? DType::kFloat4E2M1 : DType::kFloat8E4M3;
}
void set_param(NVTETensor h, NVTETensorParam param, void* p, std::vector<size_t> shape, DType t) {
  const NVTEBasicTensor b{p, static_cast<NVTEDType>(t), nvte_make_shape(shape.data(), shape.size())};
  nvte_set_tensor_param_v2(h, param, &b, sizeof(b));
}
float read_float(const DeviceMem& m) {
  float v = 0;
  NORMTUNE_CUDA_CHECK(cudaMemcpy(&v, m.ptr, sizeof(v), cudaMemcpyDeviceToHost));
  return v;
}
}  // namespace

ZOutput::ZOutput(ZFormat format, DType input, size_t rows, size_t hidden)
    : format_(format),
      dtype_(z_dtype(format, input)),
      rows_(rows),
      hidden_(hidden),
      data_(dtype_storage_bytes(dtype_, rows * hidden)),
      handle_(z_handle(format)) {
  set_param(handle_, kNVTERowwiseData, data_.ptr, {rows, hidden}, dtype_);
  if (format == ZFormat::kFp8) {
    scale_ = std::make_unique<DeviceMem>(sizeof(float));
    amax_ = std::make_unique<DeviceMem>(sizeof(float));
    scale_inv_ = std::make_unique<DeviceMem>(sizeof(float));
    NORMTUNE_CUDA_CHECK(cudaMemcpy(scale_->ptr, &kFp8Scale, sizeof(float), cudaMemcpyHostToDevice));
    NORMTUNE_CUDA_CHECK(cudaMemset(amax_->ptr, 0, sizeof(float)));
    set_param(handle_, kNVTEScale, scale_->ptr, {1}, DType::kFloat32);
    set_param(handle_, kNVTEAmax, amax_->ptr, {1}, DType::kFloat32);
    set_param(handle_, kNVTERowwiseScaleInv, scale_inv_->ptr, {1}, DType::kFloat32);
  } else if (const ScalingMode mode = block_scaling_of(format); mode != ScalingMode::kNone) {
    // TransformerEngine's padded row-wise scale shape, compact layout.
    const size_t block = static_cast<size_t>(block_elements(mode));
    NORMTUNE_CHECK(hidden % block == 0, z_format_name(format), " z: hidden ", hidden, " is not a multiple of ", block);
    scale_rows_ = static_cast<size_t>(block_scale_rows(mode, static_cast<int64_t>(rows), static_cast<int64_t>(hidden)));
    scale_cols_ = static_cast<size_t>(block_scale_cols(mode, static_cast<int64_t>(rows), static_cast<int64_t>(hidden)));
    const DType sdtype = block_scale_dtype(mode);
    block_scales_ = std::make_unique<DeviceMem>(dtype_storage_bytes(sdtype, scale_rows_ * scale_cols_));
    set_param(handle_, kNVTERowwiseScaleInv, block_scales_->ptr, {scale_rows_, scale_cols_}, sdtype);
    if (mode == ScalingMode::kNvfp4_1D) {  // the global amax, read
      amax_ = std::make_unique<DeviceMem>(sizeof(float));
      NORMTUNE_CUDA_CHECK(cudaMemcpy(amax_->ptr, &kNvfp4GlobalAmax, sizeof(float), cudaMemcpyHostToDevice));
      set_param(handle_, kNVTEAmax, amax_->ptr, {1}, DType::kFloat32);
    }
    if (format == ZFormat::kMxfp8Colwise) {
      // Column-wise: data of the row-wise shape, scales [roundup(ceil(rows / 32), 4), roundup(hidden, 128)].
      colwise_scale_rows_ = round_up((rows + kMxBlockSize - 1) / kMxBlockSize, 4);
      colwise_scale_cols_ = round_up(hidden, 128);
      colwise_data_ = std::make_unique<DeviceMem>(dtype_storage_bytes(dtype_, rows * hidden));
      colwise_scales_ = std::make_unique<DeviceMem>(colwise_scale_rows_ * colwise_scale_cols_);
      set_param(handle_, kNVTEColumnwiseData, colwise_data_->ptr, {rows, hidden}, dtype_);
      set_param(handle_, kNVTEColumnwiseScaleInv, colwise_scales_->ptr, {colwise_scale_rows_, colwise_scale_cols_},
                DType::kFloat8E8M0);
    } else if (format == ZFormat::kNvfp4Colwise) {
      // Column-wise: the transpose [hidden, rows], E4M3 scales [roundup(hidden, 128),
      // roundup(rows / 16, 4)], encoded with z's global amax (no column-wise one).
      NORMTUNE_CHECK(rows % kNvfp4Block == 0, "nvfp4c z: rows ", rows, " is not a multiple of 16");
      colwise_scale_rows_ = static_cast<size_t>(nvfp4_colwise_scale_rows(static_cast<int64_t>(hidden)));
      colwise_scale_cols_ = static_cast<size_t>(nvfp4_colwise_scale_cols(static_cast<int64_t>(rows)));
      colwise_data_ = std::make_unique<DeviceMem>(dtype_storage_bytes(dtype_, rows * hidden));
      colwise_scales_ = std::make_unique<DeviceMem>(colwise_scale_rows_ * colwise_scale_cols_);
      set_param(handle_, kNVTEColumnwiseData, colwise_data_->ptr, {hidden, rows}, dtype_);
      set_param(handle_, kNVTEColumnwiseScaleInv, colwise_scales_->ptr, {colwise_scale_rows_, colwise_scale_cols_},
                DType::kFloat8E4M3);
    }
  }
}

ZOutput::~ZOutput() { nvte_destroy_tensor(handle_); }

size_t ZOutput::data_bytes() const {
  return dtype_storage_bytes(dtype_, rows_ * hidden_) * (has_colwise(format_) ? 2 : 1);
}

size_t ZOutput::scale_bytes() const {
  const ScalingMode mode = block_scaling_of(format_);
  if (mode == ScalingMode::kNone) return 0;
  const size_t rowwise = dtype_storage_bytes(block_scale_dtype(mode), rows_ * hidden_ / block_elements(mode));
  if (format_ == ZFormat::kMxfp8Colwise) return rowwise + (rows_ + kMxBlockSize - 1) / kMxBlockSize * hidden_;
  if (format_ == ZFormat::kNvfp4Colwise) return rowwise + rows_ / kNvfp4Block * hidden_;
  return rowwise;
}

void ZOutput::poison(cudaStream_t stream) const {
  NORMTUNE_CUDA_CHECK(cudaMemsetAsync(data_.ptr, 0xFF, dtype_storage_bytes(dtype_, rows_ * hidden_), stream));
  if (colwise_data_) {
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(colwise_data_->ptr, 0xFF, dtype_storage_bytes(dtype_, rows_ * hidden_), stream));
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(colwise_scales_->ptr, 0xFF, colwise_scale_rows_ * colwise_scale_cols_, stream));
  }
  if (block_scales_) {
    const size_t bytes = dtype_storage_bytes(block_scale_dtype(block_scaling_of(format_)), scale_rows_ * scale_cols_);
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(block_scales_->ptr, 0xFF, bytes, stream));
  }
  if (scale_inv_) NORMTUNE_CUDA_CHECK(cudaMemsetAsync(scale_inv_->ptr, 0xFF, sizeof(float), stream));
  if (format_ == ZFormat::kFp8) {
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(amax_->ptr, 0, sizeof(float), stream));  // a running max: zeroed
  }
}

uint8_t ZOutput::block_exponent(size_t col) const { return host_scales_.at(col / kMxBlockSize); }

float ZOutput::amax() const { return amax_ ? read_float(*amax_) : 0.f; }
float ZOutput::scale_inv() const { return scale_inv_ ? read_float(*scale_inv_) : 1.f; }

std::vector<double> ZOutput::row(size_t r) const {
  std::vector<double> v = download(data_.ptr, dtype_, r * hidden_, hidden_);
  if (format_ == ZFormat::kFp8) {
    const double inv = scale_inv();
    for (double& x : v) x *= inv;
  }
  const ScalingMode mode = block_scaling_of(format_);
  if (mode == ScalingMode::kNone) return v;
  const size_t width = dtype_storage_bytes(block_scale_dtype(mode), 1);
  NORMTUNE_CHECK(host_all_scales_.size() == width * scale_rows_ * scale_cols_, "ZOutput::row: load_scales() first");
  if (is_mxfp8(format_)) {  // (compact: row r's exponents at r * scale_cols_)
    host_scales_.assign(host_all_scales_.begin() + static_cast<std::ptrdiff_t>(r * scale_cols_),
                        host_all_scales_.begin() + static_cast<std::ptrdiff_t>((r + 1) * scale_cols_));
    for (size_t i = 0; i < hidden_; ++i) v[i] *= e8m0_to_float(host_scales_[i / kMxBlockSize]);
  } else {
    // Each block's decode scale: 2^(E - 127) (MXFP4), float(E4M3) / S_enc (NVFP4), or the
    // fp32 scale_inv of the transposed 1x128 tensor.
    const size_t block = static_cast<size_t>(block_elements(mode)), blocks = hidden_ / block;
    const float s_enc = nvfp4_encode_scale(kNvfp4GlobalAmax);
    host_units_.resize(blocks);
    for (size_t b = 0; b < blocks; ++b) {
      const auto at = static_cast<size_t>(block_scale_offset(mode, static_cast<int64_t>(r), static_cast<int64_t>(b),
                                                             static_cast<int64_t>(rows_), static_cast<int64_t>(hidden_),
                                                             false));
      uint8_t raw[4] = {};
      std::memcpy(raw, host_all_scales_.data() + at * width, width);
      switch (mode) {
        case ScalingMode::kMxfp4_1D: host_units_[b] = e8m0_to_float(raw[0]); break;
        case ScalingMode::kNvfp4_1D: host_units_[b] = fp8e4m3_to_float(raw[0]) / static_cast<double>(s_enc); break;
        default: {
          float f;
          std::memcpy(&f, raw, sizeof f);
          host_units_[b] = f;
        }
      }
    }
    for (size_t i = 0; i < hidden_; ++i) v[i] *= host_units_[i / block];
  }
  return v;
}

void ZOutput::load_scales() const {
  if (!block_scales_) return;
  host_all_scales_.resize(
      dtype_storage_bytes(block_scale_dtype(block_scaling_of(format_)), scale_rows_ * scale_cols_));
  NORMTUNE_CUDA_CHECK(cudaMemcpy(host_all_scales_.data(), block_scales_->ptr, host_all_scales_.size(),
                                 cudaMemcpyDeviceToHost));
  if (format_ == ZFormat::kNvfp4Colwise) {  // the transpose: a row of z is a column of it
    host_colwise_.resize(dtype_storage_bytes(dtype_, rows_ * hidden_));
    host_colwise_scales_.resize(colwise_scale_rows_ * colwise_scale_cols_);
    NORMTUNE_CUDA_CHECK(cudaMemcpy(host_colwise_.data(), colwise_data_->ptr, host_colwise_.size(),
                                   cudaMemcpyDeviceToHost));
    NORMTUNE_CUDA_CHECK(cudaMemcpy(host_colwise_scales_.data(), colwise_scales_->ptr, host_colwise_scales_.size(),
                                   cudaMemcpyDeviceToHost));
  }
}

std::vector<double> ZOutput::colwise_row(size_t r, std::vector<double>* scales) const {
  NORMTUNE_CHECK(colwise_data_ != nullptr, "colwise_row: z has no column-wise data");
  if (format_ == ZFormat::kNvfp4Colwise) {
    NORMTUNE_CHECK(!host_colwise_.empty(), "colwise_row: load_scales() first");
    const double s_enc = nvfp4_encode_scale(kNvfp4GlobalAmax);
    std::vector<double> v(hidden_);
    scales->resize(hidden_);
    for (size_t c = 0; c < hidden_; ++c) {
      const size_t at = static_cast<size_t>(nvfp4_colwise_scale_offset(
          static_cast<int64_t>(r / kNvfp4Block), static_cast<int64_t>(c), static_cast<int64_t>(rows_),
          static_cast<int64_t>(hidden_), false));
      (*scales)[c] = fp8e4m3_to_float(host_colwise_scales_[at]) / s_enc;
      v[c] = dtype_to_float(dtype_, host_colwise_.data(), c * rows_ + r) * (*scales)[c];
    }
    return v;
  }
  std::vector<double> v = download(colwise_data_->ptr, dtype_, r * hidden_, hidden_);
  std::vector<uint8_t> e(hidden_);
  NORMTUNE_CUDA_CHECK(cudaMemcpy(e.data(), static_cast<const uint8_t*>(colwise_scales_->ptr) +
                                               (r / kMxBlockSize) * colwise_scale_cols_,
                                 hidden_, cudaMemcpyDeviceToHost));
  scales->resize(hidden_);
  for (size_t i = 0; i < hidden_; ++i) {
    (*scales)[i] = e8m0_to_float(e[i]);
    v[i] *= (*scales)[i];
  }
  return v;
}

double ZOutput::tolerance(double want, size_t col) const {
  switch (format_) {
    case ZFormat::kSame: return rtol_of(dtype_) * std::fabs(want) + 1e-5;
    // e4m3: 3 significand bits (a code is within 1/8 of the value, one code either side of
    // the nearest), subnormal spacing 2^-9 in the scaled domain.
    case ZFormat::kFp8: return std::fabs(want) / 8 + std::ldexp(1.0, -9) / kFp8Scale + 1e-5;
    case ZFormat::kMxfp8:
    case ZFormat::kMxfp8Colwise:
      return std::fabs(want) / 8 + std::ldexp(1.0, -9) * e8m0_to_float(host_scales_[col / kMxBlockSize]) + 1e-5;
    // e2m1: codes 0.5 apart below 2, 2 apart above 4 (a code is within a quarter of the
    // value, one code either side of the nearest, the largest within 6.25% from the E4M3
    // rounding of NVFP4's scale); 0.5 x the unit near zero.
    case ZFormat::kNvfp4:
    case ZFormat::kNvfp4Colwise:
    case ZFormat::kMxfp4: {
      const double unit = host_units_[col / static_cast<size_t>(block_elements(block_scaling_of(format_)))];
      return std::fabs(want) / 3 + 0.5 * unit + 1e-5;
    }
    case ZFormat::kFp8Block: return std::fabs(want) / 8 + std::ldexp(1.0, -9) * host_units_[col / 128] + 1e-5;
  }
  return 0;
}

namespace {
Timing summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[static_cast<size_t>(q * (us.size() - 1))]; };
  return {at(0.5), at(0.1), at(0.9)};
}
}  // namespace

Timer::Timer(size_t l2_bytes)
    : flush_bytes_(std::max<size_t>(2 * l2_bytes, 64u << 20)), flush_(flush_bytes_) {
  NORMTUNE_CUDA_CHECK(cudaStreamCreate(&stream_));
  NORMTUNE_CUDA_CHECK(cudaEventCreate(&start_));
  NORMTUNE_CUDA_CHECK(cudaEventCreate(&stop_));
}

Timer::~Timer() {
  (void)cudaEventDestroy(start_);
  (void)cudaEventDestroy(stop_);
  (void)cudaStreamDestroy(stream_);
}

Timing Timer::time(const std::function<void(cudaStream_t)>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn(stream_);
  std::vector<double> us;
  us.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(flush_.ptr, i & 0xFF, flush_bytes_, stream_));
    NORMTUNE_CUDA_CHECK(cudaEventRecord(start_, stream_));
    fn(stream_);
    NORMTUNE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    NORMTUNE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    NORMTUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    us.push_back(ms * 1e3);
  }
  return summarize(us);
}

Timing Timer::time_host(const std::function<void(cudaStream_t)>& fn, int calls, int reps) {
  for (int i = 0; i < calls; ++i) fn(stream_);  // warm: plans built, caches filled
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) fn(stream_);
    const auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
  }
  NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return summarize(us);
}

Timing Timer::time_graph(const std::function<void(cudaStream_t)>& fn, int calls, int reps) {
  fn(stream_);  // first call outside the capture (one-time setup, warnings)
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  NORMTUNE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  try {
    for (int i = 0; i < calls; ++i) fn(stream_);
  } catch (...) {  // end the capture, so that the stream (and later captures) still work
    cudaGraph_t partial = nullptr;
    if (cudaStreamEndCapture(stream_, &partial) == cudaSuccess && partial != nullptr) (void)cudaGraphDestroy(partial);
    (void)cudaGetLastError();
    throw;
  }
  NORMTUNE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  NORMTUNE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 5; ++i) NORMTUNE_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    NORMTUNE_CUDA_CHECK(cudaEventRecord(start_, stream_));
    NORMTUNE_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    NORMTUNE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    NORMTUNE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    NORMTUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    us.push_back(ms * 1e3 / calls);
  }
  NORMTUNE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  NORMTUNE_CUDA_CHECK(cudaGraphDestroy(graph));
  return summarize(us);
}

void fill_random(void* dev, DType t, size_t n, uint32_t seed, double mean, double stddev) {
  std::vector<uint8_t> host(dtype_storage_bytes(t, n));
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(mean, stddev);
  // Random values for a window, repeated (keeps the setup fast on multi-GB tensors).
  const size_t window = std::min<size_t>(n, 1 << 20);
  for (size_t i = 0; i < window; ++i) float_to_dtype(t, static_cast<float>(dist(rng)), host.data(), i);
  const size_t wbytes = dtype_storage_bytes(t, window);
  for (size_t off = wbytes; off < host.size(); off += wbytes) {
    std::copy_n(host.begin(), std::min(wbytes, host.size() - off), host.begin() + off);
  }
  NORMTUNE_CUDA_CHECK(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice));
}


// Compares sampled rows of z (and rsigma) with the fp64 reference; "ok (N rows)" or throws.
std::string verify(const OpInfo& op, DType t, size_t rows, size_t hidden, const void* x,
                   const void* residual, const void* gamma, const void* beta, const ZOutput& z,
                   const void* rsigma, float eps) {
  std::vector<size_t> sample;
  if (rows * hidden <= (16u << 20)) {
    for (size_t r = 0; r < rows; ++r) sample.push_back(r);
  } else {
    std::mt19937 rng(7);
    for (size_t r = 0; r < 64; ++r) sample.push_back(r < 2 ? r * (rows - 1) : rng() % rows);
  }
  const std::vector<double> g = download(gamma, t, 0, hidden);
  const std::vector<double> b = beta ? download(beta, t, 0, hidden) : std::vector<double>(hidden);
  double sampled_amax = 0;
  z.load_scales();
  for (size_t r : sample) {
    const std::vector<double> xv = download(x, t, r * hidden, hidden);
    const std::vector<double> rv = residual ? download(residual, t, r * hidden, hidden) : std::vector<double>();
    reference::FwdInputs in;
    in.norm = op.norm;
    in.rows = 1;
    in.hidden = static_cast<int64_t>(hidden);
    in.x = xv.data();
    in.residual = residual ? rv.data() : nullptr;
    in.gamma = g.data();
    in.beta = b.data();
    in.epsilon = eps;
    in.itype = t;
    const reference::FwdOutputs want = reference::norm_fwd(in);
    const std::vector<double> got = z.row(r);
    if (is_mxfp8(z.format())) {
      // Each block's scale: e8m0(amax / 448) rounded up, from the fp64 values; one step off
      // only where amax / 448 is within fp32 error of a power of two.
      for (size_t b = 0; b < hidden / kMxBlockSize; ++b) {
        double amax = 0;
        for (size_t j = 0; j < kMxBlockSize; ++j) amax = std::max(amax, std::fabs(want.z[b * kMxBlockSize + j]));
        const double ratio = amax / 448.0;
        const int want_e = float_to_e8m0(static_cast<float>(ratio), E8M0Rounding::kUp);
        const int got_e = z.block_exponent(b * kMxBlockSize);
        const double power = amax > 0 ? std::exp2(std::round(std::log2(ratio))) : 0.0;
        NORMTUNE_CHECK(got_e == want_e || (std::abs(got_e - want_e) == 1 && std::fabs(ratio - power) <= 1e-5 * power),
                       "verify ", op.name, " ", rows, "x", hidden, " row ", r, " block ", b, ": MXFP8 scale ", got_e,
                       ", reference ", want_e);
      }
    }
    const std::vector<double> rs = download(rsigma, DType::kFloat32, r, 1);
    NORMTUNE_CHECK(std::fabs(rs[0] - want.rsigma[0]) <= 2e-5 * want.rsigma[0], "verify ", op.name, " ",
                   rows, "x", hidden, " row ", r, ": rsigma ", rs[0], ", reference ", want.rsigma[0]);
    for (size_t h = 0; h < hidden; ++h) {
      NORMTUNE_CHECK(std::fabs(got[h] - want.z[h]) <= z.tolerance(want.z[h], h), "verify ", op.name, " ", rows,
                     "x", hidden, " row ", r, " col ", h, ": z ", got[h], " (", z_format_name(z.format()),
                     "), reference ", want.z[h]);
      sampled_amax = std::max(sampled_amax, std::fabs(want.z[h]));
    }
    if (z.format() == ZFormat::kMxfp8Colwise) {
      // The column-wise copy: each value within a code (one either side) at its column
      // block's scale, as the row-wise one; the scale must fit the value (|value| <= 448 x
      // scale, up to fp32 error). (The scale's exactness needs the block's 32 rows: the GPU
      // tests check it.)
      std::vector<double> col_scale;
      const std::vector<double> col = z.colwise_row(r, &col_scale);
      for (size_t h = 0; h < hidden; ++h) {
        const double tol = std::fabs(want.z[h]) / 8 + std::ldexp(1.0, -9) * col_scale[h] + 1e-5;
        NORMTUNE_CHECK(std::isfinite(col[h]) && std::fabs(col[h] - want.z[h]) <= tol &&
                           std::fabs(want.z[h]) <= 448.0 * col_scale[h] * (1 + 1e-5),
                       "verify ", op.name, " ", rows, "x", hidden, " row ", r, " col ", h, ": column-wise z ", col[h],
                       " (block scale ", col_scale[h], "), reference ", want.z[h]);
      }
    } else if (z.format() == ZFormat::kNvfp4Colwise) {
      // The column-wise transpose: each value within a code at its 16-row block's scale, as
      // the row-wise one (z.tolerance's e2m1 rule). (The scales' exactness: the GPU tests.)
      std::vector<double> col_unit;
      const std::vector<double> col = z.colwise_row(r, &col_unit);
      for (size_t h = 0; h < hidden; ++h) {
        const double tol = std::fabs(want.z[h]) / 3 + 0.5 * col_unit[h] + 1e-5;
        NORMTUNE_CHECK(std::isfinite(col[h]) && std::fabs(col[h] - want.z[h]) <= tol, "verify ", op.name, " ", rows,
                       "x", hidden, " row ", r, " col ", h, ": column-wise z ", col[h], " (block unit ", col_unit[h],
                       "), reference ", want.z[h]);
      }
    }
  }
  if (z.format() == ZFormat::kFp8) {
    // amax: the max over every row, so at least the sampled rows' (equal when all are sampled).
    const double amax = z.amax();
    const bool whole = sample.size() == rows;
    NORMTUNE_CHECK(amax >= sampled_amax * (1 - 2e-5) && (!whole || amax <= sampled_amax * (1 + 2e-5)),
                   "verify ", op.name, " ", rows, "x", hidden, ": amax ", amax, ", reference ", sampled_amax,
                   whole ? "" : " (sampled rows: a lower bound)");
    NORMTUNE_CHECK(z.scale_inv() == 1.f / kFp8Scale, "verify ", op.name, ": scale_inv ", z.scale_inv(), ", want ",
                   1.f / kFp8Scale);
  }
  return detail::concat("ok (", sample.size(), " rows)");
}

namespace {

// |got - want| within the output rounding plus fp32 error relative to the terms' size.
void check_close(const std::vector<double>& got, const std::vector<double>& want,
                 const std::vector<double>& scale, double rtol, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double tol = 1e-6 + rtol * std::fabs(want[i]) + 1e-5 * scale[i];
    NORMTUNE_CHECK(std::fabs(got[i] - want[i]) <= tol, "verify ", what, " [", i, "]: ", got[i],
                   ", reference ", want[i]);
  }
}
}  // namespace

std::string verify_bwd(const OpInfo& op, DType t, size_t rows, size_t hidden, const void* dz,
                       const void* x, const void* add, const void* mu, const void* rsigma,
                       const void* gamma, const void* dx, const void* dgamma, const void* dbeta) {
  const bool ln = op.norm == NormType::kLayerNorm;
  const bool whole = rows * hidden <= (16u << 20);
  std::vector<size_t> sample;
  if (whole) {
    for (size_t r = 0; r < rows; ++r) sample.push_back(r);
  } else {
    std::mt19937 rng(7);
    for (size_t r = 0; r < 64; ++r) sample.push_back(r < 2 ? r * (rows - 1) : rng() % rows);
  }
  const std::vector<double> g = download(gamma, t, 0, hidden);
  const std::string what = detail::concat(op.name, " ", rows, "x", hidden);
  std::vector<double> dgamma_sum(hidden), dbeta_sum(hidden), dgamma_scale(hidden), dbeta_scale(hidden);
  for (size_t r : sample) {
    const std::vector<double> xv = download(x, t, r * hidden, hidden);
    const std::vector<double> dzv = download(dz, t, r * hidden, hidden);
    const std::vector<double> av = add ? download(add, t, r * hidden, hidden) : std::vector<double>();
    const std::vector<double> rs = download(rsigma, DType::kFloat32, r, 1);
    const std::vector<double> m = ln ? download(mu, DType::kFloat32, r, 1) : std::vector<double>{0.0};
    reference::BwdInputs in;
    in.norm = ln ? NormType::kLayerNorm : NormType::kRMSNorm;
    in.rows = 1;
    in.hidden = static_cast<int64_t>(hidden);
    in.dz = dzv.data();
    in.x = xv.data();
    in.add = add ? av.data() : nullptr;
    in.mu = m.data();
    in.rsigma = rs.data();
    in.gamma = g.data();
    const reference::BwdOutputs want = reference::norm_bwd(in);
    check_close(download(dx, t, r * hidden, hidden), want.dx, want.dx_scale, rtol_of(t),
                detail::concat(what, " row ", r, " dx"));
    for (size_t h = 0; h < hidden; ++h) {
      dgamma_sum[h] += want.dgamma[h];
      dgamma_scale[h] += want.dgamma_scale[h];
      if (ln) {
        dbeta_sum[h] += want.dbeta[h];
        dbeta_scale[h] += want.dbeta_scale[h];
      }
    }
  }
  if (!whole) return detail::concat("ok (dx of ", sample.size(), " rows; dgamma not checked at this size)");
  check_close(download(dgamma, t, 0, hidden), dgamma_sum, dgamma_scale, rtol_of(t), what + " dgamma");
  if (ln) check_close(download(dbeta, t, 0, hidden), dbeta_sum, dbeta_scale, rtol_of(t), what + " dbeta");
  return detail::concat("ok (", rows, " rows, dgamma", ln ? ", dbeta" : "", ")");
}

double copy_peak_tbps(Timer& timer, int reps) {
  const size_t bytes = size_t{2} << 30;
  DeviceMem a(bytes), b(bytes);
  NORMTUNE_CUDA_CHECK(cudaMemset(a.ptr, 1, bytes));
  const Timing t = timer.time(
      [&](cudaStream_t s) { NORMTUNE_CUDA_CHECK(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, s)); },
      3, std::max(10, reps / 10));
  return 2.0 * bytes / (t.median_us * 1e-6) / 1e12;
}

BackendScope::BackendScope(const std::string& backend) : set_(backend != "auto") {
  if (set_) {
    nvte_enable_cudnn_norm_fwd(backend == "cudnn");
    nvte_enable_cudnn_norm_bwd(backend == "cudnn");
  }
}

BackendScope::~BackendScope() {
  if (set_) reset_cudnn_norm_switches();
}

}  // namespace normtune::bench
