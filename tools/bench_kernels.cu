#include "bench_kernels.h"

#include <type_traits>

#include <normtune/common/error.h>
#include <normtune/common/numeric.h>

#include "normalization/src/kernels/block_scale.h"
#include "normalization/src/kernels/vec.cuh"

namespace normtune::bench {

namespace {

__global__ void empty_kernel() {}

// Reads two arrays, writes one or two (the byte pattern of a backward pass and of a fused
// add forward): 16-byte accesses (launched one per thread: grid_for).
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
// 16-byte vector of T per step (one step per thread: grid_for).
template <typename T>
__global__ void cast_fp8_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ c,
                                uint8_t* __restrict__ d, uint8_t* __restrict__ e, size_t nvec) {
  constexpr int kN = sizeof(uint4) / sizeof(T);
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
    // The kernels' conversion (store_floats: the hardware's two-at-a-time cvt where it has one).
    const T* xs = reinterpret_cast<const T*>(&x);
    float f[kN];
#pragma unroll
    for (int k = 0; k < kN; ++k) f[k] = to_float(xs[k]);
    store_floats(f, reinterpret_cast<fp8e4m3_t*>(d) + i * kN);
    if (e != nullptr) store_floats(f, reinterpret_cast<fp8e4m3_t*>(e) + i * kN);
  }
}

// d = half a byte per element of a (+ b); with b, also c = a + b in T: the bytes of a norm (or
// a fused add) with a 4-bit z, its scales aside (1/16 or 1/32 of the codes), copied: the
// half-bytes are the vector's words folded by XOR, no e2m1 conversion. (With the conversion,
// about 11 instructions per element, this baseline was bound by issue rather than memory: on
// the H200 it took as long as the FP8 cast, which writes twice the bytes.) One 16-byte
// vector of T per step (one step per thread: grid_for).
template <typename T>
__global__ void cast_fp4_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ c,
                                uint8_t* __restrict__ d, uint8_t* __restrict__ e, size_t nvec) {
  constexpr int kN = sizeof(uint4) / sizeof(T);
  using Codes = std::conditional_t<kN == 8, uint32_t, uint16_t>;
  static_assert(2 * sizeof(Codes) == kN, "two e2m1 codes per byte");
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < nvec;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint4 x = a[i];
    T* xs = reinterpret_cast<T*>(&x);
    if (b != nullptr) {
      const uint4 y = b[i];
      const T* ys = reinterpret_cast<const T*>(&y);
#pragma unroll
      for (int k = 0; k < kN; ++k) xs[k] = from_float<T>(to_float(xs[k]) + to_float(ys[k]));
      c[i] = x;
    }
    const uint32_t w = x.x ^ x.y ^ x.z ^ x.w;
    const auto codes = static_cast<Codes>(sizeof(Codes) == 4 ? w : w ^ (w >> 16));
    reinterpret_cast<Codes*>(d)[i] = codes;
    if (e != nullptr) reinterpret_cast<Codes*>(e)[i] = codes;
  }
}

