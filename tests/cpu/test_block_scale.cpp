// Block-scaled outputs (normalization/src/kernels/block_scale.h): the kernels' branch-free
// e2m1 conversion against the reference conversion, NVFP4's encode scale, block scale and
// multiplier (TransformerEngine 2.18's arithmetic, and the bytes FlashInfer's documented
// formulas give for a small case), FP8 1x128 block scales, and every format's scale tensor
// shape and offsets. Host code, shared with the kernels.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "normalization/src/kernels/block_scale.h"

namespace normtune {
namespace {

// Every fp32 with |x| in [2^-4, 16) (both signs: every rounding boundary of e2m1 and the
// saturation), then random bit patterns over the whole range and the special values.
TEST(Fp4Code, EqualsTheReferenceConversionBitForBit) {
  size_t checked = 0;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t bits = 0x3D800000u; bits < 0x41800000u; ++bits) {
      const float x = bits_float(sign | bits);
      if (fp4e2m1_code(x) != float_to_fp4e2m1(x)) {
        FAIL() << "x = " << x << " (bits " << std::hex << (sign | bits) << "): " << fp4e2m1_code(x) << " vs "
               << int{float_to_fp4e2m1(x)};
      }
      ++checked;
    }
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 4000000; ++i) {
    const float x = bits_float(static_cast<uint32_t>(rng()));
    ASSERT_EQ(fp4e2m1_code(x), float_to_fp4e2m1(x)) << x;
  }
  for (const float x : {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, FLT_MIN, -FLT_MIN, 1e-45f, -1e-45f, FLT_MAX, -FLT_MAX}) {
    EXPECT_EQ(fp4e2m1_code(x), float_to_fp4e2m1(x)) << x;
  }
  EXPECT_GT(checked, 100000000u);
  // The grid and its ties, spelled out: ties go to the even code.
  const float x[] = {0.25f, 0.26f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f, 5.01f, 7.f, -0.1f, -3.f};
  const uint32_t want[] = {0x0, 0x1, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x7, 0x7, 0x8, 0xD};
  for (size_t i = 0; i < std::size(x); ++i) EXPECT_EQ(fp4e2m1_code(x[i]), want[i]) << x[i];
  EXPECT_EQ(fp4e2m1_code(NAN), 0x7u);  // NaN: +6, as the conversion instruction
}

// The packed form: value k's code in bits 4k..4k+3, the same codes as one at a time (on the
// host both instantiations make the NaN test: a negative NaN still gives +6).
TEST(Fp4E2M1Code, CodesPackedEightToAWord) {
  const float y[8] = {0.25f, -0.26f, 0.75f, -1.75f, 2.5f, -5.01f, -NAN, 100.f};
  const float y4[4] = {-0.f, 3.5f, -1.25f, 0.5f};
  uint32_t want = 0, want4 = 0;
  for (int k = 0; k < 8; ++k) want |= fp4e2m1_code(y[k]) << (4 * k);
  for (int k = 0; k < 4; ++k) want4 |= fp4e2m1_code(y4[k]) << (4 * k);
  EXPECT_EQ(want, 0x77F4C290u);  // (spelled out: 0 9 2 C 4 F 7 7 from value 0 up)
  EXPECT_EQ(fp4e2m1_codes<true>(y), want);
  EXPECT_EQ(fp4e2m1_codes<false>(y), want);
  EXPECT_EQ(fp4e2m1_codes<true>(y4), want4);
  EXPECT_EQ(want4, 0x1A68u);
}

