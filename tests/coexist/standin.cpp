// A stand-in for TransformerEngine's library in the coexistence test: it exports TE's tensor
// API names and nvte_rmsnorm_fwd with a handle representation of its own (a tagged struct),
// so that a call that reaches the wrong library shows: the stand-in rejects a handle it did
// not make, and counts the calls that reach it.
#include <cstdint>
#include <cstring>

#include <normtune/transformer_engine.h>

namespace {

constexpr uint32_t kTag = 0x54455354;  // "TEST"

struct StandinTensor {
  uint32_t tag = kTag;
  NVTEBasicTensor data{};
};

int g_calls = 0;
int g_foreign = 0;  // handles passed in that this library did not make

StandinTensor* own(NVTETensor t) {
  auto* s = static_cast<StandinTensor*>(t);
  if (s == nullptr || s->tag != kTag) {
    ++g_foreign;
    return nullptr;
  }
  return s;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int standin_calls() { return g_calls; }
__attribute__((visibility("default"))) int standin_foreign_handles() { return g_foreign; }

NVTETensor nvte_create_tensor(NVTEScalingMode) {
  ++g_calls;
  return new StandinTensor();
}

void nvte_destroy_tensor(NVTETensor t) {
  ++g_calls;
  delete own(t);
}

void nvte_set_tensor_param_v2(NVTETensor t, NVTETensorParam param, const void* buf, size_t size) {
  ++g_calls;
  StandinTensor* s = own(t);
  if (s != nullptr && param == kNVTERowwiseData && size == sizeof(NVTEBasicTensor)) {
    std::memcpy(&s->data, buf, sizeof(NVTEBasicTensor));
  }
}

NVTEShape nvte_tensor_shape(const NVTETensor t) {
  ++g_calls;
  const StandinTensor* s = own(t);
  return s != nullptr ? s->data.shape : NVTEShape{};
}

NVTEDType nvte_tensor_type(const NVTETensor t) {
  ++g_calls;
  const StandinTensor* s = own(t);
  return s != nullptr ? static_cast<NVTEDType>(s->data.dtype) : kNVTEByte;
}

void nvte_rmsnorm_fwd(const NVTETensor, const NVTETensor, const float, NVTETensor, NVTETensor, NVTETensor,
                      const int, const bool, cudaStream_t) {
  ++g_calls;
}

}  // extern "C"
