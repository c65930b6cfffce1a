// Tensor handles over fake device addresses, for the CPU error tests: the API validates
// them without ever dereferencing the pointers.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/transformer_engine.h>

namespace normtune::test {

inline void* fake(uintptr_t a) { return reinterpret_cast<void*>(a); }

struct Handle {
  NVTETensor h = nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
  Handle() = default;
  Handle(NVTEScalingMode mode, void* p, std::vector<size_t> shape, NVTEDType t) : h(nvte_create_tensor(mode)) {
    set(p, shape, t);
  }
  Handle(void* p, std::vector<size_t> shape, NVTEDType t) { set(p, shape, t); }
  ~Handle() { nvte_destroy_tensor(h); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  void set(void* p, const std::vector<size_t>& shape, NVTEDType t) {
    NVTEBasicTensor b{p, t, nvte_make_shape(shape.data(), shape.size())};
    nvte_set_tensor_param_v2(h, kNVTERowwiseData, &b, sizeof(b));
  }
  // Another buffer of the tensor (kNVTEScale, kNVTEAmax, kNVTERowwiseScaleInv, ...).
  void set_param(NVTETensorParam param, void* p, const std::vector<size_t>& shape, NVTEDType t) {
    NVTEBasicTensor b{p, t, nvte_make_shape(shape.data(), shape.size())};
    nvte_set_tensor_param_v2(h, param, &b, sizeof(b));
  }
  operator NVTETensor() const { return h; }
};

// A call whose arguments and data pass every check reaches the device step: with a GPU, the
// fixtures' fake 16-byte workspace is then the wrong size; without one, the device lookup
// fails. Either way the call raises, and with that error, not an argument's.
template <typename Call>
void expect_rejected_after_the_data_checks(Call&& call) {
  using ::testing::HasSubstr;
  const char* expected = device_count() > 0 ? "argument 'workspace': expected the shape" : "no GPU is visible";
  EXPECT_THAT(call, ::testing::ThrowsMessage<Error>(HasSubstr(expected)));
}

}  // namespace normtune::test