// The bounded conversion the kernels use for blocks whose values times the multiplier stay
// below 7 (fp4e2m1_codes_below7): equal to fp4e2m1_codes of the products, for the products
// themselves (m = 1, NVFP4's) over every fp32 of |x| in [2^-4, 7) in groups of eight of
// both signs, and with MXFP4's power-of-two multipliers folded into its lines (from 2^-127,
// a subnormal, to 2^126) on random blocks scaled to fit, NaN (a canonical one: +6) and -0
// among them; four values as well as eight.
TEST(Fp4E2M1Code, BoundedConversionEqualsTheClampedOne) {
  auto check = [](const float(&v)[8], float m) {
    float prod[8];
    for (int k = 0; k < 8; ++k) prod[k] = v[k] * m;
    const uint32_t want = fp4e2m1_codes<false>(prod), got = fp4e2m1_codes_below7<false>(v, m);
    if (got != want) {
      ADD_FAILURE() << std::hex << "codes " << got << ", want " << want << std::dec << " (m " << m
                    << ", v0 " << v[0] << ")";
      return false;
    }
    const float v4[4] = {v[0], v[1], v[2], v[3]};
    float p4[4] = {prod[0], prod[1], prod[2], prod[3]};
    return fp4e2m1_codes_below7<false>(v4, m) == fp4e2m1_codes<false>(p4) ||
           (ADD_FAILURE() << "four values, m " << m, false);
  };
  float v[8];
  int n = 0;
  for (uint32_t bits = 0x3D800000u; bits < 0x40E00000u; bits += 1) {  // [2^-4, 7)
    v[n] = bits_float(bits | ((bits & 0x10u) != 0 ? 0x80000000u : 0u));
    if (++n == 8) {
      n = 0;
      if (!check(v, 1.f)) return;
    }
  }
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::uniform_int_distribution<int> expo(-127, 126);
  for (int i = 0; i < 200000; ++i) {
    const float m = std::ldexp(1.f, expo(rng));
    for (int k = 0; k < 8; ++k) v[k] = unit(rng) * 6.99f / m;  // |v * m| below 7
    if (i % 7 == 0) v[i % 8] = NAN;
    if (i % 11 == 0) v[(i + 3) % 8] = -0.f;
    bool finite = true;
    for (float x : v) finite = finite && !std::isinf(x);
    if (finite && !check(v, m)) return;
  }
  const float ties[8] = {0.25f, -0.75f, 1.25f, -1.75f, 2.5f, -3.5f, 5.f, -6.99f};
  EXPECT_TRUE(check(ties, 1.f));
  EXPECT_EQ(fp4e2m1_codes_below7<false>(ties, 1.f),
            0xF6E4C2A0u);  // (0 A 2 C 4 E 6 F from value 0 up)
}

// NVFP4's multipliers (not powers of two) in the bounded conversion's lines: each code is the
// e2m1 code of the exact product v * m (rounded once, to nearest even on the grid, from the
// product computed in double, where it is exact), over random blocks with multipliers of
// every E4M3 scale code for several global amaxes; and next to each midpoint of the grid
// the products that fp32 rounds onto the midpoint itself, where the exact product decides
// (TransformerEngine's quantizer, which rounds the product to fp32 first, takes the even
// neighbour there; such products are rare: half an fp32 ulp on either side of 7 midpoints).
TEST(Fp4E2M1Code, BoundedConversionRoundsTheExactProduct) {
  auto exact_code = [](float v, float m) -> uint32_t {
    if (std::isnan(v)) return 0x7u;
    const double a = std::fabs(static_cast<double>(v) * m);
    const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    uint32_t c = 0;
    for (uint32_t k = 1; k < 8; ++k) {
      const double mid = (grid[k - 1] + grid[k]) / 2;
      if (a > mid || (a == mid && (k & 1u) == 0)) c = k;
    }
    return c | (std::signbit(v) ? 0x8u : 0u);
  };
  auto check = [&](const float(&v)[8], float m) {
    uint32_t want = 0;
    for (int k = 0; k < 8; ++k) want |= exact_code(v[k], m) << (4 * k);
    const uint32_t got = fp4e2m1_codes_below7<false>(v, m);
    return got == want || (ADD_FAILURE() << std::hex << "codes " << got << ", want " << want << std::dec
                                         << " (m " << m << ", v0 " << v[0] << ")",
                           false);
  };
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::uniform_int_distribution<int> code(1, 0x7E);
  float v[8];
  for (float global_amax : {1.f, 100.f, 2688.f, 3e5f}) {
    const float s_dec = 1.f / nvfp4_encode_scale(global_amax);
    for (int i = 0; i < 40000; ++i) {
      const float m = nvfp4_block_multiplier(fp8e4m3_to_float(static_cast<uint8_t>(code(rng))), s_dec);
      for (int k = 0; k < 8; ++k) v[k] = unit(rng) * 6.99f / m;
      if (i % 7 == 0) v[i % 8] = NAN;
      if (!check(v, m)) return;
    }
  }
  // Values whose fp32 product is a midpoint but whose exact product is not: the bounded
  // conversion gives the exact product's neighbour, the conversion of the fp32 product the
  // even one.
  size_t differ = 0;
  const float m = nvfp4_block_multiplier(fp8e4m3_to_float(0x5B), 1.f / nvfp4_encode_scale(100.f));
  for (float mid : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f}) {
    const float v0 = mid / m;
    for (float s : {-1.f, 1.f}) {
      float w = v0;
      for (int step = 0; step < 4; ++step, w = std::nextafter(w, s * INFINITY)) {
        if (w * m != mid || static_cast<double>(w) * m == mid) continue;
        const float vs[8] = {w, -w, w, -w, w, -w, w, -w};
        float prod[8];
        for (int k = 0; k < 8; ++k) prod[k] = vs[k] * m;
        if (!check(vs, m)) return;
        differ += fp4e2m1_codes<false>(prod) != fp4e2m1_codes_below7<false>(vs, m) ? 1 : 0;
      }
    }
  }
  EXPECT_GT(differ, 0u) << "some products near midpoints round differently from their fp32 roundings";
}

