// Element types as kernels see them: 16-bit floats as distinct storage structs, with fast
// conversions to and from fp32 (hardware instructions where the platform has them; the
// same round-to-nearest-even results as convert.h).
#pragma once

#include <cstdint>

#include <normtune/common/convert.h>
#include <normtune/common/dtype.h>
#include <normtune/common/platform.h>

namespace normtune {

struct bf16_t {
  uint16_t bits;
};
struct fp16_t {
  uint16_t bits;
};
struct fp8e4m3_t {
  uint8_t bits;
};
struct fp8e5m2_t {
  uint8_t bits;
};
// One e2m1 value (in the low nibble). Arrays of e2m1 are packed two per byte: kernels that
// write them address bytes, never fp4e2m1_t arrays.
struct fp4e2m1_t {
  uint8_t bits;
};

template <typename T>
struct Elem;

template <>
struct Elem<float> {
  static constexpr DType kDType = DType::kFloat32;
  NORMTUNE_HD_INLINE static float to_float(float v) { return v; }
  NORMTUNE_HD_INLINE static float from_float(float v) { return v; }
};

template <>
struct Elem<bf16_t> {
  static constexpr DType kDType = DType::kBFloat16;
  NORMTUNE_HD_INLINE static float to_float(bf16_t v) { return bits_float(uint32_t{v.bits} << 16); }
  NORMTUNE_HD_INLINE static bf16_t from_float(float v) { return {platform::cvt_f32_to_bf16(v)}; }
};

template <>
struct Elem<fp16_t> {
  static constexpr DType kDType = DType::kFloat16;
  NORMTUNE_HD_INLINE static float to_float(fp16_t v) { return platform::cvt_f16_to_f32(v.bits); }
  NORMTUNE_HD_INLINE static fp16_t from_float(float v) { return {platform::cvt_f32_to_f16(v)}; }
};

// fp8: saturating conversions (values beyond the format's largest finite value, and +-inf,
// give +-max; NaN gives 0x7F), as TransformerEngine's FP8 outputs.
template <>
struct Elem<fp8e4m3_t> {
  static constexpr DType kDType = DType::kFloat8E4M3;
  NORMTUNE_HD_INLINE static float to_float(fp8e4m3_t v) { return fp8e4m3_to_float(v.bits); }
  NORMTUNE_HD_INLINE static fp8e4m3_t from_float(float v) {
#if NORMTUNE_HAS_FP8_CONVERT
    return {platform::cvt_f32_to_e4m3(v)};
#else
    return {float_to_fp8e4m3(v)};
#endif
  }
};

template <>
struct Elem<fp8e5m2_t> {
  static constexpr DType kDType = DType::kFloat8E5M2;
  NORMTUNE_HD_INLINE static float to_float(fp8e5m2_t v) { return fp8e5m2_to_float(v.bits); }
  NORMTUNE_HD_INLINE static fp8e5m2_t from_float(float v) {
#if NORMTUNE_HAS_FP8_CONVERT
    return {platform::cvt_f32_to_e5m2(v)};
#else
    return {float_to_fp8e5m2(v)};
#endif
  }
};

template <>
struct Elem<fp4e2m1_t> {
  static constexpr DType kDType = DType::kFloat4E2M1;
  NORMTUNE_HD_INLINE static float to_float(fp4e2m1_t v) { return fp4e2m1_to_float(v.bits); }
  NORMTUNE_HD_INLINE static fp4e2m1_t from_float(float v) { return {float_to_fp4e2m1(v)}; }
};

template <typename T>
inline constexpr bool kIsFp8 = Elem<T>::kDType == DType::kFloat8E4M3 || Elem<T>::kDType == DType::kFloat8E5M2;

template <typename T>
NORMTUNE_HD_INLINE float to_float(T v) {
  return Elem<T>::to_float(v);
}
template <typename T>
NORMTUNE_HD_INLINE T from_float(float v) {
  return Elem<T>::from_float(v);
}

}  // namespace normtune
