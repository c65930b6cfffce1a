// Block-scaled outputs of the forward (z's scaling mode), as one description: elements per
// block, the scale's dtype and tensor shape, where a block's scale goes, and how a block's
// scale and multiplier follow from its max |value|. Host and device code: the kernels, the
// C API's checks and the tests' references use the same functions.
//
//   MXFP8 (NVTE_MXFP8_1D_SCALING): fp8 codes, an E8M0 scale per 1x32 block (mx_scale.h).
//   MXFP4 (NVTE_NORMTUNE_MXFP4_1D_SCALING, normtune's): e2m1 codes packed two per byte, an
//     E8M0 scale per 1x32 block: E = e8m0 of amax * (1 / 6) rounded up, codes = e2m1(value *
//     2^(127 - E)): the round-up rule of TransformerEngine's MXFP8 quantizer (mx_scale.h) and
//     of FlashInfer's MXFP4, which never saturates a block's largest value. (OCP MX v1.0's
//     example rule, 2^(floor(log2 amax) - 2), can give half the scale and saturate: e.g. amax
//     7 gets scale 2 here, 1 there; the bytes differ, both decode correctly.)
//   NVFP4 (NVTE_NVFP4_1D_SCALING, TransformerEngine 2.18's definitions): e2m1 codes, an E4M3
//     scale per 1x16 block and a per-tensor encode scale from the global amax (z's amax, an
//     input: the caller's amax of this tensor, from a previous pass or step):
//       S_enc  = 448 * 6 / global_amax (FLT_MAX at most; 1 when the amax is 0 or inf,
//                or when there is none),
//       S_dec  = e4m3(block_amax * (S_enc * (1 / 6))), round to nearest even, saturating,
//       codes  = e2m1(value * min(1 / (float(S_dec) * (1 / S_enc)), FLT_MAX)),
//     the product rounded to fp32 and then to e2m1, as TransformerEngine's quantizer does
//     (the staged kernels' tuned lines of one CTA per row round the exact product once
//     instead, BlockQuantizer::block_codes: a code differs only where the product lies
//     within half an fp32 ulp of a midpoint of the e2m1 grid).
//     A dequantizing reader computes code * S_dec / S_enc.
//   FP8 1x128 (NVTE_BLOCK_SCALING_1D, TransformerEngine's Float8BlockScaling row-wise data):
//     fp8 codes, an fp32 scale_inv per 1x128 block, amax epsilon 0, scales not forced to
//     powers of two (the C API's defaults; TE's PyTorch Float8BlockScaling recipe forces
//     powers of two by default, so its bytes differ). hidden need not be a multiple of 128
//     (as in TE): a row's last block may be partial, its amax and scale over the elements it
//     has (hidden a multiple of 16, block_hidden_multiple):
//       scale = fp8_max / amax (FLT_MAX at most; 1 when the amax is 0, inf or NaN),
//       codes = fp8(value * scale),  scale_inv = 1 / scale (rounded from double).
// Scale tensors (row-wise, for [rows, hidden] data), as TransformerEngine allocates them:
//   MXFP8, MXFP4: e8m0 [roundup(rows, 128), roundup(hidden / 32, 4)]
//   NVFP4:        e4m3 [roundup(rows, 128), roundup(hidden / 16, 4)]
//     compact (row-major) or, with kNVTEWithGEMMSwizzledScales, in the 128x4 tiles of 512
//     scales cuBLAS reads (mx_scale_offset's formula);
//   FP8 1x128:    fp32 [ceil(hidden / 128), roundup(rows, 4)], the transpose TE calls GEMM-ready:
//     the scale of (row, block b) at b * roundup(rows, 4) + row.
// The padding of a scale tensor is never written. e2m1 codes: element 2i in the low nibble of
// byte i, element 2i + 1 in the high nibble (TransformerEngine's and FlashInfer's layout).
// NaN values (a NaN in x makes its whole row NaN): they do not enter their block's amax (a
// block of them gets an all-zero block's scale: E8M0 0, E4M3 0, scale_inv 1), and their
// code is +6 (0x7) in e2m1 (which has no NaN), NaN (0x7F) in fp8.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include <normtune/registry/norm_key.h>

