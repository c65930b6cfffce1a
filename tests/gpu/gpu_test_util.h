// Helpers of the GPU suites: device buffers, NVTETensor handles, random data in any wide
// float type, NaN poisoning, comparison against the fp64 reference with per-dtype
// tolerances (stated once, below).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <normtune/common/convert.h>
#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/normalization.h>
#include <normtune/normtune.h>
#include <normtune/transformer_engine.h>

#include "normalization/src/cudnn/backend_choice.h"

namespace normtune::test {

// ---- tolerances: the one place they are stated -------------------------------------------
// Outputs are computed in fp32 and rounded once to the output type, so one unit in the last
// place of the output type (relative) plus fp32 accumulation error bounds the difference.
struct Tolerance {
  double rtol;
  double atol;
};
inline Tolerance output_tolerance(DType t) {
  switch (t) {
    case DType::kBFloat16: return {1.0 / 128, 1e-5};    // 1 ulp of bf16 (8-bit significand)
    case DType::kFloat16: return {1.0 / 1024, 1e-6};    // 1 ulp of fp16 (11-bit significand)
    default: return {2e-5, 1e-6};                       // fp32: accumulation over the row
  }
}
// mu and rsigma: fp32 statistics of the row.
inline Tolerance stat_tolerance() { return {2e-5, 1e-6}; }

inline bool have_gpu() { return device_count() > 0; }

#define NORMTUNE_REQUIRE_GPU() \
  if (!::normtune::test::have_gpu()) GTEST_SKIP() << "no GPU visible: GPU test skipped"

#define CUDA_OK(stmt) ASSERT_EQ((stmt), cudaSuccess) << #stmt

// ---- memory ---------------------------------------------------------------------------
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) NORMTUNE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  char* get() const { return static_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A host array of `count` elements of a wide float dtype, kept as raw storage.
struct HostArray {
  DType dtype = DType::kFloat32;
  size_t count = 0;
  std::vector<uint8_t> raw;

  HostArray() = default;
  HostArray(DType t, size_t n) : dtype(t), count(n), raw(dtype_storage_bytes(t, n)) {}
  size_t bytes() const { return raw.size(); }
  double get(size_t i) const { return dtype_to_float(dtype, raw.data(), i); }
  void set(size_t i, double v) { float_to_dtype(dtype, static_cast<float>(v), raw.data(), i); }
  std::vector<double> values() const {
    std::vector<double> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = get(i);
    return v;
  }
};

inline HostArray random_array(DType t, size_t n, uint32_t seed, double mean = 0.0,
                              double stddev = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(mean, stddev);
  HostArray a(t, n);
  for (size_t i = 0; i < n; ++i) {
    double v = dist(rng);
    if (v == 0.0) v = 0.25;  // never zeros
    a.set(i, v);
  }
  return a;
}

// Zero-centered gamma as the cuDNN backend forms it under TransformerEngine's switch
// nvte_enable_zero_centered_gamma_in_weight_dtype: gamma + 1 added in fp32 and rounded to
// gamma's dtype (the references then take it as a plain gamma).
inline HostArray gamma_plus_one_in_wtype(const HostArray& gamma) {
  HostArray sum(gamma.dtype, gamma.count);
  for (size_t i = 0; i < gamma.count; ++i)
    sum.set(i, static_cast<double>(static_cast<float>(gamma.get(i)) + 1.f));
  return sum;
}

// A device copy of a host array at `offset_bytes` past a 256-byte aligned allocation (for
// misaligned-storage tests); `poison` fills the whole allocation with NaN bytes first.
struct DeviceArray {
  DeviceBuffer buffer;
  char* ptr = nullptr;
  DType dtype = DType::kFloat32;
  size_t count = 0;

  DeviceArray() = default;
  DeviceArray(DType t, size_t n, size_t offset_bytes = 0)
      : buffer(dtype_storage_bytes(t, n) + offset_bytes + 16), dtype(t), count(n) {
    ptr = buffer.get() + offset_bytes;
  }
  static DeviceArray from_host(const HostArray& h, size_t offset_bytes = 0) {
    DeviceArray d(h.dtype, h.count, offset_bytes);
    if (h.bytes() > 0) NORMTUNE_CUDA_CHECK(cudaMemcpy(d.ptr, h.raw.data(), h.bytes(), cudaMemcpyHostToDevice));
    return d;
  }
  // 0xFF bytes (the default): NaN in fp32, fp16 and bf16. Cases whose expected outputs hold
  // NaN poison with a finite pattern instead (0x7F: 3.4e38 in fp32 and bf16).
  void poison(uint8_t byte = 0xFF) { NORMTUNE_CUDA_CHECK(cudaMemset(buffer.get(), byte, buffer.bytes())); }
  HostArray to_host() const {
    HostArray h(dtype, count);
    NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
    if (h.bytes() > 0) NORMTUNE_CUDA_CHECK(cudaMemcpy(h.raw.data(), ptr, h.bytes(), cudaMemcpyDeviceToHost));
    return h;
  }
};

// ---- NVTETensor handles ----------------------------------------------------------------
class TensorHandle {
 public:
  TensorHandle() : h_(nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING)) {}
  TensorHandle(void* ptr, std::vector<size_t> shape, DType dtype) : TensorHandle() {
    set(ptr, shape, dtype);
  }
  TensorHandle(const DeviceArray& a, std::vector<size_t> shape) : TensorHandle(a.ptr, shape, a.dtype) {}
  ~TensorHandle() { nvte_destroy_tensor(h_); }
  TensorHandle(const TensorHandle&) = delete;
  TensorHandle& operator=(const TensorHandle&) = delete;

  void set(void* ptr, const std::vector<size_t>& shape, DType dtype) {
    NVTEBasicTensor t{ptr, static_cast<NVTEDType>(dtype), nvte_make_shape(shape.data(), shape.size())};
    nvte_set_tensor_param_v2(h_, kNVTERowwiseData, &t, sizeof(t));
  }
  // Another buffer of the tensor (kNVTEScale, kNVTEAmax, kNVTERowwiseScaleInv, ...).
  void set_param(NVTETensorParam param, const DeviceArray& a, const std::vector<size_t>& shape) {
    NVTEBasicTensor t{a.ptr, static_cast<NVTEDType>(a.dtype), nvte_make_shape(shape.data(), shape.size())};
    nvte_set_tensor_param_v2(h_, param, &t, sizeof(t));
  }
  NVTETensor get() const { return h_; }
  operator NVTETensor() const { return h_; }

 private:
  NVTETensor h_;
};

