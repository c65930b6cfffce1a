#include "bench_kernels.h"

#include <type_traits>

#include <normtune/common/error.h>
#include <normtune/common/numeric.h>

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

// d = fp8 e4m3(a (+ b)); with b, also c = a + b in T; with e, the codes into e too: the
// bytes of a norm with an FP8 z (a cast), of a fused add with one, and of a norm with a
// row-wise and a column-wise MXFP8 z (x read once, two codes written per element). One
// 16-byte vector of T per step, grid-stride.
template <typename T>
__global__ void cast_fp8_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ c,
                                uint8_t* __restrict__ d, uint8_t* __restrict__ e, size_t nvec) {
  constexpr int kN = sizeof(uint4) / sizeof(T);
  using Codes = std::conditional_t<kN == 8, uint2, std::conditional_t<kN == 4, uint32_t, uint4>>;
  static_assert(sizeof(Codes) == kN, "one fp8 code per element");
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < nvec;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint4 x = a[i];
    if (b != nullptr) {
      const uint4 y = b[i];
      T* xs = reinterpret_cast<T*>(&x);
      const T* ys = reinterpret_cast<const T*>(&y);
#pragma unroll
      for (int k = 0; k < kN; ++k) xs[k] = from_float<T>(to_float(xs[k]) + to_float(ys[k]));
      c[i] = x;
    }
    Codes out;
    uint8_t* codes = reinterpret_cast<uint8_t*>(&out);
    const T* xs = reinterpret_cast<const T*>(&x);
#pragma unroll
    for (int k = 0; k < kN; ++k) codes[k] = from_float<fp8e4m3_t>(to_float(xs[k])).bits;
    reinterpret_cast<Codes*>(d)[i] = out;
    if (e != nullptr) reinterpret_cast<Codes*>(e)[i] = out;
  }
}

// Row-wise MXFP8 e4m3 of x [rows, hidden]: per 32-element block, E = e8m0(amax / 448, round
// up) into scales[row * scale_cols + block] (compact layout), codes fp8(x * 2^(127 - E)).
// One block per thread, grid-stride.
template <typename T>
__global__ void mxfp8_quantize_kernel(const T* __restrict__ x, uint8_t* __restrict__ z, uint8_t* __restrict__ scales,
                                      size_t blocks, size_t blocks_per_row, size_t scale_cols) {
  constexpr int kBlock = 32;
  constexpr int kN = sizeof(uint4) / sizeof(T);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < blocks;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint4 in[kBlock / kN];
#pragma unroll
    for (int v = 0; v < kBlock / kN; ++v) in[v] = reinterpret_cast<const uint4*>(x + i * kBlock)[v];
    const T* xs = reinterpret_cast<const T*>(in);
    float amax = 0.f;
#pragma unroll
    for (int k = 0; k < kBlock; ++k) amax = fmaxf(amax, fabsf(to_float(xs[k])));
    const uint8_t e = float_to_e8m0(amax * (1.f / 448.f), E8M0Rounding::kUp);
    const float inv = exp2f(127.f - static_cast<float>(e));
    uint4 out[2];
    uint8_t* codes = reinterpret_cast<uint8_t*>(out);
#pragma unroll
    for (int k = 0; k < kBlock; ++k) codes[k] = from_float<fp8e4m3_t>(to_float(xs[k]) * inv).bits;
    reinterpret_cast<uint4*>(z + i * kBlock)[0] = out[0];
    reinterpret_cast<uint4*>(z + i * kBlock)[1] = out[1];
    scales[(i / blocks_per_row) * scale_cols + i % blocks_per_row] = e;
  }
}

constexpr int kThreads = 512;

unsigned grid_for(size_t n, int sm_count) {
  const size_t blocks = std::min<size_t>((n + kThreads - 1) / kThreads, static_cast<size_t>(sm_count) * 8);
  return static_cast<unsigned>(std::max<size_t>(blocks, 1));
}

}  // namespace

namespace {
// fn(T{}) with T the element type of t (bf16, fp16 or fp32): the one dtype switch of the
// quantizing baselines.
template <typename Fn>
void with_wide_type(DType t, const char* what, Fn&& fn) {
  switch (t) {
    case DType::kBFloat16: return fn(bf16_t{});
    case DType::kFloat16: return fn(fp16_t{});
    case DType::kFloat32: return fn(float{});
    default: NORMTUNE_ERROR(what, ": input ", dtype_name(t), ": expected bf16, fp16 or fp32");
  }
}
}  // namespace

void launch_cast_fp8(const void* a, const void* b, DType t, void* c, void* d, size_t elements, int sm_count,
                     cudaStream_t stream) {
  const size_t nvec = dtype_storage_bytes(t, elements) / sizeof(uint4);
  with_wide_type(t, "launch_cast_fp8", [&](auto tag) {
    cast_fp8_kernel<decltype(tag)><<<grid_for(nvec, sm_count), kThreads, 0, stream>>>(
        static_cast<const uint4*>(a), static_cast<const uint4*>(b), static_cast<uint4*>(c), static_cast<uint8_t*>(d),
        nullptr, nvec);
  });
  NORMTUNE_CHECK_LAUNCH();
}

void launch_cast_fp8_twice(const void* a, DType t, void* d, void* e, size_t elements, int sm_count,
                           cudaStream_t stream) {
  const size_t nvec = dtype_storage_bytes(t, elements) / sizeof(uint4);
  with_wide_type(t, "launch_cast_fp8_twice", [&](auto tag) {
    cast_fp8_kernel<decltype(tag)><<<grid_for(nvec, sm_count), kThreads, 0, stream>>>(
        static_cast<const uint4*>(a), nullptr, nullptr, static_cast<uint8_t*>(d), static_cast<uint8_t*>(e), nvec);
  });
  NORMTUNE_CHECK_LAUNCH();
}

void launch_mxfp8_quantize(const void* x, DType t, void* z, void* scales, size_t rows, size_t hidden,
                           size_t scale_cols, int sm_count, cudaStream_t stream) {
  const size_t blocks = rows * hidden / 32;
  with_wide_type(t, "launch_mxfp8_quantize", [&](auto tag) {
    using T = decltype(tag);
    mxfp8_quantize_kernel<T><<<grid_for(blocks, sm_count), kThreads / 2, 0, stream>>>(
        static_cast<const T*>(x), static_cast<uint8_t*>(z), static_cast<uint8_t*>(scales), blocks, hidden / 32,
        scale_cols);
  });
  NORMTUNE_CHECK_LAUNCH();
}

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
