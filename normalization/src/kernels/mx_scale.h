// MXFP8 block scales (OCP MX, TransformerEngine's quantizer): one E8M0 scale per 32
// consecutive elements. Host and device code (the kernels, the reference, the tests).
//
//   E     = e8m0 of amax / fp8_max, rounded up to a power of two (saturating): the smallest
//           scale 2^(E - 127) that keeps every value of the block within the format;
//   codes = fp8(value * 2^(127 - E)), round to nearest even, saturating;
//   an all-zero block has E = 0 and zero codes; NaN values do not enter amax.
// Scale tensors as TransformerEngine allocates them, row-wise: [roundup(rows, 128),
// roundup(hidden / 32, 4)], compact (row-major) or in the 128x4 tiles cuBLAS reads
// (kNVTEWithGEMMSwizzledScales). Column-wise (32x1 blocks down a column; the data keeps the
// [rows, hidden] layout): [roundup(ceil(rows / 32), 4), roundup(hidden, 128)], compact, or
// swizzled as the row-wise scales of the transpose (a GEMM reads the column-wise operand
// transposed: column c is its row, the 32-row block its 32-element block).
#pragma once

#include <cstdint>

#include <normtune/common/convert.h>
#include <normtune/common/dtype.h>

namespace normtune {

inline constexpr int kMxBlock = 32;

constexpr float fp8_max(DType t) { return t == DType::kFloat8E4M3 ? kFp8E4M3Max : kFp8E5M2Max; }

// The biased exponent E of a block's scale: float_to_e8m0(amax * (1 / fp8_max), kUp) with
// saturation (convert.h), bit for bit, written without branches (the kernels compute one per
// block; tests/cpu/test_mx_scale.cpp checks it against float_to_e8m0). The sign is ignored.
// Adding 0x7FFFFF to the bits carries a nonzero fraction into the exponent field, which is
// rounding up to the next power of two (and takes the largest finite values and inf to 0xFF,
// clamped to 0xFE); left: zero and the subnormals up to 2^-127, and NaN.
NORMTUNE_HD_INLINE uint32_t mx_scale_exponent_u32(float amax, float fp8_max_value) {
  const uint32_t b = float_bits(fabsf(amax) * (1.f / fp8_max_value));
  uint32_t e = (b + 0x7FFFFFu) >> 23;
  e = e < 0xFEu ? e : 0xFEu;           // inf, finite above 2^127: 2^127 (saturated)
  e = b <= 0x400000u ? 0u : e;         // zero, subnormals up to 2^-127: 2^-127
  return b > 0x7F800000u ? 0xFFu : e;  // NaN
}
NORMTUNE_HD_INLINE uint8_t mx_scale_exponent(float amax, float fp8_max_value) {
  return static_cast<uint8_t>(mx_scale_exponent_u32(amax, fp8_max_value));
}

// 2^(127 - E): what a block's values are multiplied by before the conversion (E = 254 gives
// 2^-127, a subnormal; E = 255 is NaN).
NORMTUNE_HD_INLINE float mx_inverse_scale(uint8_t e) {
  const uint32_t normal = (254u - e) << 23;  // (unused for E = 255)
  return bits_float(e == 0xFFu ? 0x7FC00000u : e == 0xFEu ? 0x00400000u : normal);
}

// The same for E <= 254 (a block's amax not NaN, as in the kernels, whose amax is a chain of
// fmaxf from 0, which drops NaN): 0x7F000000 - E * 2^23 is the bits of 2^(127 - E) down to
// E = 253 and 0 at E = 254, which the max lifts to 2^-127's bits. Two instructions where
// mx_inverse_scale takes six.
NORMTUNE_HD_INLINE float mx_inverse_scale_not_nan(uint32_t e) {
  const int32_t normal = 0x7F000000 - static_cast<int32_t>(e << 23);
  return bits_float(static_cast<uint32_t>(normal > 0x400000 ? normal : 0x400000));
}

// The row-wise scale tensor's shape for [rows, hidden] data.
constexpr int64_t mx_scale_rows(int64_t rows) { return (rows + 127) / 128 * 128; }
constexpr int64_t mx_scale_cols(int64_t hidden) { return (hidden / kMxBlock + 3) / 4 * 4; }

// Offset of the scale of (row, block) in the scale tensor.
NORMTUNE_HD_INLINE int64_t mx_scale_offset(int64_t row, int64_t block, int64_t hidden, bool swizzled) {
  if (!swizzled) return row * mx_scale_cols(hidden) + block;
  const int64_t tiles_x = mx_scale_cols(hidden) / 4;  // 128 x 4 tiles of 512 bytes
  return ((row / 128) * tiles_x + block / 4) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 + block % 4;
}

// The column-wise scale tensor's shape for [rows, hidden] data.
constexpr int64_t mx_colwise_scale_rows(int64_t rows) { return ((rows + kMxBlock - 1) / kMxBlock + 3) / 4 * 4; }
constexpr int64_t mx_colwise_scale_cols(int64_t hidden) { return (hidden + 127) / 128 * 128; }

// Offset of the column-wise scale of (32-row block rb, column c).
NORMTUNE_HD_INLINE int64_t mx_colwise_scale_offset(int64_t rb, int64_t c, int64_t rows, int64_t hidden, bool swizzled) {
  if (!swizzled) return rb * mx_colwise_scale_cols(hidden) + c;
  const int64_t tiles_x = mx_colwise_scale_rows(rows) / 4;  // the transpose's 4-block tiles
  return ((c / 128) * tiles_x + rb / 4) * 512 + (c % 32) * 16 + ((c % 128) / 32) * 4 + rb % 4;
}

}  // namespace normtune
