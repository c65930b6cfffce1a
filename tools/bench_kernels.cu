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

__global__ void three_reads_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b,
                                   const uint4* __restrict__ c, uint4* __restrict__ d, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 x = a[i];
    const uint4 y = b[i];
    const uint4 z = c[i];
    d[i] = make_uint4(x.x ^ y.x ^ z.x, x.y ^ y.y ^ z.y, x.z ^ y.z ^ z.z, x.w ^ y.w ^ z.w);
  }
}

constexpr int kThreads = 512;

unsigned grid_for(size_t n, int sm_count) {
  const size_t blocks = std::min<size_t>((n + kThreads - 1) / kThreads, static_cast<size_t>(sm_count) * 8);
  return static_cast<unsigned>(std::max<size_t>(blocks, 1));
}

}  // namespace

void launch_three_reads(const void* a, const void* b, const void* c, void* d, size_t bytes,
                        int sm_count, cudaStream_t stream) {
  const size_t n = bytes / sizeof(uint4);
  three_reads_kernel<<<grid_for(n, sm_count), kThreads, 0, stream>>>(
      static_cast<const uint4*>(a), static_cast<const uint4*>(b), static_cast<const uint4*>(c),
      static_cast<uint4*>(d), n);
  NORMTUNE_CHECK_LAUNCH();
}

void launch_two_reads(const void* a, const void* b, void* c, void* d, size_t bytes, int sm_count,
                      cudaStream_t stream) {
  const size_t n = bytes / sizeof(uint4);
  two_reads_kernel<<<grid_for(n, sm_count), kThreads, 0, stream>>>(
      static_cast<const uint4*>(a), static_cast<const uint4*>(b), static_cast<uint4*>(c),
      static_cast<uint4*>(d), n);
  NORMTUNE_CHECK_LAUNCH();
}

}  // namespace normtune::bench
