// Bit-exact conversions between fp32 and the narrow formats TransformerEngine stores:
// fp16, bf16, fp8 e4m3 / e5m2, e8m0 (MX block scales) and fp4 e2m1.
//
// Every function works on raw bit patterns, so host reference code (g++) and kernels
// (nvcc, hipcc) produce the same bits. Encoding rounds to nearest, ties to even, unless a
// function says otherwise. Where a format has a special case, it follows CUDA's conversion
// (cuda_fp8.hpp, cuda_fp4.hpp, PTX cvt ... .satfinite), except NaN in fp16/bf16 (below).
//
//   format  NaN encodes to         +-inf and finite overflow encode to   CUDA
//   fp16    quiet NaN, sign and    +-inf (IEEE)                          NaN: 0x7FFF
//   bf16    top payload kept       +-inf (IEEE)                          NaN: 0x7FFF
//   e4m3    0x7F                   +-448 (e4m3 has no inf)               same, SATFINITE
//   e5m2    0x7F                   +-57344 saturating, else +-inf        same, SATFINITE/NOSAT
//   e8m0    0xFF                   0xFE = 2^127 saturating, else 0xFF    same, RoundPosInf/Zero
//   e2m1    0x7 (+6)               +-6                                   same, RoundNearest
//
// fp16/bf16 keep the NaN's sign and payload (as IEEE 754 recommends and x86 F16C/AVX512-BF16
// do); CUDA's __float2half_rn/__float2bfloat16_rn return the canonical 0x7FFF instead.
// Compare NaNs by NaN-ness, not by bits, when checking CUDA kernels against this code.
#pragma once

#include <cstddef>
#include <cstdint>

#include <normtune/common/dtype.h>
#include <normtune/common/error.h>
#include <normtune/common/platform.h>

