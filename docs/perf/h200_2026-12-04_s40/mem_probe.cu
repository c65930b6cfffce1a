// Memory-pattern probe: 2-read-2-write and copy variants, L2 flushed, median of 100.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("err %s line %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

__device__ __forceinline__ uint4 mix(uint4 x, uint4 y) { return make_uint4(x.x ^ y.x, x.y ^ y.y, x.z ^ y.z, x.w ^ y.w); }
__device__ __forceinline__ uint4 add(uint4 x, uint4 y) { return make_uint4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }

// A: today's bench baseline: grid-stride, one vector per iteration.
__global__ void k_gs1(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ c, uint4* __restrict__ d, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint4 x = a[i], y = b[i]; c[i] = mix(x, y); d[i] = add(x, y);
  }
}
// B: grid-stride, U vectors per iteration, loads first.
template <int U>
__global__ void k_gsU(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ c, uint4* __restrict__ d, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i0 < n; i0 += stride * U) {
    uint4 x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { size_t i = i0 + u * stride; if (i < n) { x[u] = a[i]; y[u] = b[i]; } }
#pragma unroll
    for (int u = 0; u < U; ++u) { size_t i = i0 + u * stride; if (i < n) { c[i] = mix(x[u], y[u]); d[i] = add(x[u], y[u]); } }
  }
}
// C: one vector per thread, no loop (Triton/inductor-like), block T.
__global__ void k_flat(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ c, uint4* __restrict__ d, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) { uint4 x = a[i], y = b[i]; c[i] = mix(x, y); d[i] = add(x, y); }
}
// D: U contiguous-per-block vectors per thread, no loop (block covers U*T vectors).
template <int U>
__global__ void k_flatU(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ c, uint4* __restrict__ d, size_t n) {
  size_t base = blockIdx.x * (size_t)blockDim.x * U + threadIdx.x;
  uint4 x[U], y[U];
#pragma unroll
  for (int u = 0; u < U; ++u) { size_t i = base + u * blockDim.x; if (i < n) { x[u] = a[i]; y[u] = b[i]; } }
#pragma unroll
  for (int u = 0; u < U; ++u) { size_t i = base + u * blockDim.x; if (i < n) { c[i] = mix(x[u], y[u]); d[i] = add(x[u], y[u]); } }
}
// E: streaming hints (ld.global.cs / st.global.cs) on B<4>.
template <int U>
__global__ void k_gsU_cs(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ c, uint4* __restrict__ d, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i0 < n; i0 += stride * U) {
    uint4 x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { size_t i = i0 + u * stride; if (i < n) { x[u] = __ldcs(a + i); y[u] = __ldcs(b + i); } }
#pragma unroll
    for (int u = 0; u < U; ++u) { size_t i = i0 + u * stride; if (i < n) { __stcs(c + i, mix(x[u], y[u])); __stcs(d + i, add(x[u], y[u])); } }
  }
}
// copies
__global__ void c_gs1(const uint4* __restrict__ a, uint4* __restrict__ c, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) c[i] = a[i];
}
template <int U>
__global__ void c_flatU(const uint4* __restrict__ a, uint4* __restrict__ c, size_t n) {
  size_t base = blockIdx.x * (size_t)blockDim.x * U + threadIdx.x;
  uint4 x[U];
#pragma unroll
  for (int u = 0; u < U; ++u) { size_t i = base + u * blockDim.x; if (i < n) x[u] = a[i]; }
#pragma unroll
  for (int u = 0; u < U; ++u) { size_t i = base + u * blockDim.x; if (i < n) c[i] = x[u]; }
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t shapes[][2] = {{8192, 7168}, {16384, 4096}, {32768, 8192}, {4096, 4096}, {65536, 128}};
  size_t maxb = 32768ull * 8192 * 2;
  uint4 *a, *b, *c, *d; char* fl;
  CK(cudaMalloc(&a, maxb)); CK(cudaMalloc(&b, maxb)); CK(cudaMalloc(&c, maxb)); CK(cudaMalloc(&d, maxb));
  CK(cudaMalloc(&fl, 256 << 20));
  cudaMemset(a, 1, maxb); cudaMemset(b, 2, maxb);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto timeit = [&](auto&& launch) {
    std::vector<float> t;
    for (int r = 0; r < 120; ++r) {
      cudaMemsetAsync(fl, r, 256 << 20);
      cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); if (r >= 20) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end()); return t[t.size() / 2];
  };
  for (auto& s : shapes) {
    size_t n = s[0] * s[1] * 2 / 16;
    auto g = [&](int per_sm, int T) { return (unsigned)std::min<size_t>((n + T - 1) / T, (size_t)sms * per_sm); };
    printf("%zux%zu bf16\n", s[0], s[1]);
    printf("  2r2w gs1 512x8/SM     %8.2f\n", timeit([&] { k_gs1<<<g(8, 512), 512>>>(a, b, c, d, n); }));
    printf("  2r2w gs2 512x4/SM     %8.2f\n", timeit([&] { k_gsU<2><<<g(4, 512), 512>>>(a, b, c, d, n); }));
    printf("  2r2w gs4 512x4/SM     %8.2f\n", timeit([&] { k_gsU<4><<<g(4, 512), 512>>>(a, b, c, d, n); }));
    printf("  2r2w gs4 256x8/SM     %8.2f\n", timeit([&] { k_gsU<4><<<g(8, 256), 256>>>(a, b, c, d, n); }));
    printf("  2r2w gs4cs 512x4/SM   %8.2f\n", timeit([&] { k_gsU_cs<4><<<g(4, 512), 512>>>(a, b, c, d, n); }));
    printf("  2r2w flat T128        %8.2f\n", timeit([&] { k_flat<<<(n + 127) / 128, 128>>>(a, b, c, d, n); }));
    printf("  2r2w flat T512        %8.2f\n", timeit([&] { k_flat<<<(n + 511) / 512, 512>>>(a, b, c, d, n); }));
    printf("  2r2w flat4 T128       %8.2f\n", timeit([&] { k_flatU<4><<<(n + 511) / 512, 128>>>(a, b, c, d, n); }));
    printf("  2r2w flat2 T256       %8.2f\n", timeit([&] { k_flatU<2><<<(n + 511) / 512, 256>>>(a, b, c, d, n); }));
    printf("  copy memcpy           %8.2f\n", timeit([&] { cudaMemcpyAsync(c, a, n * 16, cudaMemcpyDeviceToDevice); }));
    printf("  copy gs1 512x8/SM     %8.2f\n", timeit([&] { c_gs1<<<g(8, 512), 512>>>(a, c, n); }));
    printf("  copy flat4 T128       %8.2f\n", timeit([&] { c_flatU<4><<<(n + 511) / 512, 128>>>(a, c, n); }));
    printf("  copy flat1 T128       %8.2f\n", timeit([&] { c_flatU<1><<<(n + 127) / 128, 128>>>(a, c, n); }));
  }
  return 0;
}
