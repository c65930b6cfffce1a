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

// f[k] = float(x.v[k]) for every k. bf16 pairs are taken from their 32-bit words (the low
// one shifted up, the high one masked), not element by element through 16-bit extracts.
template <typename T, int kN>
__device__ __forceinline__ void unpack_floats(const Vec<T, kN>& x, float (&f)[kN]) {
  if constexpr (Elem<T>::kDType == DType::kBFloat16 && kN % 2 == 0) {
    uint32_t w[kN / 2];
    static_assert(sizeof(w) == sizeof(x), "two bf16 to a word");
    memcpy(w, &x, sizeof(w));
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) {
      f[2 * i] = bits_float(w[i] << 16);
      f[2 * i + 1] = bits_float(w[i] & 0xFFFF0000u);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kN; ++k) f[k] = to_float(x.v[k]);
  }
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

// convert_floats(y) stored at dst (aligned to alignof(Vec<O, kN>)). FP8 codes where the GPU
// converts two at once: the pairs put together four to a 32-bit word with one byte
// permutation and stored as words (through Vec<O, kN>'s bytes the compiler takes the pairs
// apart byte by byte and builds them again: more instructions than the conversions).
template <typename O, int kN>
__device__ __forceinline__ void store_floats(const float (&y)[kN], O* dst) {
#if NORMTUNE_HAS_FP8_CONVERT
  if constexpr (kIsFp8<O> && (kN == 4 || kN == 8 || kN == 16)) {
    auto two = [](float lo, float hi) -> uint32_t {
      return Elem<O>::kDType == DType::kFloat8E4M3 ? platform::cvt_f32x2_to_e4m3x2(lo, hi)
                                                   : platform::cvt_f32x2_to_e5m2x2(lo, hi);
    };
    uint32_t w[kN / 4];
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) {
      // Bytes 0-1 of the first pair, then bytes 0-1 of the second (their upper halves unread).
      w[i] = __byte_perm(two(y[4 * i], y[4 * i + 1]), two(y[4 * i + 2], y[4 * i + 3]), 0x5410);
    }
    if constexpr (kN == 4) {
      *reinterpret_cast<uint32_t*>(dst) = w[0];
    } else if constexpr (kN == 8) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    }
    return;
  }
#endif
  Vec<O, kN> out;
  convert_floats(y, out);
  out.store(dst);
}

}  // namespace normtune
