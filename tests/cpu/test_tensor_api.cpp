// The TransformerEngine-compatible tensor API: handles, parameters, shapes, errors, threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <normtune/common/dtype.h>
#include <normtune/common/error.h>
#include <normtune/transformer_engine.h>

#include <normtune/internal/tensor.h>

namespace {

using testing::HasSubstr;
using testing::Not;

// Runs f, which must throw normtune::Error; returns the message (or fails the test).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const normtune::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected normtune::Error, got another exception: " << e.what();
    return {};
  } catch (...) {
    ADD_FAILURE() << "expected normtune::Error, got a non-std exception";
    return {};
  }
  ADD_FAILURE() << "expected normtune::Error, nothing was thrown";
  return {};
}

#define EXPECT_ERROR_WITH(stmt, ...)                                                  \
  do {                                                                                \
    const std::string normtune_msg_ = error_of([&] { stmt; });                        \
    for (const std::string& part : std::initializer_list<std::string>{__VA_ARGS__}) { \
      EXPECT_THAT(normtune_msg_, HasSubstr(part)) << "from `" #stmt "`";              \
    }                                                                                 \
  } while (0)

// Owns a handle for the duration of a test.
class Handle {
 public:
  explicit Handle(NVTEScalingMode mode = NVTE_DELAYED_TENSOR_SCALING)
      : h_(nvte_create_tensor(mode)) {}
  ~Handle() { nvte_destroy_tensor(h_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  NVTETensor get() const { return h_; }

 private:
  NVTETensor h_;
};

NVTEShape make_shape(std::initializer_list<size_t> dims) {
  return nvte_make_shape(dims.begin(), dims.size());
}

NVTEBasicTensor basic(void* ptr, NVTEDType dtype, std::initializer_list<size_t> dims) {
  NVTEBasicTensor t;
  std::memset(&t, 0, sizeof(t));
  t.data_ptr = ptr;
  t.dtype = dtype;
  t.shape = make_shape(dims);
  return t;
}

void set_v2(NVTETensor h, NVTETensorParam p, const NVTEBasicTensor& t) {
  nvte_set_tensor_param_v2(h, p, &t, sizeof(t));
}

NVTEBasicTensor get_v2(NVTETensor h, NVTETensorParam p) {
  NVTEBasicTensor t;
  std::memset(&t, 0xCD, sizeof(t));
  size_t written = 0;
  nvte_get_tensor_param_v2(h, p, &t, sizeof(t), &written);
  EXPECT_EQ(written, sizeof(NVTEBasicTensor));
  return t;
}

std::vector<size_t> dims_of(const NVTEShape& s) {
  EXPECT_LE(s.ndim, 15u);
  return std::vector<size_t>(s.data, s.data + std::min<size_t>(s.ndim, 15));
}

void* fake_ptr(uintptr_t v) {
  return reinterpret_cast<void*>(v);
}

constexpr NVTETensorParam kBufferParams[] = {
    kNVTERowwiseData,     kNVTEColumnwiseData,     kNVTEScale,          kNVTEAmax,
    kNVTERowwiseScaleInv, kNVTEColumnwiseScaleInv, kNVTEColumnwiseAmax,
};

constexpr NVTEScalingMode kValidModes[] = {
    NVTE_DELAYED_TENSOR_SCALING, NVTE_MXFP8_1D_SCALING, NVTE_BLOCK_SCALING_1D,
    NVTE_BLOCK_SCALING_2D,       NVTE_NVFP4_1D_SCALING, NVTE_NORMTUNE_MXFP4_1D_SCALING,
};

void expect_unset(const NVTEBasicTensor& t) {
  EXPECT_EQ(t.data_ptr, nullptr);
  EXPECT_EQ(t.dtype, kNVTEFloat32);
  EXPECT_EQ(dims_of(t.shape), std::vector<size_t>{0});
}

// ---- layout and enum values ------------------------------------------------------------

TEST(TensorApiLayout, StructLayoutsMatchTransformerEngine) {
  static_assert(std::is_standard_layout_v<NVTEShape> && std::is_trivially_copyable_v<NVTEShape>);
  static_assert(std::is_standard_layout_v<NVTEBasicTensor>);
  EXPECT_EQ(sizeof(NVTEShape), 16 * sizeof(size_t));
  EXPECT_EQ(offsetof(NVTEShape, ndim), 15 * sizeof(size_t));
  EXPECT_EQ(offsetof(NVTEBasicTensor, data_ptr), 0u);
  EXPECT_EQ(offsetof(NVTEBasicTensor, dtype), sizeof(void*));
  if (sizeof(void*) == 8) {  // LP64: TE's NVTEBasicTensor is 8 + 4 (+4 padding) + 128 bytes
    EXPECT_EQ(offsetof(NVTEBasicTensor, shape), 16u);
    EXPECT_EQ(sizeof(NVTEBasicTensor), 144u);
  }
  EXPECT_EQ(sizeof(NVTETensor), sizeof(void*));
  EXPECT_EQ(sizeof(NVTEDType), sizeof(int));
}

TEST(TensorApiLayout, EnumValuesMatchTransformerEngine) {
  const std::pair<int, int> dtypes[] = {
      {kNVTEByte, 0},       {kNVTEInt16, 1},      {kNVTEInt32, 2},       {kNVTEInt64, 3},
      {kNVTEFloat32, 4},    {kNVTEFloat16, 5},    {kNVTEBFloat16, 6},    {kNVTEFloat8E4M3, 7},
      {kNVTEFloat8E5M2, 8}, {kNVTEFloat8E8M0, 9}, {kNVTEFloat4E2M1, 10}, {kNVTENumTypes, 11},
  };
  for (auto [actual, expected] : dtypes) EXPECT_EQ(actual, expected);
  const std::pair<int, int> params[] = {
      {kNVTERowwiseData, 0},    {kNVTEColumnwiseData, 1},         {kNVTEScale, 2},
      {kNVTEAmax, 3},           {kNVTERowwiseScaleInv, 4},        {kNVTEColumnwiseScaleInv, 5},
      {kNVTEColumnwiseAmax, 6}, {kNVTEWithGEMMSwizzledScales, 7}, {kNVTERowScaledNVFP4, 8},
      {kNVTENVFP4E4M3Max, 9},   {kNVTENumTensorParams, 10},
  };
  for (auto [actual, expected] : params) EXPECT_EQ(actual, expected);
  EXPECT_EQ(NVTE_DELAYED_TENSOR_SCALING, 0);
  EXPECT_EQ(NVTE_MXFP8_1D_SCALING, 1);
  EXPECT_EQ(NVTE_BLOCK_SCALING_1D, 2);
  EXPECT_EQ(NVTE_BLOCK_SCALING_2D, 3);
  EXPECT_EQ(NVTE_NVFP4_1D_SCALING, 4);
  EXPECT_EQ(NVTE_INVALID_SCALING, 100);
}

TEST(TensorApiLayout, EveryNVTEDTypeEqualsNormtuneDType) {
  ASSERT_EQ(static_cast<int>(kNVTENumTypes), normtune::kNumDTypes);
  for (normtune::DType d : normtune::kAllDTypes) {
    const auto nvte = normtune::to_nvte_dtype(d);
    EXPECT_EQ(static_cast<int>(nvte), static_cast<int>(d)) << normtune::dtype_name(d);
    EXPECT_EQ(normtune::to_dtype(nvte), d);
  }
}

// ---- create / destroy ------------------------------------------------------------------

TEST(TensorApi, NewTensorIsEmptyInEveryScalingMode) {
  for (NVTEScalingMode mode : kValidModes) {
    SCOPED_TRACE(std::string(normtune::scaling_mode_name(mode)));
    Handle t(mode);
    ASSERT_NE(t.get(), nullptr);
    EXPECT_EQ(nvte_tensor_scaling_mode(t.get()), mode);
    for (NVTETensorParam p : kBufferParams) {
      SCOPED_TRACE(std::string(normtune::tensor_param_name(p)));
      expect_unset(get_v2(t.get(), p));
      expect_unset(nvte_get_tensor_param(t.get(), p));
    }
    uint8_t flag = 0xFF;
    nvte_get_tensor_param_v2(t.get(), kNVTEWithGEMMSwizzledScales, &flag, 1, nullptr);
    EXPECT_EQ(flag, 0);
    flag = 0xFF;
    nvte_get_tensor_param_v2(t.get(), kNVTERowScaledNVFP4, &flag, 1, nullptr);
    EXPECT_EQ(flag, 0);
    int bound = 0;
    nvte_get_tensor_param_v2(t.get(), kNVTENVFP4E4M3Max, &bound, sizeof(bound), nullptr);
    EXPECT_EQ(bound, 448);
    EXPECT_EQ(dims_of(nvte_tensor_shape(t.get())), std::vector<size_t>{0});
    EXPECT_EQ(nvte_tensor_ndims(t.get()), 1u);
    EXPECT_EQ(nvte_tensor_numel(t.get()), 0u);
    EXPECT_EQ(nvte_tensor_type(t.get()), kNVTEFloat32);
    EXPECT_EQ(nvte_tensor_data(t.get()), nullptr);
    EXPECT_EQ(nvte_tensor_size_bytes(t.get()), 0u);
  }
}

TEST(TensorApi, HandlesAreDistinctAndLiveCountTracksThem) {
  const size_t before = normtune::live_tensor_count();
  std::vector<NVTETensor> hs;
  for (int i = 0; i < 100; ++i) hs.push_back(nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING));
  EXPECT_EQ(normtune::live_tensor_count(), before + 100);
  EXPECT_EQ(std::set<NVTETensor>(hs.begin(), hs.end()).size(), hs.size());
  for (NVTETensor h : hs) EXPECT_TRUE(normtune::is_valid_tensor_handle(h));
  for (NVTETensor h : hs) nvte_destroy_tensor(h);
  EXPECT_EQ(normtune::live_tensor_count(), before);
  for (NVTETensor h : hs) EXPECT_FALSE(normtune::is_valid_tensor_handle(h));
}

TEST(TensorApi, ReusedSlotStartsEmptyAndOldHandleStaysInvalid) {
  NVTETensor old = nvte_create_tensor(NVTE_MXFP8_1D_SCALING);
  set_v2(old, kNVTERowwiseData, basic(fake_ptr(0x1000), kNVTEBFloat16, {2, 8}));
  const uint8_t one = 1;
  nvte_set_tensor_param_v2(old, kNVTEWithGEMMSwizzledScales, &one, 1);
  nvte_destroy_tensor(old);
  // The free list is LIFO, so the next tensor very likely takes the same slot.
  Handle fresh;
  EXPECT_NE(fresh.get(), old);
  EXPECT_EQ(nvte_tensor_scaling_mode(fresh.get()), NVTE_DELAYED_TENSOR_SCALING);
  expect_unset(get_v2(fresh.get(), kNVTERowwiseData));
  uint8_t flag = 0xFF;
  nvte_get_tensor_param_v2(fresh.get(), kNVTEWithGEMMSwizzledScales, &flag, 1, nullptr);
  EXPECT_EQ(flag, 0);
  EXPECT_ERROR_WITH(nvte_tensor_data(old), "argument 'tensor'", "already destroyed");
}

TEST(TensorApi, CreateAndDestroyMany) {
  const size_t before = normtune::live_tensor_count();
  NVTETensor hs[6] = {};
  nvte_create_tensors(NVTE_NVFP4_1D_SCALING, hs, 6);
  EXPECT_EQ(normtune::live_tensor_count(), before + 6);
  EXPECT_EQ(std::set<NVTETensor>(hs, hs + 6).size(), 6u);
  for (NVTETensor h : hs) EXPECT_EQ(nvte_tensor_scaling_mode(h), NVTE_NVFP4_1D_SCALING);

  // A duplicate or an invalid entry rejects the whole call: nothing is destroyed.
  NVTETensor dup[3] = {hs[0], nullptr, hs[0]};
  EXPECT_ERROR_WITH(nvte_destroy_tensors(dup, 3), "argument 'tensors'", "distinct");
  NVTETensor bad[3] = {hs[1], hs[2], fake_ptr(0x42)};
  EXPECT_ERROR_WITH(nvte_destroy_tensors(bad, 3), "argument 'tensors[2]'", "0x42",
                    "not created by nvte_create_tensor");
  EXPECT_EQ(normtune::live_tensor_count(), before + 6);
  for (NVTETensor h : hs) EXPECT_TRUE(normtune::is_valid_tensor_handle(h));

  NVTETensor with_nulls[8] = {hs[0], nullptr, hs[1], hs[2], hs[3], nullptr, hs[4], hs[5]};
  nvte_destroy_tensors(with_nulls, 8);
  EXPECT_EQ(normtune::live_tensor_count(), before);
  for (NVTETensor h : hs) EXPECT_FALSE(normtune::is_valid_tensor_handle(h));

  nvte_create_tensors(NVTE_DELAYED_TENSOR_SCALING, nullptr, 0);  // nothing to do
  nvte_destroy_tensors(nullptr, 0);
  EXPECT_ERROR_WITH(nvte_create_tensors(NVTE_DELAYED_TENSOR_SCALING, nullptr, 3),
                    "argument 'tensors'", "N = 3", "got NULL");
  EXPECT_ERROR_WITH(nvte_destroy_tensors(nullptr, 2), "argument 'tensors'", "got NULL");
  EXPECT_EQ(normtune::live_tensor_count(), before);
}

TEST(TensorApi, BadScalingModeIsRejectedOnCreate) {
  const size_t before = normtune::live_tensor_count();
  EXPECT_ERROR_WITH(nvte_create_tensor(NVTE_INVALID_SCALING), "argument 'scaling_mode'",
                    "expected an NVTEScalingMode in [0, 4]", "got 100 (NVTE_INVALID_SCALING)",
                    "nvte_create_tensor");
  EXPECT_ERROR_WITH(nvte_create_tensor(static_cast<NVTEScalingMode>(5)), "argument 'scaling_mode'",
                    "got 5 (unknown)");
  EXPECT_ERROR_WITH(nvte_create_tensor(static_cast<NVTEScalingMode>(127)), "got 127");
  EXPECT_ERROR_WITH(nvte_create_tensor(static_cast<NVTEScalingMode>(199)), "got 199",
                    "or NVTE_NORMTUNE_MXFP4_1D_SCALING (200)");
  NVTETensor hs[2] = {nullptr, nullptr};
  EXPECT_ERROR_WITH(nvte_create_tensors(static_cast<NVTEScalingMode>(7), hs, 2),
                    "argument 'scaling_mode'", "got 7");
  EXPECT_EQ(hs[0], nullptr);
  EXPECT_EQ(hs[1], nullptr);
  EXPECT_EQ(normtune::live_tensor_count(), before);
}

// ---- parameters ------------------------------------------------------------------------

TEST(TensorApi, EveryBufferParamRoundTripsThroughV2AndDeprecatedCalls) {
  Handle t;
  // Distinct values per parameter, so a parameter stored in the wrong field is caught.
  for (size_t k = 0; k < std::size(kBufferParams); ++k) {
    const NVTETensorParam p = kBufferParams[k];
    const auto dtype = static_cast<NVTEDType>(k % kNVTENumTypes);
    set_v2(t.get(), p, basic(fake_ptr(0x1000 * (k + 1)), dtype, {k + 1, 2 * k + 3, 7}));
  }
  for (size_t k = 0; k < std::size(kBufferParams); ++k) {
    const NVTETensorParam p = kBufferParams[k];
    SCOPED_TRACE(std::string(normtune::tensor_param_name(p)));
    for (const NVTEBasicTensor& got : {get_v2(t.get(), p), nvte_get_tensor_param(t.get(), p)}) {
      EXPECT_EQ(got.data_ptr, fake_ptr(0x1000 * (k + 1)));
      EXPECT_EQ(got.dtype, static_cast<NVTEDType>(k % kNVTENumTypes));
      EXPECT_EQ(dims_of(got.shape), (std::vector<size_t>{k + 1, 2 * k + 3, 7}));
    }
  }
  // The deprecated setter writes the same fields.
  for (size_t k = 0; k < std::size(kBufferParams); ++k) {
    const NVTETensorParam p = kBufferParams[k];
    NVTETensor h = t.get();
    const NVTEBasicTensor value = basic(fake_ptr(0x900000 + k), kNVTEFloat8E5M2, {k + 11});
    nvte_set_tensor_param(&h, p, &value);
    EXPECT_EQ(h, t.get());
  }
  for (size_t k = 0; k < std::size(kBufferParams); ++k) {
    const NVTEBasicTensor got = get_v2(t.get(), kBufferParams[k]);
    EXPECT_EQ(got.data_ptr, fake_ptr(0x900000 + k));
    EXPECT_EQ(got.dtype, kNVTEFloat8E5M2);
    EXPECT_EQ(dims_of(got.shape), std::vector<size_t>{k + 11});
  }
  // Direct accessors read the right buffers.
  EXPECT_EQ(nvte_tensor_data(t.get()), fake_ptr(0x900000));
  EXPECT_EQ(nvte_tensor_columnwise_data(t.get()), fake_ptr(0x900001));
  EXPECT_EQ(nvte_tensor_scale_inv(t.get()), fake_ptr(0x900004));
  EXPECT_EQ(dims_of(nvte_tensor_scale_inv_shape(t.get())), std::vector<size_t>{15});
  EXPECT_EQ(dims_of(nvte_tensor_columnwise_shape(t.get())), std::vector<size_t>{12});
}

TEST(TensorApi, AmaxAndScaleAccessorsRequireFp32) {
  Handle t;
  set_v2(t.get(), kNVTEAmax, basic(fake_ptr(0xA0), kNVTEFloat32, {1}));
  set_v2(t.get(), kNVTEScale, basic(fake_ptr(0x5C), kNVTEFloat32, {1}));
  EXPECT_EQ(nvte_tensor_amax(t.get()), fake_ptr(0xA0));
  EXPECT_EQ(nvte_tensor_scale(t.get()), fake_ptr(0x5C));
  set_v2(t.get(), kNVTEAmax, basic(fake_ptr(0xA0), kNVTEBFloat16, {1}));
  set_v2(t.get(), kNVTEScale, basic(fake_ptr(0x5C), kNVTEFloat16, {1}));
  EXPECT_ERROR_WITH(nvte_tensor_amax(t.get()), "amax", "fp32", "got bf16", "nvte_tensor_amax");
  EXPECT_ERROR_WITH(nvte_tensor_scale(t.get()), "scale", "fp32", "got fp16");
  // scale_inv may be e8m0 (MXFP8): no dtype check, as in TE.
  set_v2(t.get(), kNVTERowwiseScaleInv, basic(fake_ptr(0xE8), kNVTEFloat8E8M0, {4, 2}));
  EXPECT_EQ(nvte_tensor_scale_inv(t.get()), fake_ptr(0xE8));
}

TEST(TensorApi, FlagParamsRoundTrip) {
  Handle t;
  for (NVTETensorParam p : {kNVTEWithGEMMSwizzledScales, kNVTERowScaledNVFP4}) {
    SCOPED_TRACE(std::string(normtune::tensor_param_name(p)));
    for (uint8_t in : {uint8_t{1}, uint8_t{0}, uint8_t{2}, uint8_t{255}, uint8_t{0}}) {
      nvte_set_tensor_param_v2(t.get(), p, &in, sizeof(in));
      uint8_t out = 0x77;
      size_t written = 0;
      nvte_get_tensor_param_v2(t.get(), p, &out, sizeof(out), &written);
      EXPECT_EQ(out, in != 0 ? 1 : 0) << "set " << int(in);
      EXPECT_EQ(written, 1u);
      // A bool buffer works too (TE's own callers pass one).
      bool as_bool = in == 0;
      nvte_get_tensor_param_v2(t.get(), p, &as_bool, sizeof(as_bool), nullptr);
      EXPECT_EQ(as_bool, in != 0);
    }
  }
  // The flags are independent.
  const uint8_t one = 1, zero = 0;
  nvte_set_tensor_param_v2(t.get(), kNVTEWithGEMMSwizzledScales, &one, 1);
  nvte_set_tensor_param_v2(t.get(), kNVTERowScaledNVFP4, &zero, 1);
  EXPECT_TRUE(normtune::const_tensor_from_handle(t.get(), "t").with_gemm_swizzled_scales);
  EXPECT_FALSE(normtune::const_tensor_from_handle(t.get(), "t").row_scaled_nvfp4);

  for (int bound : {256, 448}) {
    nvte_set_tensor_param_v2(t.get(), kNVTENVFP4E4M3Max, &bound, sizeof(bound));
    int out = 0;
    size_t written = 0;
    nvte_get_tensor_param_v2(t.get(), kNVTENVFP4E4M3Max, &out, sizeof(out), &written);
    EXPECT_EQ(out, bound);
    EXPECT_EQ(written, sizeof(int));
  }
  const int bad = 300;
  EXPECT_ERROR_WITH(nvte_set_tensor_param_v2(t.get(), kNVTENVFP4E4M3Max, &bad, sizeof(bad)),
                    "kNVTENVFP4E4M3Max", "expected 448 or 256", "got 300");
  EXPECT_EQ(normtune::const_tensor_from_handle(t.get(), "t").nvfp4_e4m3_max, 448);
}

TEST(TensorApi, V2GetWithNullBufferReportsTheSize) {
  Handle t;
  for (int p = 0; p < kNVTENumTensorParams; ++p) {
    const auto param = static_cast<NVTETensorParam>(p);
    size_t written = 12345;
    nvte_get_tensor_param_v2(t.get(), param, nullptr, 0, &written);
    const size_t expected = p <= kNVTEColumnwiseAmax     ? sizeof(NVTEBasicTensor)
                            : param == kNVTENVFP4E4M3Max ? sizeof(int)
                                                         : 1;
    EXPECT_EQ(written, expected) << normtune::tensor_param_name(p);
    nvte_get_tensor_param_v2(t.get(), param, nullptr, 0, nullptr);  // nothing to write
  }
}

TEST(TensorApi, V2GetIntoTooSmallBufferFailsAndWritesNothing) {
  Handle t;
  set_v2(t.get(), kNVTEAmax, basic(fake_ptr(0xA0), kNVTEFloat32, {1}));
  unsigned char buf[sizeof(NVTEBasicTensor)];
  std::memset(buf, 0xAB, sizeof(buf));
  size_t written = 777;
  EXPECT_ERROR_WITH(nvte_get_tensor_param_v2(t.get(), kNVTEAmax, buf, 100, &written),
                    "argument 'size_in_bytes'",
                    ("expected at least " + std::to_string(sizeof(NVTEBasicTensor))), "kNVTEAmax",
                    "got 100", "nvte_get_tensor_param_v2");
  EXPECT_EQ(written, 777u);
  for (unsigned char c : buf) ASSERT_EQ(c, 0xAB);
  EXPECT_ERROR_WITH(nvte_get_tensor_param_v2(t.get(), kNVTENVFP4E4M3Max, buf, 2, nullptr),
                    "kNVTENVFP4E4M3Max", "expected at least 4", "got 2");
  EXPECT_ERROR_WITH(nvte_get_tensor_param_v2(t.get(), kNVTEWithGEMMSwizzledScales, buf, 0, nullptr),
                    "kNVTEWithGEMMSwizzledScales", "expected at least 1", "got 0");
}

TEST(TensorApi, V2SetFromNullOrTooSmallBufferFailsAndChangesNothing) {
  Handle t;
  const NVTEBasicTensor value = basic(fake_ptr(0x10), kNVTEFloat16, {4});
  EXPECT_ERROR_WITH(nvte_set_tensor_param_v2(t.get(), kNVTERowwiseData, &value, 8),
                    "argument 'size_in_bytes'", "kNVTERowwiseData",
                    ("expected at least " + std::to_string(sizeof(NVTEBasicTensor))), "got 8",
                    "nvte_set_tensor_param_v2");
  EXPECT_ERROR_WITH(
      nvte_set_tensor_param_v2(t.get(), kNVTERowwiseData, nullptr, sizeof(NVTEBasicTensor)),
      "argument 'buf'", "NVTEBasicTensor", "kNVTERowwiseData", "got NULL");
  EXPECT_ERROR_WITH(nvte_set_tensor_param_v2(t.get(), kNVTERowScaledNVFP4, nullptr, 1),
                    "argument 'buf'", "uint8_t", "got NULL");
  const int bound = 256;
  EXPECT_ERROR_WITH(nvte_set_tensor_param_v2(t.get(), kNVTENVFP4E4M3Max, &bound, 3),
                    "expected at least 4", "got 3");
  expect_unset(get_v2(t.get(), kNVTERowwiseData));
  EXPECT_EQ(normtune::const_tensor_from_handle(t.get(), "t").nvfp4_e4m3_max, 448);
  // A larger buffer is fine.
  unsigned char big[sizeof(NVTEBasicTensor) + 16] = {};
  std::memcpy(big, &value, sizeof(value));
  nvte_set_tensor_param_v2(t.get(), kNVTERowwiseData, big, sizeof(big));
  EXPECT_EQ(nvte_tensor_data(t.get()), fake_ptr(0x10));
}

TEST(TensorApi, UnknownParamIsRejected) {
  Handle t;
  NVTEBasicTensor value = basic(nullptr, kNVTEFloat32, {1});
  // Values a C caller may pass; C++ code can only form those within the enum's range.
  for (int p : {10, 11, 15}) {
    const auto param = static_cast<NVTETensorParam>(p);
    const std::string got = "got " + std::to_string(p);
    EXPECT_ERROR_WITH(nvte_set_tensor_param_v2(t.get(), param, &value, sizeof(value)),
                      "argument 'param'", "NVTETensorParam in [0, 10)", got);
    EXPECT_ERROR_WITH(nvte_get_tensor_param_v2(t.get(), param, &value, sizeof(value), nullptr),
                      "argument 'param'", got);
    EXPECT_ERROR_WITH(nvte_get_tensor_param(t.get(), param), "argument 'param_name'", got);
  }
  // The deprecated calls only know the buffers.
  NVTETensor h = t.get();
  EXPECT_ERROR_WITH(nvte_set_tensor_param(&h, kNVTEWithGEMMSwizzledScales, &value),
                    "argument 'param_name'", "kNVTEWithGEMMSwizzledScales",
                    "nvte_set_tensor_param_v2");
  EXPECT_ERROR_WITH(nvte_get_tensor_param(t.get(), kNVTENVFP4E4M3Max), "argument 'param_name'",
                    "kNVTENVFP4E4M3Max", "nvte_get_tensor_param_v2");
}

TEST(TensorApi, BadDTypeValueIsRejectedAndNamed) {
  Handle t;
  set_v2(t.get(), kNVTEAmax, basic(fake_ptr(0xA0), kNVTEFloat32, {1}));
  for (int bad : {11, 57, -1}) {
    const std::string got = "got " + std::to_string(bad);
    // Stored as a C caller would: any int in the enum's storage.
    NVTEBasicTensor value = basic(fake_ptr(0xBAD), kNVTEFloat32, {1});
    static_assert(sizeof(value.dtype) == sizeof(bad));
    std::memcpy(&value.dtype, &bad, sizeof(bad));
    EXPECT_ERROR_WITH(set_v2(t.get(), kNVTEAmax, value), "argument 'buf (kNVTEAmax).dtype'",
                      "NVTEDType in [0, 10]", got);
    NVTETensor h = t.get();
    EXPECT_ERROR_WITH(nvte_set_tensor_param(&h, kNVTEScale, &value),
                      "argument 'param (kNVTEScale).dtype'", got);
  }
  EXPECT_EQ(get_v2(t.get(), kNVTEAmax).data_ptr, fake_ptr(0xA0));  // unchanged
  expect_unset(get_v2(t.get(), kNVTEScale));
}

TEST(TensorApi, ShapeRankLimitIsFifteen) {
  Handle t;
  NVTEBasicTensor value = basic(fake_ptr(0x10), kNVTEFloat32, {});
  value.shape.ndim = 15;
  for (size_t i = 0; i < 15; ++i) value.shape.data[i] = 1 + (i % 2);
  set_v2(t.get(), kNVTERowwiseData, value);
  EXPECT_EQ(nvte_tensor_ndims(t.get()), 15u);
  EXPECT_EQ(nvte_tensor_numel(t.get()), size_t{1} << 7);

  value.shape.ndim = 16;
  EXPECT_ERROR_WITH(set_v2(t.get(), kNVTERowwiseData, value),
                    "argument 'buf (kNVTERowwiseData).shape.ndim'", "expected at most 15",
                    "got 16");
  EXPECT_EQ(nvte_tensor_ndims(t.get()), 15u);  // unchanged

  const size_t huge = size_t{1} << 40;
  EXPECT_ERROR_WITH(set_v2(t.get(), kNVTEColumnwiseData, basic(nullptr, kNVTEByte, {huge, huge})),
                    "argument 'buf (kNVTEColumnwiseData).shape'", "fits in size_t");
}

TEST(TensorApi, MakeShapeLimits) {
  const NVTEShape empty = nvte_make_shape(nullptr, 0);
  EXPECT_EQ(empty.ndim, 0u);
  size_t dims[16];
  for (size_t i = 0; i < 16; ++i) dims[i] = 100 + i;
  const NVTEShape full = nvte_make_shape(dims, 15);
  EXPECT_EQ(full.ndim, 15u);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(full.data[i], 100 + i);
  EXPECT_ERROR_WITH(nvte_make_shape(dims, 16), "argument 'ndim'", "expected at most 15", "got 16",
                    "nvte_make_shape");
  // As in TE, NULL data gives zeros.
  const NVTEShape zeros = nvte_make_shape(nullptr, 3);
  EXPECT_EQ(dims_of(zeros), (std::vector<size_t>{0, 0, 0}));
}

struct DTypeCase {
  NVTEDType dtype;
  size_t bits;
};

TEST(TensorApi, ShapesNumelAndElementSizesForEveryDType) {
  const DTypeCase cases[] = {
      {kNVTEByte, 8},       {kNVTEInt16, 16},     {kNVTEInt32, 32},     {kNVTEInt64, 64},
      {kNVTEFloat32, 32},   {kNVTEFloat16, 16},   {kNVTEBFloat16, 16},  {kNVTEFloat8E4M3, 8},
      {kNVTEFloat8E5M2, 8}, {kNVTEFloat8E8M0, 8}, {kNVTEFloat4E2M1, 4},
  };
  ASSERT_EQ(std::size(cases), static_cast<size_t>(kNVTENumTypes));
  for (const DTypeCase& c : cases) {
    SCOPED_TRACE("dtype " + std::to_string(c.dtype));
    Handle t;
    set_v2(t.get(), kNVTERowwiseData, basic(fake_ptr(0x100), c.dtype, {3, 5, 7}));
    EXPECT_EQ(nvte_tensor_type(t.get()), c.dtype);
    EXPECT_EQ(dims_of(nvte_tensor_shape(t.get())), (std::vector<size_t>{3, 5, 7}));
    EXPECT_EQ(nvte_tensor_ndims(t.get()), 3u);
    EXPECT_EQ(nvte_tensor_size(t.get(), 0), 3u);
    EXPECT_EQ(nvte_tensor_size(t.get(), 1), 5u);
    EXPECT_EQ(nvte_tensor_size(t.get(), 2), 7u);
    EXPECT_EQ(nvte_tensor_numel(t.get()), 105u);
    EXPECT_EQ(nvte_tensor_element_size_bits(t.get()), c.bits);
    EXPECT_EQ(nvte_tensor_size_bytes(t.get()), (105 * c.bits + 7) / 8);
    if (c.bits % 8 == 0) {
      EXPECT_EQ(nvte_tensor_element_size(t.get()), c.bits / 8);
    } else {
      EXPECT_ERROR_WITH(nvte_tensor_element_size(t.get()), "fp4e2m1",
                        "nvte_tensor_element_size_bits");
    }
    EXPECT_ERROR_WITH(nvte_tensor_size(t.get(), 3), "argument 'dim'", "ndim 3", "[3, 5, 7]",
                      "got 3");
  }
  // fp4: 105 elements need 53 bytes, not 105 and not 52.
  Handle fp4;
  set_v2(fp4.get(), kNVTERowwiseData, basic(fake_ptr(0x100), kNVTEFloat4E2M1, {3, 5, 7}));
  EXPECT_EQ(nvte_tensor_numel(fp4.get()), 105u);
  EXPECT_EQ(nvte_tensor_size_bytes(fp4.get()), 53u);
}

TEST(TensorApi, ScalarShapeHasOneElement) {
  Handle t;
  set_v2(t.get(), kNVTERowwiseData, basic(fake_ptr(0x100), kNVTEFloat32, {}));
  EXPECT_EQ(nvte_tensor_ndims(t.get()), 0u);
  EXPECT_EQ(nvte_tensor_numel(t.get()), 1u);
  EXPECT_ERROR_WITH(nvte_tensor_size(t.get(), 0), "argument 'dim'", "ndim 0", "got 0");
}

TEST(TensorApi, ColumnwiseOnlyTensorHasTheLogicalShape) {
  // Without row-wise data the shape and dtype come from the column-wise data, which is the
  // transpose except for MXFP8.
  for (NVTEScalingMode mode : kValidModes) {
    SCOPED_TRACE(std::string(normtune::scaling_mode_name(mode)));
    Handle t(mode);
    set_v2(t.get(), kNVTEColumnwiseData, basic(fake_ptr(0xC0), kNVTEFloat8E4M3, {4, 2, 3}));
    const std::vector<size_t> expected =
        mode == NVTE_MXFP8_1D_SCALING || mode == NVTE_NORMTUNE_MXFP4_1D_SCALING ? std::vector<size_t>{4, 2, 3}
                                                                                : std::vector<size_t>{2, 3, 4};
    EXPECT_EQ(dims_of(nvte_tensor_shape(t.get())), expected);
    EXPECT_EQ(dims_of(nvte_tensor_columnwise_shape(t.get())), (std::vector<size_t>{4, 2, 3}));
    EXPECT_EQ(nvte_tensor_type(t.get()), kNVTEFloat8E4M3);
    EXPECT_EQ(nvte_tensor_numel(t.get()), 24u);
    EXPECT_EQ(nvte_tensor_size(t.get(), 2), expected[2]);
    // Row-wise data, once set, wins.
    set_v2(t.get(), kNVTERowwiseData, basic(fake_ptr(0xD0), kNVTEBFloat16, {6, 4}));
    EXPECT_EQ(dims_of(nvte_tensor_shape(t.get())), (std::vector<size_t>{6, 4}));
    EXPECT_EQ(nvte_tensor_type(t.get()), kNVTEBFloat16);
  }
}

TEST(TensorApi, NullPointerWithShapeIsAcceptedAtSetTime) {
  // The workspace query passes a tensor with a shape and no memory.
  Handle t;
  set_v2(t.get(), kNVTERowwiseData, basic(nullptr, kNVTEBFloat16, {4, 8}));
  EXPECT_EQ(nvte_tensor_data(t.get()), nullptr);
  EXPECT_EQ(nvte_tensor_numel(t.get()), 32u);
  const normtune::Tensor& impl = normtune::const_tensor_from_handle(t.get(), "t");
  EXPECT_TRUE(impl.has_data());  // TE's convention: set unless NULL with shape [0]
  EXPECT_EQ(impl.data.dptr, nullptr);
  nvte_zero_tensor(t.get(), nullptr);  // NULL buffers are skipped: no device call
}

// ---- invalid handles -------------------------------------------------------------------

TEST(TensorApiErrors, NullHandleIsEmptyForTolerantGettersAsInTE) {
  const NVTETensor null = nullptr;
  EXPECT_EQ(nvte_tensor_type(null), kNVTEFloat32);
  EXPECT_EQ(nvte_tensor_element_size(null), 4u);
  EXPECT_EQ(nvte_tensor_element_size_bits(null), 32u);
  EXPECT_EQ(nvte_tensor_size_bytes(null), 0u);
  EXPECT_EQ(nvte_tensor_data(null), nullptr);
  EXPECT_EQ(nvte_tensor_columnwise_data(null), nullptr);
  EXPECT_EQ(nvte_tensor_amax(null), nullptr);
  EXPECT_EQ(nvte_tensor_scale(null), nullptr);
  EXPECT_EQ(nvte_tensor_scale_inv(null), nullptr);
  EXPECT_EQ(dims_of(nvte_tensor_scale_inv_shape(null)), std::vector<size_t>{0});
  EXPECT_EQ(nvte_tensor_scaling_mode(null), NVTE_DELAYED_TENSOR_SCALING);
  expect_unset(nvte_get_tensor_param(null, kNVTEColumnwiseData));
  expect_unset(get_v2(null, kNVTERowwiseData));
  int bound = 0;
  nvte_get_tensor_param_v2(null, kNVTENVFP4E4M3Max, &bound, sizeof(bound), nullptr);
  EXPECT_EQ(bound, 448);
  nvte_zero_tensor(null, nullptr);
  nvte_destroy_tensor(null);  // no-op, as in TE
}

TEST(TensorApiErrors, NullHandleIsAnErrorWhereTEErrs) {
  const NVTETensor null = nullptr;
  const char* msg = "argument 'tensor': expected a valid NVTETensor handle, got NULL";
  EXPECT_ERROR_WITH(nvte_tensor_shape(null), msg, "nvte_tensor_shape");
  EXPECT_ERROR_WITH(nvte_tensor_columnwise_shape(null), msg);
  EXPECT_ERROR_WITH(nvte_tensor_ndims(null), msg);
  EXPECT_ERROR_WITH(nvte_tensor_size(null, 0), msg);
  EXPECT_ERROR_WITH(nvte_tensor_numel(null), msg, "nvte_tensor_numel");
  const NVTEBasicTensor value = basic(nullptr, kNVTEFloat32, {1});
  EXPECT_ERROR_WITH(nvte_set_tensor_param_v2(null, kNVTEAmax, &value, sizeof(value)), msg,
                    "nvte_set_tensor_param_v2");
  NVTETensor h = nullptr;
  EXPECT_ERROR_WITH(nvte_set_tensor_param(&h, kNVTEAmax, &value), "argument '*tensor'", "got NULL");
  EXPECT_ERROR_WITH(nvte_set_tensor_param(nullptr, kNVTEAmax, &value), "argument 'tensor'",
                    "pointer to an NVTETensor", "got NULL");
  Handle t;
  h = t.get();
  EXPECT_ERROR_WITH(nvte_set_tensor_param(&h, kNVTEAmax, nullptr), "argument 'param'", "got NULL");
}

// Every function that takes a handle, called with `h`; each must throw.
std::vector<std::pair<const char*, std::function<void()>>> every_call(NVTETensor h) {
  static NVTEBasicTensor value = basic(nullptr, kNVTEFloat32, {1});
  static uint8_t flag = 1;
  return {
      {"nvte_tensor_shape", [=] { nvte_tensor_shape(h); }},
      {"nvte_tensor_columnwise_shape", [=] { nvte_tensor_columnwise_shape(h); }},
      {"nvte_tensor_ndims", [=] { nvte_tensor_ndims(h); }},
      {"nvte_tensor_size", [=] { nvte_tensor_size(h, 0); }},
      {"nvte_tensor_size_bytes", [=] { nvte_tensor_size_bytes(h); }},
      {"nvte_tensor_numel", [=] { nvte_tensor_numel(h); }},
      {"nvte_tensor_element_size", [=] { nvte_tensor_element_size(h); }},
      {"nvte_tensor_element_size_bits", [=] { nvte_tensor_element_size_bits(h); }},
      {"nvte_tensor_type", [=] { nvte_tensor_type(h); }},
      {"nvte_tensor_data", [=] { nvte_tensor_data(h); }},
      {"nvte_tensor_columnwise_data", [=] { nvte_tensor_columnwise_data(h); }},
      {"nvte_tensor_amax", [=] { nvte_tensor_amax(h); }},
      {"nvte_tensor_scale", [=] { nvte_tensor_scale(h); }},
      {"nvte_tensor_scale_inv", [=] { nvte_tensor_scale_inv(h); }},
      {"nvte_tensor_scale_inv_shape", [=] { nvte_tensor_scale_inv_shape(h); }},
      {"nvte_tensor_scaling_mode", [=] { nvte_tensor_scaling_mode(h); }},
      {"nvte_zero_tensor", [=] { nvte_zero_tensor(h, nullptr); }},
      {"nvte_get_tensor_param", [=] { nvte_get_tensor_param(h, kNVTEAmax); }},
      {"nvte_get_tensor_param_v2",
       [=] {
         size_t n = 0;
         nvte_get_tensor_param_v2(h, kNVTEAmax, nullptr, 0, &n);
       }},
      {"nvte_set_tensor_param_v2",
       [=] { nvte_set_tensor_param_v2(h, kNVTEWithGEMMSwizzledScales, &flag, 1); }},
      {"nvte_set_tensor_param",
       [=] {
         NVTETensor copy = h;
         nvte_set_tensor_param(&copy, kNVTEAmax, &value);
       }},
      {"nvte_destroy_tensor", [=] { nvte_destroy_tensor(h); }},
  };
}

TEST(TensorApiErrors, HandleNeverCreatedIsRejectedByEveryFunction) {
  int on_stack = 0;
  const uintptr_t garbage[] = {
      1,  // a TE-style index handle
      2,
      0xDEADBEEF,
      reinterpret_cast<uintptr_t>(&on_stack),  // a pointer to something else
      0xFFFFFFFFFFFFFFFFull,
      // Well-formed (magic byte, odd tag) but a slot far past any used one.
      (uint64_t{1} << 32) | (uint64_t{0x6E} << 24) | 0xFFFFF0,
  };
  const size_t before = normtune::live_tensor_count();
  for (uintptr_t g : garbage) {
    std::ostringstream hex;
    hex << "0x" << std::hex << g;
    const NVTETensor h = fake_ptr(g);
    EXPECT_FALSE(normtune::is_valid_tensor_handle(h));
    for (auto& [name, call] : every_call(h)) {
      SCOPED_TRACE(name);
      const std::string msg = error_of(call);
      EXPECT_THAT(msg, HasSubstr("expected a valid NVTETensor handle, got " + hex.str()));
      EXPECT_THAT(msg, HasSubstr("(not created by nvte_create_tensor)"));
      EXPECT_THAT(msg, HasSubstr(name));  // the failing C API function is named
    }
  }
  EXPECT_EQ(normtune::live_tensor_count(), before);
}

TEST(TensorApiErrors, DestroyedHandleIsRejectedByEveryFunction) {
  NVTETensor h = nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
  nvte_destroy_tensor(h);
  for (int round = 0; round < 2; ++round) {
    for (auto& [name, call] : every_call(h)) {
      SCOPED_TRACE(name);
      const std::string msg = error_of(call);
      EXPECT_THAT(msg, HasSubstr("argument '"));
      EXPECT_THAT(msg, HasSubstr("(already destroyed)"));
      EXPECT_THAT(msg, Not(HasSubstr("not created")));
    }
    // Reuse the slot (LIFO free list): the old handle must stay dead.
    NVTETensor reuse = nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
    EXPECT_NE(reuse, h);
    EXPECT_TRUE(normtune::is_valid_tensor_handle(reuse));
    EXPECT_FALSE(normtune::is_valid_tensor_handle(h));
    nvte_destroy_tensor(reuse);
  }
}

// ---- the internal lookup used by the normalization functions ---------------------------

TEST(TensorImpl, LookupNamesTheArgumentAndTheCaller) {
  EXPECT_ERROR_WITH(normtune::tensor_from_handle(nullptr, "gamma"),
                    "argument 'gamma': expected a valid NVTETensor handle, got NULL",
                    "test_tensor_api.cpp");
  NVTETensor h = nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
  EXPECT_EQ(&normtune::tensor_from_handle(h, "x"), &normtune::const_tensor_from_handle(h, "x"));
  EXPECT_EQ(normtune::tensor_from_handle_or_null(h, "x"), &normtune::tensor_from_handle(h, "x"));
  nvte_destroy_tensor(h);
  EXPECT_ERROR_WITH(normtune::const_tensor_from_handle(h, "x"), "argument 'x'",
                    "(already destroyed)");
  EXPECT_ERROR_WITH(normtune::tensor_from_handle_or_null(h, "residual"), "argument 'residual'",
                    "(already destroyed)");
  EXPECT_EQ(normtune::tensor_from_handle_or_null(nullptr, "residual"), nullptr);
}

TEST(TensorImpl, HelpersFlattenAndCount) {
  normtune::Tensor t;
  EXPECT_FALSE(t.has_data());
  t.data.dptr = fake_ptr(0x10);
  t.data.dtype = normtune::DType::kBFloat16;
  t.data.shape = normtune::Shape{2, 3, 4};
  EXPECT_TRUE(t.has_data());
  EXPECT_EQ(t.ndim(), 3u);
  EXPECT_EQ(t.numel(), 24u);
  EXPECT_EQ(t.rows(), 6u);
  EXPECT_EQ(t.last_dim(), 4u);
  EXPECT_EQ(t.flat_2d().rows, 6u);
  EXPECT_EQ(t.flat_2d().cols, 4u);
  EXPECT_EQ(t.data.size_bytes(), 48u);
  EXPECT_EQ(t.shape().str(), "[2, 3, 4]");
  EXPECT_EQ(t.buffer(kNVTEAmax), &t.amax);
  EXPECT_EQ(t.buffer(kNVTEWithGEMMSwizzledScales), nullptr);
  const normtune::Shape scalar;
  EXPECT_EQ(scalar.numel(), 1u);
  EXPECT_EQ(normtune::flatten_2d(scalar).rows, 1u);
  EXPECT_EQ(normtune::flatten_2d(scalar).cols, 1u);
  EXPECT_EQ(normtune::flatten_2d(normtune::Shape{7}).rows, 1u);
  EXPECT_EQ(normtune::flatten_2d(normtune::Shape{7}).cols, 7u);
  normtune::BasicTensor fp4{nullptr, normtune::DType::kFloat4E2M1, normtune::Shape{3, 5}};
  EXPECT_EQ(fp4.size_bytes(), 8u);  // 15 elements * 4 bits = 7.5 bytes -> 8
  EXPECT_TRUE(fp4.has_data());      // a shape without memory counts as set
  const NVTEBasicTensor round = fp4.to_nvte();
  const normtune::BasicTensor back = normtune::BasicTensor::from_nvte(round);
  EXPECT_EQ(back.shape, fp4.shape);
  EXPECT_EQ(back.dtype, fp4.dtype);
  t.clear();
  EXPECT_FALSE(t.has_data());
  EXPECT_EQ(t.shape().str(), "[0]");
}

// ---- threads ---------------------------------------------------------------------------

TEST(TensorApiThreads, ConcurrentCreateDestroyNeverSharesALiveHandle) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 1500;
  const size_t before = normtune::live_tensor_count();
  std::mutex live_mutex;
  std::set<NVTETensor> live;  // every handle currently alive, across threads
  std::atomic<int> duplicates{0}, errors{0}, wrong_values{0}, stale_accepted{0};
  std::atomic<size_t> created{0};

