#include "cudnn/fp8_finish.h"

#include <normtune/common/error.h>

namespace normtune {
namespace {

__global__ void fp8_finish_kernel(const float* graph_amax, float* amax, const float* scale, float* scale_inv) {
  if (amax != nullptr) *amax = fmaxf(*amax, *graph_amax);
  if (scale_inv != nullptr) *scale_inv = 1.f / *scale;
}

}  // namespace

void launch_fp8_finish(const float* graph_amax, float* amax, const float* scale, float* scale_inv,
                       cudaStream_t stream) {
  if (amax == nullptr && scale_inv == nullptr) return;
  fp8_finish_kernel<<<1, 1, 0, stream>>>(graph_amax, amax, scale, scale_inv);
  NORMTUNE_CHECK_LAUNCH();
}

}  // namespace normtune
