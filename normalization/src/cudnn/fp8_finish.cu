#include "cudnn/fp8_finish.h"

#include <normtune/common/error.h>

namespace normtune {
namespace {

// (amax: an atomic max of the bit patterns, as the native kernels fold theirs: the max of
// non-negative floats, exact whatever else writes the buffer at the same time; a NaN from
// the graph is ignored, as the native kernels ignore NaN values.)
__global__ void fp8_finish_kernel(const float* graph_amax, float* amax, const float* scale, float* scale_inv) {
  const float m = *graph_amax;
  if (amax != nullptr && m >= 0.f) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
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