// byte_perm_signs: PTX prmt's default mode, which the e2m1 packing uses to spread the even
// values' signs over their bytes. A selector nibble's low three bits pick one of the eight
// bytes of b:a; with bit 3 set the byte becomes 0xFF if the picked byte's top bit is set,
// else 0. (The host's emulation; on the GPU it is the instruction itself.)
TEST(BytePerm, SignModeReplicatesThePickedBytesTopBit) {
  const uint32_t a = 0x80FF7F01u, b = 0x00800102u;
  // Bytes of b:a, 0..7: 01 7F FF 80 02 01 80 00.
  EXPECT_EQ(byte_perm_signs(a, b, 0x51FBu), 0x017F00FFu);  // sign(a.3), sign(b.3), a.1, b.1
  EXPECT_EQ(byte_perm_signs(a, b, 0xEDCAu), 0xFF0000FFu);  // signs of bytes 2, 4, 5, 6
  EXPECT_EQ(byte_perm_signs(a, b, 0x8899u), 0x00000000u);  // signs of bytes 1 and 0
  // Without bit 3 in any nibble it is byte_perm.
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t x = rng(), y = rng(), s = rng() & 0x7777u;
    EXPECT_EQ(byte_perm_signs(x, y, s), byte_perm(x, y, s)) << std::hex << x << " " << y << " " << s;
  }
}

TEST(Nvfp4Scale, EncodeScaleFromTheGlobalAmax) {
  EXPECT_EQ(nvfp4_encode_scale(2688.f), 1.f);
  EXPECT_EQ(nvfp4_encode_scale(100.f), 2688.f / 100.f);
  EXPECT_EQ(nvfp4_encode_scale(0.f), 1.f);         // no amax yet
  EXPECT_EQ(nvfp4_encode_scale(INFINITY), 1.f);    // 2688 / inf = 0
  EXPECT_EQ(nvfp4_encode_scale(1e-40f), FLT_MAX);  // overflow: the largest float
  EXPECT_EQ(nvfp4_encode_scale(NAN), FLT_MAX);
}

