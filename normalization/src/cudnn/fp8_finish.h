// The step after a cuDNN forward graph with a per-tensor FP8 z (cudnn_norm.cpp): what the
// native kernels do to z's amax and scale_inv, on the call's stream.
#pragma once

#include <cuda_runtime.h>

namespace normtune {

// *amax = max(*amax, *graph_amax), atomically (a NaN graph amax ignored; amax may be null);
// *scale_inv = 1 / *scale in fp32 (an IEEE division; scale_inv may be null). One thread.
void launch_fp8_finish(const float* graph_amax, float* amax, const float* scale, float* scale_inv,
                       cudaStream_t stream);

}  // namespace normtune