  auto worker = [&](int id) {
    std::mt19937 rng(1234 + id);
    std::vector<NVTETensor> mine;
    NVTETensor stale = nullptr;
    try {
      for (int round = 0; round < kRounds; ++round) {
        const int batch = 1 + static_cast<int>(rng() % 8);
        for (int k = 0; k < batch; ++k) {
          NVTETensor h = nvte_create_tensor(kValidModes[rng() % 5]);
          {
            std::lock_guard<std::mutex> lock(live_mutex);
            if (!live.insert(h).second) ++duplicates;
          }
          // Tag the tensor with its owner so cross-talk between threads shows up.
          const uintptr_t tag = (uintptr_t(id) << 40) | (uintptr_t(round) << 8) | uintptr_t(k);
          set_v2(h, kNVTERowwiseData, basic(fake_ptr(tag), kNVTEFloat16, {size_t(k) + 1}));
          mine.push_back(h);
          ++created;
        }
        std::shuffle(mine.begin(), mine.end(), rng);
        const size_t keep = rng() % 4;  // leave a few alive across rounds
        while (mine.size() > keep) {
          NVTETensor h = mine.back();
          mine.pop_back();
          const auto ptr = reinterpret_cast<uintptr_t>(nvte_tensor_data(h));
          if ((ptr >> 40) != uintptr_t(id)) ++wrong_values;
          {
            std::lock_guard<std::mutex> lock(live_mutex);
            live.erase(h);
          }
          nvte_destroy_tensor(h);
          stale = h;
        }
        if (stale != nullptr && normtune::is_valid_tensor_handle(stale)) ++stale_accepted;
      }
      for (NVTETensor h : mine) {
        {
          std::lock_guard<std::mutex> lock(live_mutex);
          live.erase(h);
        }
        nvte_destroy_tensor(h);
      }
    } catch (const std::exception& e) {
      ++errors;
      ADD_FAILURE() << "thread " << id << ": " << e.what();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(worker, i);
  for (auto& th : threads) th.join();

  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(duplicates.load(), 0);
  EXPECT_EQ(wrong_values.load(), 0);
  EXPECT_EQ(stale_accepted.load(), 0);
  EXPECT_GE(created.load(), size_t{kThreads} * kRounds);  // thousands of handles
  EXPECT_TRUE(live.empty());
  EXPECT_EQ(normtune::live_tensor_count(), before);
}

TEST(TensorApiThreads, ConcurrentDoubleDestroyHasExactlyOneWinner) {
  for (int trial = 0; trial < 200; ++trial) {
    NVTETensor h = nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
    std::atomic<int> ok{0}, failed{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&] {
        while (!go.load()) {
        }
        try {
          nvte_destroy_tensor(h);
          ++ok;
        } catch (const normtune::Error&) {
          ++failed;
        }
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    ASSERT_EQ(ok.load(), 1) << "trial " << trial;
    ASSERT_EQ(failed.load(), 3);
  }
}

}  // namespace