namespace normtune {

NORMTUNE_HD_INLINE uint32_t float_bits(float x) {
  return __builtin_bit_cast(uint32_t, x);
}
NORMTUNE_HD_INLINE float bits_float(uint32_t bits) {
  return __builtin_bit_cast(float, bits);
}

namespace detail {

inline constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
inline constexpr uint32_t kF32Inf = 0x7F800000u;
inline constexpr uint32_t kF32QuietNaN = 0x7FC00000u;

NORMTUNE_HD_INLINE bool is_nan_bits(uint32_t bits) {
  return (bits & kF32AbsMask) > kF32Inf;
}

NORMTUNE_HD_INLINE uint32_t min_u32(uint32_t a, uint32_t b) {
  return a < b ? a : b;
}

// q = round(v / 2^shift), ties to even q; 1 <= shift <= 31.
NORMTUNE_HD_INLINE uint32_t shift_right_rne(uint32_t v, uint32_t shift) {
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rest = v & ((half << 1) - 1);
  const uint32_t q = v >> shift;
  return q + ((rest > half || (rest == half && (q & 1u))) ? 1u : 0u);
}

// Rounds a finite fp32 magnitude (bits without the sign) to nearest-even in a binary format
// with kMan stored mantissa bits, exponent bias kBias and subnormals. The result is the
// format's magnitude code c = e << kMan | m, where
//   value(c) = 2^(e - kBias) * (1 + m / 2^kMan)   for e >= 1
//            = 2^(1 - kBias) * m / 2^kMan         for e == 0.
// Codes grow with the value, so a mantissa that rounds up carries into the exponent. The
// exponent range is unbounded above: the result may exceed the largest finite code, and
// the caller applies the format's overflow rule (inf, saturation) and its NaN rule.
template <int kMan, int kBias>
NORMTUNE_HD_INLINE uint32_t round_fp32_magnitude(uint32_t abs_bits) {
  static_assert(kMan >= 0 && kMan < 23 && kBias >= 1 && kBias <= 127);
  constexpr uint32_t kSubnormalExp = 127 - kBias;  // fp32 exponent field of e == 0
  const uint32_t exp = abs_bits >> 23;
  if (exp > kSubnormalExp) {
    // Normal in the narrow format: rebias the exponent, drop 23 - kMan mantissa bits.
    return shift_right_rne(abs_bits - (kSubnormalExp << 23), 23 - kMan);
  }
  // Subnormal: c = significand * 2^(exp - 150) / 2^(1 - kBias - kMan), with fp32
  // subnormals (exp == 0) scaled as exp == 1 without the implicit bit.
  const uint32_t significand = exp == 0 ? abs_bits : (abs_bits & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 151 - kBias - kMan - (exp == 0 ? 1u : exp);
  // A 24-bit significand shifted by 25 or more is below half of the smallest subnormal.
  return shift > 24 ? 0u : shift_right_rne(significand, shift);
}

// value(c) of round_fp32_magnitude for a finite magnitude code c. Valid where the format's
// subnormals are fp32 normals (all formats here except bf16 and e8m0, decoded directly).
template <int kMan, int kBias>
NORMTUNE_HD_INLINE float decode_magnitude(uint32_t code) {
  const uint32_t exp = code >> kMan;
  const uint32_t man = code & ((1u << kMan) - 1);
  if (exp != 0) return bits_float(((exp + 127 - kBias) << 23) | (man << (23 - kMan)));
  // m * 2^(1 - kBias - kMan): a small integer times a normal power of two, exact even
  // when the device flushes fp32 subnormals.
  return static_cast<float>(man) * bits_float(static_cast<uint32_t>(128 - kBias - kMan) << 23);
}

NORMTUNE_HD_INLINE float with_sign(float magnitude, uint32_t sign_bit31) {
  return bits_float(float_bits(magnitude) | sign_bit31);
}

}  // namespace detail

// ---- fp16 (IEEE binary16: 1.5.10, bias 15, max 65504) ------------------------------------

// Widening is exact; a NaN keeps its sign and payload and becomes quiet.
NORMTUNE_HD_INLINE float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t mag = h & 0x7FFFu;
  if (mag >= 0x7C00u) {
    const uint32_t quiet = mag > 0x7C00u ? 0x400000u : 0u;
    return bits_float(sign | detail::kF32Inf | quiet | ((mag & 0x3FFu) << 13));
  }
  return detail::with_sign(detail::decode_magnitude<10, 15>(mag), sign);
}

// RNE; |x| >= 65520 (max + half an ulp) and +-inf give +-inf.
NORMTUNE_HD_INLINE uint16_t float_to_fp16(float x) {
  const uint32_t bits = float_bits(x);
  const uint32_t abs = bits & detail::kF32AbsMask;
  const uint32_t sign = (bits >> 16) & 0x8000u;
  if (abs > detail::kF32Inf) return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  return static_cast<uint16_t>(sign |
                               detail::min_u32(detail::round_fp32_magnitude<10, 15>(abs), 0x7C00u));
}

// ---- bf16 (1.8.7, the upper half of fp32) -----------------------------------------------

NORMTUNE_HD_INLINE float bf16_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// RNE on the dropped 16 bits; overflow carries into the exponent and gives +-inf as IEEE
// does. A NaN keeps its sign and upper payload and becomes quiet.
NORMTUNE_HD_INLINE uint16_t float_to_bf16(float x) {
  const uint32_t bits = float_bits(x);
  if (detail::is_nan_bits(bits)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  return static_cast<uint16_t>(sign |
                               detail::round_fp32_magnitude<7, 127>(bits & detail::kF32AbsMask));
}

// ---- fp8 e4m3 (OCP E4M3FN, CUDA __nv_fp8_e4m3: 1.4.3, bias 7, no inf, NaN = S.1111.111) ---

inline constexpr float kFp8E4M3Max = 448.0f;

NORMTUNE_HD_INLINE float fp8e4m3_to_float(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t mag = v & 0x7Fu;
  if (mag == 0x7Fu) return bits_float(sign | detail::kF32QuietNaN);
  return detail::with_sign(detail::decode_magnitude<3, 7>(mag), sign);
}

// RNE, saturating: everything above 448 (values in (448, 464] already round to 448) and
// +-inf give +-448, NaN gives 0x7F. This is __nv_cvt_float_to_fp8(x, __NV_SATFINITE,
// __NV_E4M3) (cvt.rn.satfinite.e4m3x2.f32), which also drops the sign of a NaN.
NORMTUNE_HD_INLINE uint8_t float_to_fp8e4m3(float x) {
  const uint32_t bits = float_bits(x);
  if (detail::is_nan_bits(bits)) return 0x7Fu;
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t code = detail::round_fp32_magnitude<3, 7>(bits & detail::kF32AbsMask);
  return static_cast<uint8_t>(sign | detail::min_u32(code, 0x7Eu));
}

// ---- fp8 e5m2 (1.5.2, bias 15, IEEE-like with inf and NaN, max 57344) -------------------

inline constexpr float kFp8E5M2Max = 57344.0f;

NORMTUNE_HD_INLINE float fp8e5m2_to_float(uint8_t v) {
  // e5m2 is the upper byte of fp16.
  return fp16_to_float(static_cast<uint16_t>(v << 8));
}

// RNE. |x| >= 61440 (max + half an ulp) and +-inf overflow: to +-57344 when `saturate`
// (__NV_SATFINITE, TransformerEngine's choice), else to +-inf (__NV_NOSAT). NaN gives 0x7F,
// CUDA's canonical NaN, for both.
NORMTUNE_HD_INLINE uint8_t float_to_fp8e5m2(float x, bool saturate = true) {
  const uint32_t bits = float_bits(x);
  if (detail::is_nan_bits(bits)) return 0x7Fu;
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t code = detail::round_fp32_magnitude<2, 15>(bits & detail::kF32AbsMask);
  const uint32_t overflow = saturate ? 0x7Bu : 0x7Cu;
  return static_cast<uint8_t>(sign | (code > 0x7Bu ? overflow : code));
}

// ---- e8m0 (OCP MX block scale: unsigned, value 2^(v - 127), 0xFF = NaN, no zero) --------

enum class E8M0Rounding {
  kNearestEven,  // nearest power of two (tie at 1.5 * 2^k to the even code); no CUDA twin
  kUp,           // ceil(log2|x|): cudaRoundPosInf, what MX scale computation uses
  kDown,         // floor(log2|x|): cudaRoundZero
};

// 2^(v - 127); v = 0 is 2^-127, an fp32 subnormal.
NORMTUNE_HD_INLINE float e8m0_to_float(uint8_t v) {
  if (v == 0xFFu) return bits_float(detail::kF32QuietNaN);
  return bits_float(v == 0 ? 0x00400000u : static_cast<uint32_t>(v) << 23);
}

// Rounds |x| to a power of two 2^(v - 127), as __nv_cvt_float_to_e8m0 does:
//   - the sign is ignored (scales come from amax >= 0);
//   - |x| <= 2^-127, zero and fp32 subnormals included, gives 0x00 = 2^-127 in every mode;
//   - NaN gives 0xFF;
//   - +-inf, and finite |x| that rounds above 2^127, give 0xFE = 2^127 when `saturate`
//     (__NV_SATFINITE, TransformerEngine's choice), else 0xFF (NaN, __NV_NOSAT).
NORMTUNE_HD_INLINE uint8_t float_to_e8m0(float x, E8M0Rounding mode, bool saturate = true) {
  const uint32_t abs = float_bits(x) & detail::kF32AbsMask;
  if (abs > detail::kF32Inf) return 0xFFu;
  if (abs == detail::kF32Inf) return saturate ? 0xFEu : 0xFFu;
  // |x| = 2^(code - 127) * (1 + frac / 2^23) for fp32 normals.
  uint32_t code = abs >> 23;
  uint32_t frac = abs & 0x7FFFFFu;
  if (code == 0) {
    // fp32 subnormal: |x| = 2^-127 * frac / 2^22.
    if (frac <= 0x400000u) return 0x00u;
    frac = (frac - 0x400000u) << 1;  // now |x| = 2^-127 * (1 + frac / 2^23)
  }
  switch (mode) {
    case E8M0Rounding::kUp:
      code += frac != 0 ? 1u : 0u;
      break;
    case E8M0Rounding::kNearestEven:
      code += (frac > 0x400000u || (frac == 0x400000u && (code & 1u))) ? 1u : 0u;
      break;
    case E8M0Rounding::kDown:
      break;
  }
  // Only a round-up from [2^127, 2^128) reaches 0xFF.
  if (code == 0xFFu && saturate) code = 0xFEu;
  return static_cast<uint8_t>(code);
}

// ---- fp4 e2m1 (1.2.1, bias 1: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no inf/NaN) ---------------

inline constexpr float kFp4E2M1Max = 6.0f;

// Uses the low 4 bits of `nibble`.
NORMTUNE_HD_INLINE float fp4e2m1_to_float(uint8_t nibble) {
  const uint32_t sign = static_cast<uint32_t>(nibble & 0x8u) << 28;
  return detail::with_sign(detail::decode_magnitude<1, 1>(nibble & 0x7u), sign);
}

// RNE, saturating: |x| > 6 and +-inf give +-6; NaN gives 0x7 (+6), as
// __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest) does. Returns a nibble.
NORMTUNE_HD_INLINE uint8_t float_to_fp4e2m1(float x) {
  const uint32_t bits = float_bits(x);
  if (detail::is_nan_bits(bits)) return 0x7u;
  const uint32_t sign = (bits >> 28) & 0x8u;
  const uint32_t code = detail::round_fp32_magnitude<1, 1>(bits & detail::kF32AbsMask);
  return static_cast<uint8_t>(sign | detail::min_u32(code, 0x7u));
}

// Two e2m1 values per byte, element 0 in the low nibble (CUDA's __nv_fp4x2_e2m1 layout).
NORMTUNE_HD_INLINE uint8_t pack_fp4x2(uint8_t element0, uint8_t element1) {
  return static_cast<uint8_t>((element0 & 0xFu) | ((element1 & 0xFu) << 4));
}
NORMTUNE_HD_INLINE uint8_t fp4x2_get(uint8_t packed, unsigned index) {
  return static_cast<uint8_t>((packed >> (4 * (index & 1u))) & 0xFu);
}
NORMTUNE_HD_INLINE uint8_t fp4x2_set(uint8_t packed, unsigned index, uint8_t nibble) {
  const unsigned shift = 4 * (index & 1u);
  return static_cast<uint8_t>((packed & ~(0xFu << shift)) | ((nibble & 0xFu) << shift));
}

// ---- host-side access by runtime dtype --------------------------------------------------
// For reference code: element `index` of an array of `dtype`. fp4 is packed two per byte,
// so `index` counts nibbles. e8m0 stores round up (kUp, saturating), like MX scales; e5m2
// stores saturate like TransformerEngine's casts.

inline float dtype_to_float(DType dtype, const void* ptr, size_t index) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<const float*>(ptr)[index];
    case DType::kFloat16:
      return fp16_to_float(static_cast<const uint16_t*>(ptr)[index]);
    case DType::kBFloat16:
      return bf16_to_float(static_cast<const uint16_t*>(ptr)[index]);
    case DType::kFloat8E4M3:
      return fp8e4m3_to_float(static_cast<const uint8_t*>(ptr)[index]);
    case DType::kFloat8E5M2:
      return fp8e5m2_to_float(static_cast<const uint8_t*>(ptr)[index]);
    case DType::kFloat8E8M0:
      return e8m0_to_float(static_cast<const uint8_t*>(ptr)[index]);
    case DType::kFloat4E2M1:
      return fp4e2m1_to_float(
          fp4x2_get(static_cast<const uint8_t*>(ptr)[index / 2], static_cast<unsigned>(index)));
    default:
      break;
  }
  NORMTUNE_ERROR("dtype_to_float: unsupported dtype ", dtype_name(dtype));
}