// TransformerEngine's order: block_amax * (S_enc * (1 / 6)), rounded to E4M3 (nearest even,
// saturating); the multiplier 1 / (float(S_dec) * (1 / S_enc)), at most FLT_MAX.
TEST(Nvfp4Scale, BlockScaleAndMultiplier) {
  const float s_enc = nvfp4_encode_scale(100.f);  // 26.88
  // 10 * 26.88 / 6 = 44.8 = 2^5 * 1.4: E4M3 has 1.375 and 1.5 there: 44 (0x63).
  EXPECT_EQ(nvfp4_block_scale(10.f, s_enc), 0x63);
  EXPECT_EQ(fp8e4m3_to_float(0x63), 44.f);
  const float mult = nvfp4_block_multiplier(44.f, 1.f / s_enc);
  EXPECT_EQ(mult, 1.f / (44.f * (1.f / s_enc)));
  EXPECT_NEAR(mult, 26.88 / 44, 1e-6);
  // The largest block: saturated at 448; an all-zero block: scale 0, multiplier FLT_MAX (the
  // codes of zeros stay zero).
  EXPECT_EQ(nvfp4_block_scale(1e30f, s_enc), 0x7E);
  EXPECT_EQ(nvfp4_block_scale(INFINITY, s_enc), 0x7E);
  EXPECT_EQ(nvfp4_block_scale(0.f, s_enc), 0x00);
  EXPECT_EQ(nvfp4_block_multiplier(0.f, 1.f / s_enc), FLT_MAX);
  EXPECT_EQ(fp4e2m1_code(0.f * FLT_MAX), 0u);
  // Every block of random values: the scaled amax lands within e2m1's range (its largest
  // value quantizes to 6 or just below after the E4M3 rounding of the scale).
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.01f, 1000.f);
  for (int i = 0; i < 100000; ++i) {
    const float global = u(rng) * 4.f, amax = global * std::uniform_real_distribution<float>(0.001f, 1.f)(rng);
    const float enc = nvfp4_encode_scale(global);
    const uint8_t sc = nvfp4_block_scale(amax, enc);
    const float scaled = amax * nvfp4_block_multiplier(fp8e4m3_to_float(sc), 1.f / enc);
    ASSERT_GT(scaled, 6.f * 0.9f) << global << " " << amax;  // E4M3 rounds the scale by < 1/16
    ASSERT_LT(scaled, 6.f * 1.1f) << global << " " << amax;
  }
}

// A block quantized with FlashInfer's documented NVFP4 formulas (rmsnorm_fp4quant with
// global_scale = 1: SF = e4m3(global_scale * amax / 6), values * (1 / (SF / global_scale)),
// e2m1 round-to-nearest-even, saturating; element 2i in the low nibble): the bytes written
// out by hand. Our functions, applied as the kernel applies them, give the same bytes.
TEST(Nvfp4Scale, SmallCaseMatchesFlashInferFormulas) {
  const float y[16] = {0.f, 0.25f, 0.3f, 0.75f, 1.f, 1.25f, 1.3f, 1.75f, 2.5f, 2.6f, 3.5f, 5.f, 5.1f, 6.f, -6.f, -0.5f};
  // amax 6, global amax 2688 (S_enc = 1): SF = e4m3(6 * (1 / 6)) = 1.0 = 0x38, multiplier 1.
  const float enc = nvfp4_encode_scale(2688.f);
  const uint8_t sf = nvfp4_block_scale(6.f, enc);
  EXPECT_EQ(sf, 0x38);
  const float mult = nvfp4_block_multiplier(fp8e4m3_to_float(sf), 1.f / enc);
  EXPECT_EQ(mult, 1.f);
  // codes: 0 0 1 2 2 2 3 4 4 5 6 6 7 7 F 9
  const uint8_t want[8] = {0x00, 0x21, 0x22, 0x43, 0x54, 0x66, 0x77, 0x9F};
  for (int i = 0; i < 8; ++i) {
    const uint32_t lo = fp4e2m1_code(y[2 * i] * mult), hi = fp4e2m1_code(y[2 * i + 1] * mult);
    EXPECT_EQ(static_cast<uint8_t>(lo | hi << 4), want[i]) << "byte " << i;
    EXPECT_EQ(pack_fp4x2(float_to_fp4e2m1(y[2 * i]), float_to_fp4e2m1(y[2 * i + 1])), want[i]) << "byte " << i;
  }
}

