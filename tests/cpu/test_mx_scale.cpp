// MXFP8 block scales (normalization/src/kernels/mx_scale.h): the E8M0 exponent of a block,
// the factor its values are multiplied by, and where a scale goes in TransformerEngine's
// compact and GEMM-swizzled scale tensors. Host code, shared with the kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "normalization/src/kernels/mx_scale.h"

namespace normtune {
namespace {

TEST(MxScale, ExponentIsTheSmallestPowerOfTwoThatFitsTheBlock) {
  const float e4 = fp8_max(DType::kFloat8E4M3), e5 = fp8_max(DType::kFloat8E5M2);
  EXPECT_EQ(e4, 448.f);
  EXPECT_EQ(e5, 57344.f);
  EXPECT_EQ(mx_scale_exponent(0.f, e4), 0);       // an all-zero block
  EXPECT_EQ(mx_scale_exponent(448.f, e4), 127);   // amax at the format's max: scale 1
  EXPECT_EQ(mx_scale_exponent(449.f, e4), 128);   // just above: scale 2
  EXPECT_EQ(mx_scale_exponent(224.f, e4), 126);
  EXPECT_EQ(mx_scale_exponent(225.f, e4), 127);
  EXPECT_EQ(mx_scale_exponent(57344.f, e5), 127);
  EXPECT_EQ(mx_scale_exponent(INFINITY, e4), 0xFE);  // saturating
  // Every block's largest value fits the format after scaling, and half the scale would not
  // do (for amax above the smallest scale).
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> expo(-100, 100);
  for (int i = 0; i < 100000; ++i) {
    const float amax = std::ldexp(mant(rng), expo(rng));
    for (const float max : {e4, e5}) {
      const uint8_t e = mx_scale_exponent(amax, max);
      // (amax / max is computed as amax * (1 / max), in fp32, as TransformerEngine does: a
      // value within rounding of a power of two may land one ulp over the max, and saturates.)
      ASSERT_LE(amax * mx_inverse_scale(e), max * (1.f + 1e-6f)) << amax;
      ASSERT_GT(amax * mx_inverse_scale(e) * 2.f, max * (1.f - 1e-6f)) << amax;
    }
  }
}

// The kernels' branch-free exponent equals convert.h's float_to_e8m0 (round up, saturating)
// bit for bit: with a max of 1 (x itself) over every exponent with the fraction's edge cases
// (0, 1 ulp, around the subnormal halfway point, all ones) and random fractions, both signs,
// zero, subnormals, inf and NaN; and with the fp8 maxima on random magnitudes.
TEST(MxScale, BranchFreeExponentEqualsTheConversion) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> frac_dist(0, 0x7FFFFFu);
  size_t checked = 0;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t code = 0; code < 256; ++code) {
      std::vector<uint32_t> fracs = {0u, 1u, 2u, 0x3FFFFFu, 0x400000u, 0x400001u, 0x7FFFFEu, 0x7FFFFFu};
      for (int i = 0; i < 512; ++i) fracs.push_back(frac_dist(rng));
      for (uint32_t frac : fracs) {
        const float x = bits_float(sign | code << 23 | frac);
        const uint8_t want = float_to_e8m0(x, E8M0Rounding::kUp);
        ASSERT_EQ(mx_scale_exponent(x, 1.f), want) << std::hex << (sign | code << 23 | frac);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 200000u);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> expo(-140, 140);
  for (int i = 0; i < 100000; ++i) {
    const float amax = std::ldexp(mant(rng), expo(rng));
    for (const float max : {fp8_max(DType::kFloat8E4M3), fp8_max(DType::kFloat8E5M2)}) {
      ASSERT_EQ(mx_scale_exponent(amax, max), float_to_e8m0(amax * (1.f / max), E8M0Rounding::kUp)) << amax;
    }
  }
}

TEST(MxScale, InverseScaleIsTwoToThe127MinusE) {
  EXPECT_EQ(mx_inverse_scale(127), 1.f);
  EXPECT_EQ(mx_inverse_scale(126), 2.f);
  EXPECT_EQ(mx_inverse_scale(128), 0.5f);
  EXPECT_EQ(mx_inverse_scale(0), std::ldexp(1.f, 127));
  EXPECT_EQ(mx_inverse_scale(253), std::ldexp(1.f, -126));
  EXPECT_EQ(mx_inverse_scale(254), std::ldexp(1.f, -127));  // a subnormal
  EXPECT_TRUE(std::isnan(mx_inverse_scale(255)));
  for (int e = 0; e < 255; ++e) EXPECT_EQ(mx_inverse_scale(static_cast<uint8_t>(e)) * e8m0_to_float(static_cast<uint8_t>(e)), 1.f) << e;
}

// The kernels' two-instruction form, for every exponent a non-NaN amax gives (0..254): the
// same bits as mx_inverse_scale.
TEST(MxScale, KernelInverseScaleEqualsTheGeneralOneBelowNan) {
  for (uint32_t e = 0; e < 255; ++e) {
    EXPECT_EQ(float_bits(mx_inverse_scale_not_nan(e)), float_bits(mx_inverse_scale(static_cast<uint8_t>(e)))) << e;
  }
}

TEST(MxScale, ScaleTensorShapeIsTransformerEnginesPaddedShape) {
  EXPECT_EQ(mx_scale_rows(1), 128);
  EXPECT_EQ(mx_scale_rows(128), 128);
  EXPECT_EQ(mx_scale_rows(129), 256);
  EXPECT_EQ(mx_scale_cols(32), 4);
  EXPECT_EQ(mx_scale_cols(4096), 128);
  EXPECT_EQ(mx_scale_cols(7168), 224);
  EXPECT_EQ(mx_scale_cols(160), 8);  // 5 blocks, padded to 8
}

TEST(MxScale, CompactOffsetsAreRowMajor) {
  EXPECT_EQ(mx_scale_offset(0, 0, 4096, false), 0);
  EXPECT_EQ(mx_scale_offset(0, 5, 4096, false), 5);
  EXPECT_EQ(mx_scale_offset(3, 5, 4096, false), 3 * 128 + 5);
  EXPECT_EQ(mx_scale_offset(3, 4, 160, false), 3 * 8 + 4);
}

// cuBLAS's 128 x 4 tiles: 512 bytes each, tiles row-major over the padded scale tensor;
// inside a tile, row r and column c go to (r % 32) * 16 + (r / 32) * 4 + c.
TEST(MxScale, SwizzledOffsetsFollowTheGemmTileLayout) {
  const int64_t hidden = 32 * 12;  // 12 blocks per row: 3 tiles across
  EXPECT_EQ(mx_scale_offset(0, 0, hidden, true), 0);
  EXPECT_EQ(mx_scale_offset(0, 3, hidden, true), 3);
  EXPECT_EQ(mx_scale_offset(1, 0, hidden, true), 16);
  EXPECT_EQ(mx_scale_offset(32, 0, hidden, true), 4);
  EXPECT_EQ(mx_scale_offset(127, 3, hidden, true), 31 * 16 + 3 * 4 + 3);
  EXPECT_EQ(mx_scale_offset(0, 4, hidden, true), 512);
  EXPECT_EQ(mx_scale_offset(128, 0, hidden, true), 3 * 512);
  EXPECT_EQ(mx_scale_offset(130, 9, hidden, true), (1 * 3 + 2) * 512 + 2 * 16 + 0 * 4 + 1);
  // A bijection onto the padded tensor.
  std::set<int64_t> seen;
  for (int64_t r = 0; r < 256; ++r) {
    for (int64_t b = 0; b < mx_scale_cols(hidden); ++b) {
      const int64_t o = mx_scale_offset(r, b, hidden, true);
      ASSERT_GE(o, 0);
      ASSERT_LT(o, 256 * mx_scale_cols(hidden));
      ASSERT_TRUE(seen.insert(o).second) << r << "," << b;
    }
  }
}

// Column-wise scales (TransformerEngine's MXFP8 column-wise usage): one per 32 rows of a
// column, [roundup(ceil(rows / 32), 4), roundup(hidden, 128)].
TEST(MxScale, ColumnwiseShape) {
  EXPECT_EQ(mx_colwise_scale_rows(1), 4);
  EXPECT_EQ(mx_colwise_scale_rows(32), 4);
  EXPECT_EQ(mx_colwise_scale_rows(128), 4);
  EXPECT_EQ(mx_colwise_scale_rows(129), 8);  // 5 blocks of rows, the last partial
  EXPECT_EQ(mx_colwise_scale_rows(200), 8);
  EXPECT_EQ(mx_colwise_scale_cols(96), 128);
  EXPECT_EQ(mx_colwise_scale_cols(4096), 4096);
  EXPECT_EQ(mx_colwise_scale_cols(7168), 7168);
  EXPECT_EQ(mx_colwise_scale_cols(160), 256);
  EXPECT_EQ(mx_colwise_scale_offset(3, 5, 200, 4096, false), 3 * 4096 + 5);
}

// Swizzled column-wise scales are the row-wise scales of the transpose (a GEMM reads the
// column-wise operand as [hidden, rows]): column c is that tensor's row, the 32-row block its
// 32-element block. So the offset equals mx_scale_offset(c, rb, rows', true) for a row length
// rows' with as many blocks, and the map is a bijection onto the padded tensor.
TEST(MxScale, SwizzledColumnwiseOffsetsAreTheTransposesRowwiseOffsets) {
  for (const int64_t rows : {int64_t{1}, int64_t{37}, int64_t{128}, int64_t{200}, int64_t{520}}) {
    for (const int64_t hidden : {int64_t{96}, int64_t{160}, int64_t{4096}}) {
      const int64_t blocks = mx_colwise_scale_rows(rows);
      const int64_t transposed_row = blocks * kMxBlock;  // a row of `blocks` 32-element blocks
      ASSERT_EQ(mx_scale_cols(transposed_row), blocks);
      std::set<int64_t> seen;
      for (int64_t rb = 0; rb < blocks; ++rb) {
        for (int64_t c = 0; c < mx_colwise_scale_cols(hidden); ++c) {
          const int64_t o = mx_colwise_scale_offset(rb, c, rows, hidden, true);
          ASSERT_EQ(o, mx_scale_offset(c, rb, transposed_row, true)) << rows << " " << hidden << " " << rb << "," << c;
          // TransformerEngine's swizzle of column-wise scales, written out (swizzle_col_scaling_kernel).
          ASSERT_EQ(o, ((c / 128) * (blocks / 4) + rb / 4) * 512 + (c % 32) * 16 + ((c % 128) / 32) * 4 + rb % 4);
          ASSERT_GE(o, 0);
          ASSERT_LT(o, blocks * mx_colwise_scale_cols(hidden));
          ASSERT_TRUE(seen.insert(o).second) << rb << "," << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace normtune
