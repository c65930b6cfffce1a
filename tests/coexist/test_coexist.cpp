// normtune and a library that exports TransformerEngine's C API names (a stand-in with another
// handle representation) linked into one executable, in both link orders (NORMTUNE_FIRST says
// which this build is). The normtune_ names reach normtune whatever the order; normtune's own
// code never calls the stand-in; the stand-in keeps working. Label cpu: the norm call is
// checked up to its argument errors, which normtune raises before any device work.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <normtune/common/error.h>
#include <normtune/normtune_api.h>

extern "C" int standin_calls();
extern "C" int standin_foreign_handles();

namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

NVTETensor normtune_tensor(void* ptr, std::vector<size_t> shape, NVTEDType dtype) {
  NVTETensor t = normtune_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
  const NVTEBasicTensor b{ptr, dtype, normtune_make_shape(shape.data(), shape.size())};
  normtune_set_tensor_param_v2(t, kNVTERowwiseData, &b, sizeof(b));
  return t;
}

TEST(Coexistence, NormtuneNamesReachNormtuneWhateverTheLinkOrder) {
  const int calls_before = standin_calls();
  NVTETensor t = normtune_tensor(reinterpret_cast<void*>(0x100000), {3, 5}, kNVTEBFloat16);
  const NVTEShape s = normtune_tensor_shape(t);
  ASSERT_EQ(s.ndim, 2u);
  EXPECT_EQ(s.data[0], 3u);
  EXPECT_EQ(s.data[1], 5u);
  EXPECT_EQ(normtune_tensor_type(t), kNVTEBFloat16);
  EXPECT_EQ(normtune_tensor_numel(t), 15u);
  normtune_destroy_tensor(t);
  EXPECT_EQ(standin_calls(), calls_before) << "a normtune_ call reached the stand-in";
  EXPECT_EQ(standin_foreign_handles(), 0);
}

TEST(Coexistence, NormtuneNormCallsUseNormtuneHandles) {
  // gamma of a dtype the type list does not pair with x: normtune's own check must answer,
  // which it can only do if every lookup inside the call went to normtune.
  NVTETensor x = normtune_tensor(reinterpret_cast<void*>(0x100000), {8, 4096}, kNVTEBFloat16);
  NVTETensor g = normtune_tensor(reinterpret_cast<void*>(0x200000), {4096}, kNVTEFloat16);
  NVTETensor z = normtune_tensor(reinterpret_cast<void*>(0x300000), {8, 4096}, kNVTEBFloat16);
  NVTETensor rs = normtune_tensor(reinterpret_cast<void*>(0x400000), {8}, kNVTEFloat32);
  NVTETensor ws = normtune_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
  const int calls_before = standin_calls();
  EXPECT_THAT([&] { normtune_rmsnorm_fwd(x, g, 1e-5f, z, rs, ws, 0, false, nullptr); },
              ThrowsMessage<normtune::Error>(HasSubstr("argument 'gamma': expected dtype bf16 (x's) or fp32, got fp16")));
  EXPECT_EQ(standin_calls(), calls_before);
  for (NVTETensor t : {x, g, z, rs, ws}) normtune_destroy_tensor(t);
  EXPECT_EQ(standin_foreign_handles(), 0);
}

TEST(Coexistence, TheNvteNamesGoToTheLibraryLoadedFirstAndTheStandinStillWorks) {
  // By name, nvte_create_tensor is the first library's. The stand-in's own functions, looked
  // up in it, work with its own handles in either order.
  void* self = dlopen(nullptr, RTLD_NOW);
  ASSERT_NE(self, nullptr);
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&standin_calls), &info), 0);
  void* standin = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(standin, nullptr) << info.dli_fname;
  using Create = NVTETensor (*)(NVTEScalingMode);
  using SetV2 = void (*)(NVTETensor, NVTETensorParam, const void*, size_t);
  using Shape = NVTEShape (*)(const NVTETensor);
  using Destroy = void (*)(NVTETensor);
  auto create = reinterpret_cast<Create>(dlsym(standin, "nvte_create_tensor"));
  auto set = reinterpret_cast<SetV2>(dlsym(standin, "nvte_set_tensor_param_v2"));
  auto shape = reinterpret_cast<Shape>(dlsym(standin, "nvte_tensor_shape"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(standin, "nvte_destroy_tensor"));
  ASSERT_TRUE(create && set && shape && destroy);
  NVTETensor t = create(NVTE_DELAYED_TENSOR_SCALING);
  const size_t dims[2] = {7, 9};
  const NVTEBasicTensor b{nullptr, kNVTEFloat32, normtune_make_shape(dims, 2)};
  set(t, kNVTERowwiseData, &b, sizeof(b));
  EXPECT_EQ(shape(t).ndim, 2u);
  EXPECT_EQ(shape(t).data[1], 9u);
  destroy(t);
  EXPECT_EQ(standin_foreign_handles(), 0);

  const int calls_before = standin_calls();
  NVTETensor by_name = nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
#if NORMTUNE_FIRST
  EXPECT_EQ(standin_calls(), calls_before) << "normtune was linked first: nvte_create_tensor is normtune's";
  EXPECT_EQ(normtune_tensor_ndims(by_name), 1u);  // a default normtune tensor: shape [0]
  normtune_destroy_tensor(by_name);
#else
  EXPECT_EQ(standin_calls(), calls_before + 1) << "the stand-in was linked first: nvte_create_tensor is its";
  nvte_destroy_tensor(by_name);
#endif
  EXPECT_EQ(standin_foreign_handles(), 0);
  dlclose(standin);
  dlclose(self);
}

}  // namespace