TEST(Fp8BlockScale, ScaleAndScaleInv) {
  EXPECT_EQ(fp8_block_scale(448.f, 448.f), 1.f);
  EXPECT_EQ(fp8_block_scale(1.f, 448.f), 448.f);
  EXPECT_EQ(fp8_block_scale(3.f, 448.f), 448.f / 3.f);
  EXPECT_EQ(fp8_block_scale(0.f, 448.f), 1.f);  // an all-zero block
  EXPECT_EQ(fp8_block_scale(INFINITY, 448.f), 1.f);
  EXPECT_EQ(fp8_block_scale(NAN, 448.f), 1.f);
  EXPECT_EQ(fp8_block_scale(1e-42f, 448.f), FLT_MAX);  // fp8_max / amax overflows
  EXPECT_EQ(fp8_block_scale(2.f, 57344.f), 28672.f);
  EXPECT_EQ(fp8_block_scale_inv(448.f / 3.f), static_cast<float>(1.0 / static_cast<double>(448.f / 3.f)));
  EXPECT_EQ(fp8_block_scale_inv(1.f), 1.f);
}

TEST(BlockScaleLayout, FormatsShapesAndOffsets) {
  EXPECT_EQ(block_elements(ScalingMode::kNone), 0);
  EXPECT_EQ(block_elements(ScalingMode::kMxfp8_1D), 32);
  EXPECT_EQ(block_elements(ScalingMode::kMxfp4_1D), 32);
  EXPECT_EQ(block_elements(ScalingMode::kNvfp4_1D), 16);
  EXPECT_EQ(block_elements(ScalingMode::kBlock1D), 128);
  EXPECT_EQ(block_elements(ScalingMode::kBlock2D), 0);  // not an output of the norms
  EXPECT_EQ(block_scale_dtype(ScalingMode::kNvfp4_1D), DType::kFloat8E4M3);
  EXPECT_EQ(block_scale_dtype(ScalingMode::kMxfp4_1D), DType::kFloat8E8M0);
  EXPECT_EQ(block_scale_dtype(ScalingMode::kBlock1D), DType::kFloat32);
  EXPECT_TRUE(block_codes_fp4(ScalingMode::kNvfp4_1D) && block_codes_fp4(ScalingMode::kMxfp4_1D));
  EXPECT_FALSE(block_codes_fp4(ScalingMode::kMxfp8_1D) || block_codes_fp4(ScalingMode::kBlock1D));
  // TransformerEngine's shapes for 200 x 7168.
  EXPECT_EQ(block_scale_rows(ScalingMode::kNvfp4_1D, 200, 7168), 256);
  EXPECT_EQ(block_scale_cols(ScalingMode::kNvfp4_1D, 200, 7168), 448);
  EXPECT_EQ(block_scale_cols(ScalingMode::kNvfp4_1D, 200, 16 * 5), 8);  // 5 blocks, padded to 8
  EXPECT_EQ(block_scale_rows(ScalingMode::kMxfp4_1D, 200, 7168), 256);
  EXPECT_EQ(block_scale_cols(ScalingMode::kMxfp4_1D, 200, 7168), 224);
  EXPECT_EQ(block_scale_rows(ScalingMode::kBlock1D, 200, 7168), 56);
  EXPECT_EQ(block_scale_cols(ScalingMode::kBlock1D, 201, 7168), 204);
  // 1x128 with a partial last block (TE: ceildiv(hidden, 128) rows of scales); hidden a
  // multiple of 16 there, of the block elsewhere.
  EXPECT_EQ(block_scale_rows(ScalingMode::kBlock1D, 200, 1040), 9);
  EXPECT_EQ(block_scale_rows(ScalingMode::kBlock1D, 3, 16), 1);
  EXPECT_EQ(blocks_per_row(ScalingMode::kBlock1D, 65648), 513);
  EXPECT_EQ(blocks_per_row(ScalingMode::kNvfp4_1D, 7168), 448);
  EXPECT_EQ(block_hidden_multiple(ScalingMode::kBlock1D), 16);
  EXPECT_EQ(block_hidden_multiple(ScalingMode::kNvfp4_1D), 16);
  EXPECT_EQ(block_hidden_multiple(ScalingMode::kMxfp4_1D), 32);
  EXPECT_EQ(block_hidden_multiple(ScalingMode::kMxfp8_1D), 32);
  // MXFP8's offsets are mx_scale_offset's.
  for (const bool sw : {false, true}) {
    for (int64_t r : {0, 5, 127, 128, 199}) {
      for (int64_t b : {0, 3, 4, 223}) {
        EXPECT_EQ(block_scale_offset(ScalingMode::kMxfp8_1D, r, b, 200, 7168, sw), mx_scale_offset(r, b, 7168, sw));
      }
    }
  }
  // 1x128: the transposed [blocks, roundup(rows, 4)] tensor.
  EXPECT_EQ(block_scale_offset(ScalingMode::kBlock1D, 5, 2, 10, 512, false), 2 * 12 + 5);
  // Every (row, block) of a padded NVFP4 scale tensor gets its own place, compact or
  // swizzled (the 128 x 4 tiles of 512 scales), and the swizzle is the documented formula.
  const int64_t rows = 256, hidden = 16 * 8, cols = block_scale_cols(ScalingMode::kNvfp4_1D, rows, hidden);
  for (const bool sw : {false, true}) {
    std::set<int64_t> seen;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < cols; ++b) {
        const int64_t at = block_scale_offset(ScalingMode::kNvfp4_1D, r, b, rows, hidden, sw);
        ASSERT_GE(at, 0);
        ASSERT_LT(at, rows * cols);
        seen.insert(at);
        if (sw) {
          ASSERT_EQ(at, (r / 128) * (cols / 4) * 512 + (b / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + b % 4);
        } else {
          ASSERT_EQ(at, r * cols + b);
        }
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(rows * cols));
  }
}