#include "mx_scale.h"

namespace normtune {

inline constexpr int kNvfp4Block = 16;
inline constexpr int kFp8Block128 = 128;

// Elements per block of a block-scaled z (0 for kNone: not block-scaled).
constexpr int block_elements(ScalingMode m) {
  switch (m) {
    case ScalingMode::kMxfp8_1D:
    case ScalingMode::kMxfp4_1D: return kMxBlock;
    case ScalingMode::kNvfp4_1D: return kNvfp4Block;
    case ScalingMode::kBlock1D: return kFp8Block128;
    default: return 0;
  }
}

constexpr bool is_block_scaled(ScalingMode m) { return block_elements(m) > 0; }

// The dtype of a block's scale.
constexpr DType block_scale_dtype(ScalingMode m) {
  switch (m) {
    case ScalingMode::kNvfp4_1D: return DType::kFloat8E4M3;
    case ScalingMode::kBlock1D: return DType::kFloat32;
    default: return DType::kFloat8E8M0;
  }
}

// What hidden must be a multiple of: the block, but 16 for FP8 1x128, whose last block of a
// row may be partial (16: 16-byte rows of x in every dtype, 16-byte rows of fp8 z).
constexpr int block_hidden_multiple(ScalingMode m) { return m == ScalingMode::kBlock1D ? 16 : block_elements(m); }

// Blocks per row (the last one partial when hidden is not a multiple of the block).
constexpr int64_t blocks_per_row(ScalingMode m, int64_t hidden) {
  return (hidden + block_elements(m) - 1) / block_elements(m);
}

// Whether z's codes are e2m1 (else fp8).
constexpr bool block_codes_fp4(ScalingMode m) { return m == ScalingMode::kNvfp4_1D || m == ScalingMode::kMxfp4_1D; }

// The row-wise scale tensor's shape.
constexpr int64_t block_scale_rows(ScalingMode m, int64_t rows, int64_t hidden) {
  return m == ScalingMode::kBlock1D ? blocks_per_row(m, hidden) : mx_scale_rows(rows);
}
constexpr int64_t block_scale_cols(ScalingMode m, int64_t rows, int64_t hidden) {
  if (m == ScalingMode::kBlock1D) return (rows + 3) / 4 * 4;
  return (hidden / block_elements(m) + 3) / 4 * 4;
}

// Offset of the scale of (row, block) in the row-wise scale tensor: a row's part plus a
// block's part (a kernel walking a row's blocks computes the first once).
NORMTUNE_HD_INLINE int64_t block_scale_row_part(ScalingMode m, int64_t row, int64_t hidden, bool swizzled) {
  if (m == ScalingMode::kBlock1D) return row;
  const int64_t cols = (hidden / block_elements(m) + 3) / 4 * 4;
  if (!swizzled) return row * cols;
  return (row / 128) * (cols / 4) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4;  // 128 x 4 tiles of 512
}
NORMTUNE_HD_INLINE int64_t block_scale_block_part(ScalingMode m, int block, int64_t rows, bool swizzled) {
  if (m == ScalingMode::kBlock1D) return block * ((rows + 3) / 4 * 4);
  return swizzled ? (block / 4) * 512 + block % 4 : block;
}
NORMTUNE_HD_INLINE int64_t block_scale_offset(ScalingMode m, int64_t row, int64_t block, int64_t rows, int64_t hidden,
                                              bool swizzled) {
  return block_scale_row_part(m, row, hidden, swizzled) +
         block_scale_block_part(m, static_cast<int>(block), rows, swizzled);
}

// Whether z of this format may also have column-wise data (MXFP8: [rows, hidden] with 32x1
// blocks, mx_scale.h; NVFP4: the transpose, below).
constexpr bool has_colwise_format(ScalingMode m) { return m == ScalingMode::kMxfp8_1D || m == ScalingMode::kNvfp4_1D; }

// NVFP4 column-wise data, as TransformerEngine lays it out: the transpose [hidden, rows]
// quantized row-wise (16x1 blocks down a column of z are 1x16 blocks of the transpose's row;
// rows a multiple of 16): the codes of column c, rows 2i and 2i + 1, in byte c * rows / 2 + i
// (low nibble first); the E4M3 scales are the transpose's row-wise ones, [roundup(hidden, 128),
// roundup(rows / 16, 4)], compact or swizzled; the encode scale from the column-wise global
// amax (z.columnwise_amax; none: z.amax's).
constexpr int64_t nvfp4_colwise_scale_rows(int64_t hidden) { return (hidden + 127) / 128 * 128; }
constexpr int64_t nvfp4_colwise_scale_cols(int64_t rows) { return (rows / kNvfp4Block + 3) / 4 * 4; }
// Offset of the column-wise scale of (16-row block rb, column c).
NORMTUNE_HD_INLINE int64_t nvfp4_colwise_scale_offset(int64_t rb, int64_t c, int64_t rows, int64_t hidden,
                                                      bool swizzled) {
  return block_scale_offset(ScalingMode::kNvfp4_1D, c, rb, hidden, rows, swizzled);
}

// ---- e2m1 codes ---------------------------------------------------------------------------

// float_to_fp4e2m1 (convert.h) without branches, for the kernels: round to nearest even on
// the grid {0, 0.5, 1, 1.5, 2, 3, 4, 6}, saturating; NaN gives 0x7 (+6), -0 and values that
// round to zero keep their sign. Hopper has no e2m1 conversion instruction; this is three
// fused adds and a three-way min for the magnitude (five instructions in the SASS). |x| goes onto a uniform grid whose integers are
// the codes: the concave t = min(2|x|, |x| + 2, |x| / 2 + 4, 7) (codes 0.5 apart below 2, 1
// apart below 4, 2 above). Each line is rounded to an integer inside its fused multiply-add
// by the 2^23 added to it (nearest even: a code's parity is its mantissa bit's, so e2m1's
// ties go the same way), and the min is taken of the rounded lines (rounding is monotonic,
// so that is the rounded min), as integers (positive floats order as their bits; a NaN's
// bits are above every number's, so NaN gives 7). The code is then the low 3 bits.
// fp4e2m1_magnitude is the magnitude's part: the code of |x| in the low 3 bits (the bits above
// are those of the float 2^23, garbage to the caller).
NORMTUNE_HD_INLINE uint32_t fp4e2m1_magnitude(float x) {
  constexpr float kMagic = 8388608.f;  // 2^23: its ulp is 1
  const float a = fabsf(x);
  const uint32_t lo = float_bits(fmaf(a, 2.f, kMagic)), mid = float_bits(a + (kMagic + 2.f)),
                 hi = float_bits(fmaf(a, 0.5f, kMagic + 4.f));
  return detail::min_u32(detail::min_u32(lo, mid), detail::min_u32(hi, float_bits(kMagic + 7.f)));
}
NORMTUNE_HD_INLINE uint32_t fp4e2m1_code(float x) {
  const uint32_t sign = x == x ? (float_bits(x) >> 28) & 0x8u : 0u;
  return (fp4e2m1_magnitude(x) & 0x7u) | sign;
}

// The codes of kN values, value k in bits 4k..4k+3 (kN <= 8), each as fp4e2m1_code gives it.
// kCanonicalNan: the caller's values came out of a float multiply, and on an NVIDIA GPU every
// NaN such an instruction produces is the canonical 0x7FFFFFFF, sign clear; the sign is then
// taken from the bits without fp4e2m1_code's NaN test (two of the eleven instructions per
// code in the SASS). The host and AMD GPUs (which keep a NaN's sign) make the test.
template <bool kCanonicalNan, int kN>
NORMTUNE_HD_INLINE uint32_t fp4e2m1_codes(const float (&y)[kN]) {
  static_assert(kN >= 1 && kN <= 8, "eight 4-bit codes per 32-bit word");
  uint32_t w = 0;
#if defined(__CUDA_ARCH__)
  constexpr bool kSignFromBits = kCanonicalNan;
#else
  constexpr bool kSignFromBits = false;
#endif
  for (int k = 0; k < kN; ++k) {  // (unrolled by the compiler: no pragma in host-compiled code)
    const uint32_t code =
        kSignFromBits ? (fp4e2m1_magnitude(y[k]) & 0x7u) | ((float_bits(y[k]) >> 28) & 0x8u) : fp4e2m1_code(y[k]);
    w |= code << (4 * k);
  }
  return w;
}

// __byte_perm: byte n of the result is byte (s >> 4n) & 7 of the eight bytes of b:a (a the
// low four); the host's form for the CPU tests.
NORMTUNE_HD_INLINE uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __byte_perm(a, b, s);
#else
  const uint64_t v = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n)
    r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xFFu) << (8 * n);
  return r;