// Special values put into a case's input (element index, value: NaN or +-Inf).
using Specials = std::vector<std::pair<size_t, double>>;
inline HostArray with_specials(HostArray a, const Specials& specials) {
  for (const auto& [i, v] : specials) a.set(i, v);
  return a;
}

// ---- comparison ------------------------------------------------------------------------
// Every element must be written (not NaN: inputs are finite and outputs were NaN-poisoned)
// and within tolerance of the reference: atol + rtol * |want|, plus scale_coef * scale[i]
// when a per-element error scale is given (fp32 arithmetic error relative to the size of
// the terms, for results that cancel). Where the reference itself is NaN or +-Inf (inputs
// with special values), the result must be NaN or that same infinity (there a NaN cannot
// tell a written element from the poison; the finite elements around it can). Reports the
// first few failures.
inline ::testing::AssertionResult close_to_reference(const HostArray& got,
                                                     const std::vector<double>& want,
                                                     Tolerance tol, const std::string& what,
                                                     const std::vector<double>* scale = nullptr,
                                                     double scale_coef = 0) {
  if (got.count != want.size()) {
    return ::testing::AssertionFailure() << what << ": " << got.count << " elements, expected " << want.size();
  }
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.get(i);
    const double w = want[i];
    const double limit = tol.atol + tol.rtol * std::fabs(w) + (scale != nullptr ? scale_coef * (*scale)[i] : 0.0);
    const bool ok = std::isfinite(w) ? std::isfinite(g) && std::fabs(g - w) <= limit
                                     : std::isnan(w) ? std::isnan(g) : g == w;
    if (!ok) {
      if (bad < 5) first += detail::concat("\n  [", i, "] got ", g, " want ", w, " tolerance ", limit);
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << want.size()
                                       << " elements wrong (NaN = not written)" << first;
}

inline ::testing::AssertionResult same_bits(const HostArray& a, const HostArray& b,
                                            const std::string& what) {
  if (a.raw == b.raw) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": results differ between identical runs";
}

// ---- tuned entries ------------------------------------------------------------------------
// The registry's tuned entries of the given stages (for parameterized suites).
// The tuned entries of those stages and z's scaling (row-wise MXFP8 lines apart: their
// output is checked by its own suite).
inline std::vector<const KernelEntry*> tuned_entries(std::initializer_list<Stage> stages,
                                                     ScalingMode scaling = ScalingMode::kNone) {
  std::vector<const KernelEntry*> out;
  for (const KernelEntry* e : kernel_registry().entries()) {
    if (e->is_general() || e->key.scaling != scaling) continue;
    for (Stage st : stages) {
      if (e->key.stage == st) out.push_back(e);
    }
  }
  return out;
}

// A suite over tuned entries: an entry tuned for another architecture family is skipped.
// The native kernels are asked for (TransformerEngine's switches off), so that a table line
// naming cuDNN for the same key does not take the call.
class TunedEntryGpu : public ::testing::TestWithParam<const KernelEntry*> {
 protected:
  void SetUp() override {
    NORMTUNE_REQUIRE_GPU();
    if (GetParam()->arch != current_arch_family()) {
      GTEST_SKIP() << GetParam()->name << " is tuned for " << arch_family_name(GetParam()->arch)
                   << ", this device is " << arch_family_name(current_arch_family());
    }
    nvte_enable_cudnn_norm_fwd(false);
    nvte_enable_cudnn_norm_bwd(false);
  }
  void TearDown() override { reset_cudnn_norm_switches(); }

  // The row counts an entry is run at: a decode line's at 1, 37 and kDecodeMaxRows rows; a
  // line for any row count at 1 and 37 rows, or, where a decode line takes those, just above
  // kDecodeMaxRows and at 200.
  static std::vector<size_t> rows_for(const KernelEntry& e) {
    if (e.key.rows == RowClass::kDecode) return {1, 37, kDecodeMaxRows};
    NormKey decode = e.key;
    decode.rows = RowClass::kDecode;
    for (const KernelEntry* other : kernel_registry().entries()) {
      if (other->key == decode && other->arch == e.arch) return {kDecodeMaxRows + 1, 200};
    }
    return {1, 37};
  }
};

// "sm90_rmsnorm_fwd_bf16_bf16_bf16_h4096_...": the test name of a tuned entry.
inline std::string tuned_entry_name(const ::testing::TestParamInfo<const KernelEntry*>& info) {
  const std::string arch(arch_family_name(info.param->arch));
  return arch.substr(0, 2) + arch.substr(3) + "_" + info.param->name;
}

// The answer of a size query: the workspace's shape must be [bytes] with bytes >= 1 and its
// dtype byte (TransformerEngine 2.18's protocol); returns bytes (0 when the answer is malformed,
// after recording the failure).
inline size_t answered_workspace_bytes(NVTETensor ws) {
  const NVTEShape shape = nvte_tensor_shape(ws);
  EXPECT_EQ(shape.ndim, 1u) << "the size query answers a 1-D shape";
  EXPECT_EQ(nvte_tensor_type(ws), kNVTEByte) << "the size query answers dtype byte";
  if (shape.ndim != 1) return 0;
  EXPECT_GE(shape.data[0], 1u) << "every size the query answers is at least one byte";
  return shape.data[0];
}

// Workspace per TransformerEngine's protocol, as its PyTorch binding runs it: the query with a
// default tensor, then a new tensor of exactly the answered shape and dtype, and the real call.
template <typename Call>
void call_with_workspace(Call&& call) {
  TensorHandle query;
  call(query.get());  // size query
  const size_t bytes = answered_workspace_bytes(query);
  ASSERT_GE(bytes, 1u);
  DeviceBuffer mem(bytes);
  TensorHandle ws(mem.get(), {bytes}, static_cast<DType>(nvte_tensor_type(query)));
  call(ws.get());
}

}  // namespace normtune::test