// NVFP4's column-wise scales (TransformerEngine's layout: the row-wise scales of the transpose
// [hidden, rows]): [roundup(hidden, 128), roundup(rows / 16, 4)]; the scale of (16-row block
// rb, column c) at c * cols + rb, or swizzled in the transpose's 128 x 4 tiles of 512 scales
// (written out here); every (c, rb) of the padded tensor its own place; MXFP8 and NVFP4 are
// the formats with column-wise data.
TEST(BlockScaleLayout, Nvfp4ColumnwiseShapesAndOffsets) {
  EXPECT_TRUE(has_colwise_format(ScalingMode::kMxfp8_1D) && has_colwise_format(ScalingMode::kNvfp4_1D));
  EXPECT_FALSE(has_colwise_format(ScalingMode::kMxfp4_1D) || has_colwise_format(ScalingMode::kBlock1D) ||
               has_colwise_format(ScalingMode::kNone));
  EXPECT_EQ(nvfp4_colwise_scale_rows(7168), 7168);
  EXPECT_EQ(nvfp4_colwise_scale_rows(2064), 2176);
  EXPECT_EQ(nvfp4_colwise_scale_cols(48), 4);    // 3 blocks -> 4
  EXPECT_EQ(nvfp4_colwise_scale_cols(208), 16);  // 13 -> 16
  EXPECT_EQ(nvfp4_colwise_scale_cols(16), 4);
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{208, 400}, std::pair<int64_t, int64_t>{48, 128},
                                     std::pair<int64_t, int64_t>{1024, 256}}) {
    const int64_t srows = nvfp4_colwise_scale_rows(hidden), scols = nvfp4_colwise_scale_cols(rows);
    for (const bool sw : {false, true}) {
      std::set<int64_t> seen;
      for (int64_t c = 0; c < srows; ++c) {
        for (int64_t rb = 0; rb < scols; ++rb) {
          const int64_t at = nvfp4_colwise_scale_offset(rb, c, rows, hidden, sw);
          const int64_t want = sw ? ((c / 128) * (scols / 4) + rb / 4) * 512 + (c % 32) * 16 + ((c % 128) / 32) * 4 + rb % 4
                                  : c * scols + rb;
          ASSERT_EQ(at, want) << rows << "x" << hidden << " c " << c << " rb " << rb << " swizzled " << sw;
          seen.insert(at);
        }
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(srows * scols)) << rows << "x" << hidden;
      EXPECT_EQ(*seen.rbegin(), srows * scols - 1);
    }
  }
}

}  // namespace
}  // namespace normtune
