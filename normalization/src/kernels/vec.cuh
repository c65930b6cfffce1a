// Vectors of kN elements moved with the widest aligned loads and stores (16 bytes when the
// data allows it).
#pragma once

#include <normtune/common/numeric.h>

namespace normtune {

// Alignment of every kernel's dynamic shared memory (its ring or slices of rows, filled 16 bytes
// at a time by cp.async and read back as 16-byte vectors): the static shared variables before it
// are padded to this. The offset the static variables left mattered on the H200 (session 38,
// docs/perf/h200_2026-12-04_s38): a general FP8 RMSNorm ring at offset 592 (16 bytes off a
// 32-byte boundary) ran 14% slower than at 576 (ncu, 8192 x 32768: 243.9 against 213.7 µs), and
// at 640 (128-aligned) 5% faster than at 576 (tools/ab.sh: 214.2 -> 203.4 µs); the long-row
// pipelined lines gained up to 13% (LayerNorm NVFP4 4096 x 65536 381.2 -> 331.2 µs).
inline constexpr int kDynamicSmemAlign = 128;

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
// x is taken by value: one vector load when it lives in memory (shared memory, a stage),
// where the word-wise reads of a reference would each be a load.
template <typename T, int kN>
__device__ __forceinline__ void unpack_floats(const Vec<T, kN> x, float (&f)[kN]) {
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

// 16-bit z (bf16, fp16) of an even count of elements: converted two per instruction into
// 32-bit words (element 2i in the low half of word i) and stored as words. Through
// Vec<O, kN>'s 16-bit elements the compiler takes each converted pair apart and builds it
// again (a byte permute per element).
template <typename O, int kN>
inline constexpr bool kHalfWords =
    (Elem<O>::kDType == DType::kBFloat16 || Elem<O>::kDType == DType::kFloat16) && (kN == 2 || kN == 4 || kN == 8);

template <typename O, int kN>
__device__ __forceinline__ void pack_halves(const float (&y)[kN], uint32_t (&w)[kN / 2]) {
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) {
    w[i] = Elem<O>::kDType == DType::kBFloat16 ? platform::cvt_f32x2_to_bf16x2(y[2 * i], y[2 * i + 1])
                                               : platform::cvt_f32x2_to_f16x2(y[2 * i], y[2 * i + 1]);
  }
}

// The values pack_halves stored, back as floats (exact).
template <typename O, int kN>
__device__ __forceinline__ void unpack_halves(const uint32_t (&w)[kN / 2], float (&f)[kN]) {
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) {
    if constexpr (Elem<O>::kDType == DType::kBFloat16) {
      f[2 * i] = bits_float(w[i] << 16);
      f[2 * i + 1] = bits_float(w[i] & 0xFFFF0000u);
    } else {
      f[2 * i] = platform::cvt_f16_to_f32(static_cast<uint16_t>(w[i] & 0xFFFFu));
      f[2 * i + 1] = platform::cvt_f16_to_f32(static_cast<uint16_t>(w[i] >> 16));
    }
  }
}

// 1, 2 or 4 words at dst (aligned to their size) in one store.
template <int kWords>
__device__ __forceinline__ void store_words(const uint32_t (&w)[kWords], void* dst) {
  static_assert(kWords == 1 || kWords == 2 || kWords == 4, "one store of 4, 8 or 16 bytes");
  if constexpr (kWords == 1) {
    *reinterpret_cast<uint32_t*>(dst) = w[0];
  } else if constexpr (kWords == 2) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
  } else {
    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// convert_floats(y) stored at dst (aligned to alignof(Vec<O, kN>)). 16-bit z as words (see
// pack_halves). FP8 codes where the GPU
// converts two at once: the pairs put together four to a 32-bit word with one byte
// permutation and stored as words (through Vec<O, kN>'s bytes the compiler takes the pairs
// apart byte by byte and builds them again: more instructions than the conversions).
template <typename O, int kN>
__device__ __forceinline__ void store_floats(const float (&y)[kN], O* dst) {
  if constexpr (kHalfWords<O, kN>) {
    uint32_t w[kN / 2];
    pack_halves<O>(y, w);
    store_words(w, dst);
    return;
  }
#if NORMTUNE_HAS_FP8_CONVERT
  if constexpr (kIsFp8<O> && (kN == 4 || kN == 8 || kN == 16)) {
    uint32_t w[kN / 4];
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) {
      const float* q = y + 4 * i;
      w[i] = Elem<O>::kDType == DType::kFloat8E4M3 ? platform::cvt_f32x4_to_e4m3x4(q[0], q[1], q[2], q[3])
                                                   : platform::cvt_f32x4_to_e5m2x4(q[0], q[1], q[2], q[3]);
    }
    store_words(w, dst);
    return;
  }
#endif
  Vec<O, kN> out;
  convert_floats(y, out);
  out.store(dst);
}

}  // namespace normtune