#endif
}

// byte_perm with PTX prmt's sign mode as well: a selector nibble with bit 3 set gives the
// selected byte's top bit copied into all eight (0xFF or 0), as one PRMT.
NORMTUNE_HD_INLINE uint32_t byte_perm_signs(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
#else
  const uint64_t v = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) {
    const uint32_t sel = (s >> (4 * n)) & 0xFu;
    uint32_t byte = static_cast<uint32_t>(v >> (8 * (sel & 7u))) & 0xFFu;
    if (sel & 8u) byte = byte & 0x80u ? 0xFFu : 0u;
    r |= byte << (8 * n);
  }
  return r;
#endif
}

// The codes of kN values times m (kN 4 or 8, packed as fp4e2m1_codes packs them), for a block
// whose every |value| * m is below 7 or NaN (the caller checks its max |value| * m): the codes
// of the exact products v * m, each rounded once (so the same codes as fp4e2m1_codes<
// kCanonicalNan> of the fp32 products whenever those are exact: m a power of two, MXFP4's
// multiplier; NVFP4's is not, and a product within half an fp32 ulp of a midpoint of the grid
// may get the other neighbour there), with no multiply and in about two thirds of the
// instructions. m enters the three lines of fp4e2m1_magnitude as their slopes (2m, m, m / 2:
// exact for a normal m / 2, 2m finite for m <= 2^126), and a value below 7 keeps every line
// below 2^23 + 8, so the clamp to 7 is not needed: the code is the low byte of the lines' min
// (NaN: 0xFF, masked to 7 below). The eight bytes are then
// gathered two words at a time with byte permutes (even values' codes in one word, odd
// ones' in the other), and the signs likewise from the values' top bytes, instead of a shift
// and a mask for each code.
template <bool kCanonicalNan, int kN>
NORMTUNE_HD_INLINE uint32_t fp4e2m1_codes_below7(const float (&v)[kN], float m) {
  static_assert(kN == 4 || kN == 8, "four or eight values: two or four bytes of codes");
  constexpr float kMagic = 8388608.f;  // 2^23
  uint32_t mag[kN], top[kN];
  for (int k = 0; k < kN; ++k) {
    const float a = fabsf(v[k]);
    const uint32_t lo = float_bits(fmaf(a, 2.f * m, kMagic)),
                   mid = float_bits(fmaf(a, m, kMagic + 2.f)),
                   hi = float_bits(fmaf(a, 0.5f * m, kMagic + 4.f));
#if defined(__CUDA_ARCH__)
    constexpr bool kNanBitsKnown = kCanonicalNan;  // 0x7FFFFFFF: low byte 0xFF, sign clear
#else
    constexpr bool kNanBitsKnown = false;
#endif
    const bool nan = !kNanBitsKnown && !(v[k] == v[k]);
    mag[k] = nan ? 7u : detail::min_u32(detail::min_u32(lo, mid), hi);
    top[k] = nan ? 0u : float_bits(v[k]);  // (a NaN: +6)
  }
  // Byte 0 of values 0, 2 (4, 6) and of values 1, 3 (5, 7); for four values the upper halves
  // are unused. The signs likewise from the values' top bytes: the odd values' as they are
  // (the sign in bit 7), the even values' spread over their bytes by the permute's sign mode.
  uint32_t even = byte_perm(mag[0], mag[2], 0x5140u), odd = byte_perm(mag[1], mag[3], 0x5140u);
  uint32_t even_sign = byte_perm_signs(top[0], top[2], 0x51FBu),
           odd_sign = byte_perm(top[1], top[3], 0x5173u);
  if constexpr (kN == 8) {
    even = byte_perm(even, byte_perm(mag[4], mag[6], 0x5140u), 0x5410u);
    odd = byte_perm(odd, byte_perm(mag[5], mag[7], 0x5140u), 0x5410u);
    even_sign = byte_perm(even_sign, byte_perm_signs(top[4], top[6], 0x51FBu), 0x5410u);
    odd_sign = byte_perm(odd_sign, byte_perm(top[5], top[7], 0x5173u), 0x5410u);
  }
  // Byte j: value 2j's code in bits 0-2 and its sign in bit 3, value 2j + 1's in bits 4-6 and
  // 7: three bitwise selects with constant masks (a NaN's byte is 0xFF: its low three bits
  // are 7, and what it carries past them is not selected).
  const uint32_t codes = ((odd << 4) & 0xF0F0F0F0u) | (even & 0x0F0F0F0Fu);
  const uint32_t signs = (odd_sign & 0xF0F0F0F0u) | (even_sign & 0x0F0F0F0Fu);
  const uint32_t w = (codes & 0x77777777u) | (signs & 0x88888888u);
  return kN == 8 ? w : w & 0xFFFFu;
}