// A separate row-wise block quantization of x [rows, hidden] (kernels/block_scale.h: MXFP8
// e4m3, NVFP4 with the global amax *global_amax, MXFP4, FP8 e4m3 with 1x128 blocks): codes
// into z, scales into scales (compact layout). One block per thread. What an
// unfused norm + quantization runs after the norm.
template <typename T, ScalingMode kMode>
__global__ void block_quantize_kernel(const T* __restrict__ x, uint8_t* __restrict__ z, uint8_t* __restrict__ scales,
                                      const float* __restrict__ global_amax, int64_t rows, int64_t hidden) {
  constexpr int kBlock = block_elements(kMode);
  constexpr bool kFp4 = block_codes_fp4(kMode);
  constexpr int kN = sizeof(uint4) / sizeof(T);
  const int64_t blocks_per_row = hidden / kBlock, blocks = rows * blocks_per_row;
  const float s_enc = kMode == ScalingMode::kNvfp4_1D ? nvfp4_encode_scale(global_amax ? *global_amax : 0.f) : 1.f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < blocks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4* in = reinterpret_cast<const uint4*>(x + i * kBlock);
    float amax = 0.f;
#pragma unroll
    for (int v = 0; v < kBlock / kN; ++v) {
      const uint4 u = in[v];
      const T* xs = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int k = 0; k < kN; ++k) amax = fmaxf(amax, fabsf(to_float(xs[k])));
    }
    const int64_t at = block_scale_offset(kMode, i / blocks_per_row, i % blocks_per_row, rows, hidden, false);
    float mult;
    if constexpr (kMode == ScalingMode::kNvfp4_1D) {
      const uint8_t c = nvfp4_block_scale(amax, s_enc);
      scales[at] = c;
      mult = nvfp4_block_multiplier(fp8e4m3_to_float(c), 1.f / s_enc);
    } else if constexpr (kMode == ScalingMode::kBlock1D) {
      mult = fp8_block_scale(amax, kFp8E4M3Max);
      reinterpret_cast<float*>(scales)[at] = fp8_block_scale_inv(mult);
    } else {
      const uint8_t e = mx_scale_exponent(amax, kFp4 ? kFp4E2M1Max : kFp8E4M3Max);
      scales[at] = e;
      mult = mx_inverse_scale(e);
    }
    // Second pass over the block (from L1/L2): the codes.
#pragma unroll
    for (int v = 0; v < kBlock / kN; ++v) {
      const uint4 u = in[v];
      const T* xs = reinterpret_cast<const T*>(&u);
      float f[kN];
#pragma unroll
      for (int k = 0; k < kN; ++k) f[k] = to_float(xs[k]) * mult;
      if constexpr (kFp4) {
        using Codes = std::conditional_t<kN == 8, uint32_t, uint16_t>;
        reinterpret_cast<Codes*>(z + (i * kBlock + v * kN) / 2)[0] =
            static_cast<Codes>(fp4e2m1_codes</*kCanonicalNan=*/true>(f));
      } else {
        store_floats(f, reinterpret_cast<fp8e4m3_t*>(z + i * kBlock + v * kN));
      }
    }
  }
}

// The baselines' launch: one step per thread, 128-thread CTAs, as many as the steps need (no
// grid-stride walk). Measured on the H200 (bf16, L2 flushed): the 2-read-2-write op at
// 8192x7168 114.6 µs this way against 120.7 for a grid-stride walk on 8 512-thread CTAs per SM,
// 32768x8192 507.7 against 540.7; unrolled walks, 256- and 512-thread CTAs and streaming
// cache hints all lay in between or above. (A copy this way runs as fast as
// cudaMemcpyAsync.) A baseline must be the floor of its bytes, not a weak kernel.
constexpr int kThreads = 128;

