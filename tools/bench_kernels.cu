#include "bench_kernels.h"

#include <normtune/common/error.h>

namespace normtune::bench {

namespace {

// Reads two arrays, writes one or two (the byte pattern of a backward pass and of a fused
// add forward): 16-byte accesses, grid-stride.
__global__ void two_reads_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b,
                                 uint4* __restrict__ c, uint4* __restrict__ d, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 x = a[i];
    const uint4 y = b[i];
    c[i] = make_uint4(x.x ^ y.x, x.y ^ y.y, x.z ^ y.z, x.w ^ y.w);
    if (d != nullptr) d[i] = make_uint4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

}  // namespace

void launch_two_reads(const void* a, const void* b, void* c, void* d, size_t bytes, int sm_count,
                      cudaStream_t stream) {
  const size_t n = bytes / sizeof(uint4);
  const int threads = 512;
  const size_t blocks = std::min<size_t>((n + threads - 1) / threads, static_cast<size_t>(sm_count) * 8);
  two_reads_kernel<<<static_cast<unsigned>(std::max<size_t>(blocks, 1)), threads, 0, stream>>>(
      static_cast<const uint4*>(a), static_cast<const uint4*>(b), static_cast<uint4*>(c),
      static_cast<uint4*>(d), n);
  NORMTUNE_CHECK_LAUNCH();
}

}  // namespace normtune::bench