// ---- NVFP4 --------------------------------------------------------------------------------

inline constexpr float kNvfp4E4M3Max = 448.f;

// S_enc from the global amax.
NORMTUNE_HD_INLINE float nvfp4_encode_scale(float global_amax) {
  const float s = fminf(kNvfp4E4M3Max * kFp4E2M1Max / global_amax, FLT_MAX);  // NaN amax: FLT_MAX
  return global_amax == 0.f || s == 0.f ? 1.f : s;
}

// A block's E4M3 scale code, from its max |value| and S_enc. (amax * (S_enc * (1 / 6)): the
// order of TransformerEngine's quantizer. A product that overflows is inf, which the
// saturating E4M3 conversion takes to 448 as it does FLT_MAX.)
NORMTUNE_HD_INLINE float nvfp4_block_decode_scale(float block_amax, float s_enc) {
  return block_amax * (s_enc * (1.f / kFp4E2M1Max));
}
NORMTUNE_HD_INLINE uint8_t nvfp4_block_scale(float block_amax, float s_enc) {
  return float_to_fp8e4m3(nvfp4_block_decode_scale(block_amax, s_enc));
}

// What a block's values are multiplied by before the e2m1 conversion, from its scale code
// (decoded) and 1 / S_enc.
NORMTUNE_HD_INLINE float nvfp4_block_multiplier(float decoded_scale, float s_dec) {
  return fminf(1.f / (decoded_scale * s_dec), FLT_MAX);
}

// ---- FP8 with 1x128 block scales ----------------------------------------------------------

// A block's scale (what its values are multiplied by) from its max |value|.
NORMTUNE_HD_INLINE float fp8_block_scale(float amax, float fp8_max_value) {
  if (!(amax > 0.f) || amax == INFINITY) return 1.f;  // 0, NaN, inf
  return fminf(fp8_max_value / amax, FLT_MAX);
}
// 1 / scale, computed in double and rounded once to fp32 (TransformerEngine's scale_inv).
NORMTUNE_HD_INLINE float fp8_block_scale_inv(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

}  // namespace normtune
