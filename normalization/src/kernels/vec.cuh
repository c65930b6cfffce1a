// Vectors of kN elements moved with the widest aligned loads and stores (16 bytes when the
// data allows it).
#pragma once

#include <normtune/common/numeric.h>

namespace normtune {

template <typename T, int kN>
struct alignas(sizeof(T) * kN >= 16 ? 16 : sizeof(T) * kN) Vec {
  T v[kN];

  // The caller guarantees the address is aligned to alignof(Vec).
  __device__ __forceinline__ void load(const T* p) { *this = *reinterpret_cast<const Vec*>(p); }
  __device__ __forceinline__ void store(T* p) const { *reinterpret_cast<Vec*>(p) = *this; }
};

template <typename T, int kN>
__device__ __forceinline__ float elem_float(const Vec<T, kN>& x, int i) {
  return to_float(x.v[i]);
}

// out.v[k] = O(y[k]) for every k; FP8 codes two per conversion instruction where the GPU
// has one (the same codes as one at a time).
template <typename O, int kN>
__device__ __forceinline__ void convert_floats(const float (&y)[kN], Vec<O, kN>& out) {
#if NORMTUNE_HAS_FP8_CONVERT
  if constexpr (kIsFp8<O> && kN % 2 == 0) {
#pragma unroll
    for (int k = 0; k < kN; k += 2) {
      const uint16_t two = Elem<O>::kDType == DType::kFloat8E4M3 ? platform::cvt_f32x2_to_e4m3x2(y[k], y[k + 1])
                                                                 : platform::cvt_f32x2_to_e5m2x2(y[k], y[k + 1]);
      out.v[k].bits = static_cast<uint8_t>(two & 0xFFu);
      out.v[k + 1].bits = static_cast<uint8_t>(two >> 8);
    }
  } else
#endif
  {
#pragma unroll
    for (int k = 0; k < kN; ++k) out.v[k] = from_float<O>(y[k]);
  }
}

}  // namespace normtune