inline void float_to_dtype(DType dtype, float value, void* ptr, size_t index) {
  switch (dtype) {
    case DType::kFloat32:
      static_cast<float*>(ptr)[index] = value;
      return;
    case DType::kFloat16:
      static_cast<uint16_t*>(ptr)[index] = float_to_fp16(value);
      return;
    case DType::kBFloat16:
      static_cast<uint16_t*>(ptr)[index] = float_to_bf16(value);
      return;
    case DType::kFloat8E4M3:
      static_cast<uint8_t*>(ptr)[index] = float_to_fp8e4m3(value);
      return;
    case DType::kFloat8E5M2:
      static_cast<uint8_t*>(ptr)[index] = float_to_fp8e5m2(value);
      return;
    case DType::kFloat8E8M0:
      static_cast<uint8_t*>(ptr)[index] = float_to_e8m0(value, E8M0Rounding::kUp);
      return;
    case DType::kFloat4E2M1: {
      uint8_t& byte = static_cast<uint8_t*>(ptr)[index / 2];
      byte = fp4x2_set(byte, static_cast<unsigned>(index), float_to_fp4e2m1(value));
      return;
    }
    default:
      break;
  }
  NORMTUNE_ERROR("float_to_dtype: unsupported dtype ", dtype_name(dtype));
}

}  // namespace normtune