unsigned grid_for(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  NORMTUNE_CHECK(blocks <= 0x7fffffffu, "bench baseline: ", n, " steps exceed one grid");
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

void launch_empty(bool extended, cudaStream_t stream) {
  if (extended) {
    (void)platform::launch(empty_kernel, 1, 128, platform::LaunchOptions{.dependent = true}, stream);
  } else {
    empty_kernel<<<1, 128, 0, stream>>>();
  }
}

void launch_cast_fp8(const void* a, const void* b, DType t, void* c, void* d, size_t elements,
                     cudaStream_t stream) {
  const size_t nvec = dtype_storage_bytes(t, elements) / sizeof(uint4);
  with_wide_type(t, "launch_cast_fp8", [&](auto tag) {
    cast_fp8_kernel<decltype(tag)><<<grid_for(nvec), kThreads, 0, stream>>>(
        static_cast<const uint4*>(a), static_cast<const uint4*>(b), static_cast<uint4*>(c),
        static_cast<uint8_t*>(d), nullptr, nvec);
  });
  NORMTUNE_CHECK_LAUNCH();
}

void launch_cast_fp8_twice(const void* a, DType t, void* d, void* e, size_t elements,
                           cudaStream_t stream) {
  const size_t nvec = dtype_storage_bytes(t, elements) / sizeof(uint4);
  with_wide_type(t, "launch_cast_fp8_twice", [&](auto tag) {
    cast_fp8_kernel<decltype(tag)><<<grid_for(nvec), kThreads, 0, stream>>>(
        static_cast<const uint4*>(a), nullptr, nullptr, static_cast<uint8_t*>(d),
        static_cast<uint8_t*>(e), nvec);
  });
  NORMTUNE_CHECK_LAUNCH();
}

void launch_cast_fp4(const void* a, const void* b, DType t, void* c, void* d, size_t elements,
                     cudaStream_t stream) {
  const size_t nvec = dtype_storage_bytes(t, elements) / sizeof(uint4);
  with_wide_type(t, "launch_cast_fp4", [&](auto tag) {
    cast_fp4_kernel<decltype(tag)><<<grid_for(nvec), kThreads, 0, stream>>>(
        static_cast<const uint4*>(a), static_cast<const uint4*>(b), static_cast<uint4*>(c),
        static_cast<uint8_t*>(d), nullptr, nvec);
  });
  NORMTUNE_CHECK_LAUNCH();
}

void launch_cast_fp4_twice(const void* a, DType t, void* d, void* e, size_t elements,
                           cudaStream_t stream) {
  const size_t nvec = dtype_storage_bytes(t, elements) / sizeof(uint4);
  with_wide_type(t, "launch_cast_fp4_twice", [&](auto tag) {
    cast_fp4_kernel<decltype(tag)><<<grid_for(nvec), kThreads, 0, stream>>>(
        static_cast<const uint4*>(a), nullptr, nullptr, static_cast<uint8_t*>(d),
        static_cast<uint8_t*>(e), nvec);
  });
  NORMTUNE_CHECK_LAUNCH();
}

void launch_block_quantize(ScalingMode mode, const void* x, DType t, void* z, void* scales,
                           const float* global_amax, size_t rows, size_t hidden,
                           cudaStream_t stream) {
  NORMTUNE_CHECK(is_block_scaled(mode) && hidden % static_cast<size_t>(block_elements(mode)) == 0,
                 "launch_block_quantize: ", scaling_mode_name(mode), " with hidden ", hidden);
  const size_t blocks = rows * hidden / static_cast<size_t>(block_elements(mode));
  with_wide_type(t, "launch_block_quantize", [&](auto tag) {
    using T = decltype(tag);
    auto launch = [&](auto kernel) {
      kernel<<<grid_for(blocks), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<uint8_t*>(z), static_cast<uint8_t*>(scales),
          global_amax, static_cast<int64_t>(rows), static_cast<int64_t>(hidden));
    };
    switch (mode) {
      case ScalingMode::kMxfp8_1D: return launch(block_quantize_kernel<T, ScalingMode::kMxfp8_1D>);
      case ScalingMode::kNvfp4_1D: return launch(block_quantize_kernel<T, ScalingMode::kNvfp4_1D>);
      case ScalingMode::kMxfp4_1D: return launch(block_quantize_kernel<T, ScalingMode::kMxfp4_1D>);
      default: return launch(block_quantize_kernel<T, ScalingMode::kBlock1D>);
    }
  });
  NORMTUNE_CHECK_LAUNCH();
}

void launch_three_reads(const void* a, const void* b, const void* c, void* d, size_t bytes,
                        cudaStream_t stream) {
  const size_t n = bytes / sizeof(uint4);
  three_reads_kernel<<<grid_for(n), kThreads, 0, stream>>>(
      static_cast<const uint4*>(a), static_cast<const uint4*>(b), static_cast<const uint4*>(c),
      static_cast<uint4*>(d), n);
  NORMTUNE_CHECK_LAUNCH();
}

void launch_two_reads(const void* a, const void* b, void* c, void* d, size_t bytes,
                      cudaStream_t stream) {
  const size_t n = bytes / sizeof(uint4);
  two_reads_kernel<<<grid_for(n), kThreads, 0, stream>>>(
      static_cast<const uint4*>(a), static_cast<const uint4*>(b), static_cast<uint4*>(c),
      static_cast<uint4*>(d), n);
  NORMTUNE_CHECK_LAUNCH();
}

}  // namespace normtune::bench
