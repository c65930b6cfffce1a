// convert.h, bit for bit, against a reference built from each format's definition with
// double arithmetic: decoding is checked on every bit pattern; encoding against the
// nearest entry (ties to the even code) of the table of all representable values, on every
// value, every midpoint and their neighbours, specials, random fp32 patterns and a strided
// sweep of all fp32 patterns. Where CUDA's conversion headers are present, the encoders
// and decoders are also compared with CUDA's host conversions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <normtune/common/convert.h>

// CUDART_VERSION: the platform header brought in the CUDA runtime (not HIP, whose vector
// types clash with CUDA's headers even where both toolkits are installed).
#if defined(CUDART_VERSION) && __has_include(<cuda_fp8.h>) && __has_include(<cuda_fp4.h>)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#define NORMTUNE_TEST_HAVE_CUDA_CONVERSIONS 1
#endif

namespace normtune {
namespace {

// The reference does not use the header's bit casts.
uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

std::string hex(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

// ---- formats from their definitions -----------------------------------------------------

enum class Specials {
  kIeee,    // largest exponent: inf when m == 0, NaN otherwise (fp16, bf16, e5m2)
  kE4M3FN,  // only S.1111.111 is NaN; no inf
  kNone,    // every pattern is a number (e2m1)
  kE8M0,    // unsigned, value 2^(v - bias) with no zero and no subnormals; 0xFF is NaN
};

struct Format {
  const char* name;
  int exp_bits;
  int man_bits;
  int bias;
  Specials specials;

  uint32_t magnitude_mask() const { return (1u << (exp_bits + man_bits)) - 1; }
  uint32_t sign_bit() const {
    return specials == Specials::kE8M0 ? 0u : 1u << (exp_bits + man_bits);
  }
  uint32_t num_codes() const { return magnitude_mask() + 1 + sign_bit(); }
};

const Format kFp16{"fp16", 5, 10, 15, Specials::kIeee};
const Format kBf16{"bf16", 8, 7, 127, Specials::kIeee};
const Format kE4M3{"e4m3", 4, 3, 7, Specials::kE4M3FN};
const Format kE5M2{"e5m2", 5, 2, 15, Specials::kIeee};
const Format kE8M0{"e8m0", 8, 0, 127, Specials::kE8M0};
const Format kE2M1{"e2m1", 2, 1, 1, Specials::kNone};

// The value the format's formula gives a magnitude code, special encodings ignored:
//   2^(e - bias) * (1 + m / 2^M) for e >= 1, 2^(1 - bias) * m / 2^M for e == 0.
double formula_value(const Format& f, uint32_t mag) {
  if (f.specials == Specials::kE8M0) return std::ldexp(1.0, static_cast<int>(mag) - f.bias);
  const int e = static_cast<int>(mag >> f.man_bits);
  const double m = static_cast<double>(mag & ((1u << f.man_bits) - 1));
  if (e == 0) return std::ldexp(m, 1 - f.bias - f.man_bits);
  return std::ldexp(1.0 + std::ldexp(m, -f.man_bits), e - f.bias);
}

double ref_decode(const Format& f, uint32_t code) {
  const uint32_t mag = code & f.magnitude_mask();
  const bool negative = (code & f.sign_bit()) != 0;
  const uint32_t e = mag >> f.man_bits;
  const uint32_t e_max = (1u << f.exp_bits) - 1;
  const uint32_t m = mag & ((1u << f.man_bits) - 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double value = 0;
  switch (f.specials) {
    case Specials::kIeee:
      value = e != e_max ? formula_value(f, mag) : m == 0 ? HUGE_VAL : nan;
      break;
    case Specials::kE4M3FN:
      value = mag == f.magnitude_mask() ? nan : formula_value(f, mag);
      break;
    case Specials::kE8M0:
      value = mag == 0xFF ? nan : formula_value(f, mag);
      break;
    case Specials::kNone:
      value = formula_value(f, mag);
      break;
  }
  return negative ? -value : value;
}

// ---- decode -----------------------------------------------------------------------------

struct DecodeCase {
  Format format;
  std::function<float(uint32_t)> decode;
};

void PrintTo(const DecodeCase& c, std::ostream* os) {
  *os << c.format.name;
}

class ConvertDecode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(ConvertDecode, EveryBitPatternMatchesTheFormatDefinition) {
  const DecodeCase& c = GetParam();
  int failures = 0;
  for (uint32_t code = 0; code < c.format.num_codes(); ++code) {
    const double want = ref_decode(c.format, code);
    const float got = c.decode(code);
    if (std::isnan(want)) {
      if (!std::isnan(got) && ++failures <= 5)
        ADD_FAILURE() << c.format.name << " " << hex(code) << ": want NaN, got " << got;
      continue;
    }
    // Every value of these formats is an fp32 value (2^-127 and bf16's subnormals as fp32
    // subnormals), so the comparison is exact, signed zeros included.
    ASSERT_EQ(static_cast<double>(static_cast<float>(want)), want) << hex(code);
    if (bits_of(got) != bits_of(static_cast<float>(want)) && ++failures <= 5)
      ADD_FAILURE() << c.format.name << " " << hex(code) << ": want " << want << ", got " << got;
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, ConvertDecode,
    ::testing::Values(
        DecodeCase{kFp16, [](uint32_t v) { return fp16_to_float(static_cast<uint16_t>(v)); }},
        DecodeCase{kBf16, [](uint32_t v) { return bf16_to_float(static_cast<uint16_t>(v)); }},
        DecodeCase{kE4M3, [](uint32_t v) { return fp8e4m3_to_float(static_cast<uint8_t>(v)); }},
        DecodeCase{kE5M2, [](uint32_t v) { return fp8e5m2_to_float(static_cast<uint8_t>(v)); }},
        DecodeCase{kE8M0, [](uint32_t v) { return e8m0_to_float(static_cast<uint8_t>(v)); }},
        DecodeCase{kE2M1, [](uint32_t v) { return fp4e2m1_to_float(static_cast<uint8_t>(v)); }}),
    [](const auto& info) { return std::string(info.param.format.name); });

// ---- encode: the table-based reference ----------------------------------------------------

enum class Rounding { kNearestEven, kUp, kDown };

// Every non-negative finite value in ascending order with its code, then a sentinel: the
// value the formula gives the code after the largest finite one (fp16: 65536, e4m3: 480,
// e8m0: 2^128). Rounding to the sentinel means overflow. Its code has the other parity
// than the largest finite code, so ties at the overflow threshold go to the even code, as
// IEEE rounding does (fp16 65520 -> inf, e4m3 464 -> 448).
struct Table {
  std::vector<double> values;
  std::vector<uint32_t> codes;
  size_t sentinel() const { return values.size() - 1; }
};

Table build_table(const Format& f) {
  Table t;
  for (uint32_t mag = 0; mag <= f.magnitude_mask(); ++mag) {
    const double v = ref_decode(f, mag);
    if (std::isfinite(v)) {
      t.values.push_back(v);
      t.codes.push_back(mag);
    }
  }
  // Codes grow with the value in all these formats; the search relies on sorted values.
  for (size_t i = 1; i < t.values.size(); ++i) {
    EXPECT_LT(t.values[i - 1], t.values[i]) << f.name;
    EXPECT_EQ(t.codes[i - 1] + 1, t.codes[i]) << f.name;
  }
  const uint32_t next = t.codes.back() + 1;
  t.values.push_back(formula_value(f, next));
  t.codes.push_back(next);
  EXPECT_GT(t.values.back(), t.values[t.values.size() - 2]) << f.name;
  return t;
}

// The table index a magnitude rounds to, given i = the first index whose value is >= a.
size_t round_in_table(const Table& t, double a, Rounding r, size_t i) {
  if (i == t.values.size()) return r == Rounding::kDown ? t.sentinel() - 1 : t.sentinel();
  // Exact, or below the smallest value (e8m0 has no zero): the smallest value.
  if (t.values[i] == a || i == 0) return i;
  const size_t lo = i - 1;
  switch (r) {
    case Rounding::kUp:
      return i;
    case Rounding::kDown:
      return lo;
    case Rounding::kNearestEven:
      break;
  }
  // Adjacent values have few significant bits: their sum is exact in double.
  const double mid = (t.values[lo] + t.values[i]) / 2;
  if (a != mid) return a < mid ? lo : i;
  return (t.codes[lo] & 1u) == 0 ? lo : i;
}

size_t search_table(const Table& t, double a, Rounding r) {
  const auto it = std::lower_bound(t.values.begin(), t.values.end(), a);
  return round_in_table(t, a, r, static_cast<size_t>(it - t.values.begin()));
}

struct EncodeCase {
  std::string name;
  Format format;
  Rounding rounding;
  uint32_t overflow_mag;             // code of |x| for +-inf and for |x| that rounds past max
  std::optional<uint32_t> nan_code;  // empty: a quiet NaN with the input's sign
  std::function<uint32_t(float)> encode;
};

void PrintTo(const EncodeCase& c, std::ostream* os) {
  *os << c.name;
}

// Expected code of a finite or infinite x, whose magnitude rounds to table index `index`.
uint32_t expected_code(const EncodeCase& c, const Table& t, float x, size_t index) {
  const uint32_t sign = std::signbit(x) ? c.format.sign_bit() : 0u;  // e8m0 drops the sign
  if (std::isinf(x) || index == t.sentinel()) return sign | c.overflow_mag;
  return sign | t.codes[index];
}

class Checker {
 public:
  Checker(const EncodeCase& c, const Table& t) : c_(c), t_(t) {}

  void check(float x) { check_with_index(x, std::isnan(x) ? 0 : search(x)); }

  // `index` is where |x| rounds in the table (unused for NaN).
  void check_with_index(float x, size_t index) {
    ++checked_;
    const uint32_t got = c_.encode(x);
    if (matches(x, index, got) || ++failures_ > 8) return;
    const std::string want = !std::isnan(x) ? hex(expected_code(c_, t_, x, index))
                             : c_.nan_code  ? hex(*c_.nan_code)
                                            : std::string("a quiet NaN with the input's sign");
    ADD_FAILURE() << c_.name << "(" << x << " = " << hex(bits_of(x)) << "): want " << want
                  << ", got " << hex(got);
  }

  size_t search(float x) const { return search_table(t_, std::fabs(double{x}), c_.rounding); }
  const Table& table() const { return t_; }
  const EncodeCase& encode_case() const { return c_; }
  int failures() const { return failures_; }
  size_t checked() const { return checked_; }

 private:
  bool matches(float x, size_t index, uint32_t got) const {
    if (!std::isnan(x)) return got == expected_code(c_, t_, x, index);
    if (c_.nan_code) return got == *c_.nan_code;
    const uint32_t quiet_bit = 1u << (c_.format.man_bits - 1);
    const bool sign_kept = ((got & c_.format.sign_bit()) != 0) == std::signbit(x);
    return std::isnan(ref_decode(c_.format, got)) && (got & quiet_bit) != 0 && sign_kept;
  }

  const EncodeCase& c_;
  const Table& t_;
  int failures_ = 0;
  size_t checked_ = 0;
};

// Representable values, midpoints between neighbours, the floats just beside both, the
// overflow threshold, fp32 specials and subnormals; each with both signs.
std::vector<float> edge_inputs(const Table& t) {
  std::vector<float> out;
  const float inf = std::numeric_limits<float>::infinity();
  auto add_with_neighbours = [&](double v) {
    const float f = static_cast<float>(v);
    if (static_cast<double>(f) != v) return;  // e.g. the 2^128 sentinel
    out.insert(out.end(), {f, std::nextafter(f, inf), std::nextafter(f, -inf)});
  };
  for (size_t i = 0; i < t.values.size(); ++i) {
    add_with_neighbours(t.values[i]);
    if (i > 0) add_with_neighbours((t.values[i - 1] + t.values[i]) / 2);
  }
  for (uint32_t bits :
       {0x00000000u, 0x00000001u, 0x00000002u, 0x003FFFFFu, 0x00400000u, 0x00400001u, 0x005FFFFFu,
        0x00600000u, 0x00600001u, 0x007FFFFFu, 0x00800000u, 0x00C00000u, 0x3F800000u, 0x3FC00000u,
        0x7E800000u, 0x7EC00000u, 0x7F000000u, 0x7F3FFFFFu, 0x7F400000u, 0x7F400001u, 0x7F7FFFFFu,
        0x7F800000u, 0x7F800001u, 0x7FA00000u, 0x7FBFFFFFu, 0x7FC00000u, 0x7FC12345u, 0x7FFFFFFFu})
    out.push_back(float_of(bits));
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) out.push_back(float_of(bits_of(out[i]) ^ 0x80000000u));
  return out;
}

class ConvertEncode : public ::testing::TestWithParam<EncodeCase> {
 protected:
  void SetUp() override { table_ = build_table(GetParam().format); }
  Table table_;
};

TEST_P(ConvertEncode, RepresentableValuesMidpointsAndSpecials) {
  Checker checker(GetParam(), table_);
  for (float x : edge_inputs(table_)) checker.check(x);
  EXPECT_EQ(checker.failures(), 0);
  EXPECT_GT(checker.checked(), 4 * table_.values.size());
}

TEST_P(ConvertEncode, RandomFp32BitPatterns) {
  Checker checker(GetParam(), table_);
  std::mt19937 rng(20240607u);
  for (int i = 0; i < 2'000'000; ++i) checker.check(float_of(static_cast<uint32_t>(rng())));
  EXPECT_EQ(checker.failures(), 0);
}

// Every kStride-th fp32 magnitude in ascending order, with both signs. Walking the table
// alongside keeps the reference O(1) per input. The stride is prime, so the sampled
// patterns cover every residue of the low mantissa bits.
TEST_P(ConvertEncode, StridedSweepOfAllFp32Patterns) {
  constexpr uint32_t kStride = 97;
  Checker checker(GetParam(), table_);
  const std::vector<double>& values = table_.values;
  size_t i = 0;
  for (uint64_t mag = 0; mag <= 0x7FFFFFFFu; mag += kStride) {
    const float x = float_of(static_cast<uint32_t>(mag));
    if (std::isnan(x)) {
      checker.check_with_index(x, 0);
      continue;
    }
    const double a = static_cast<double>(x);
    while (i < values.size() && values[i] < a) ++i;
    const size_t index = round_in_table(table_, a, GetParam().rounding, i);
    checker.check_with_index(x, index);
    checker.check_with_index(-x, index);
  }
  EXPECT_EQ(checker.failures(), 0);
}

std::vector<EncodeCase> encode_cases() {
  using R = Rounding;
  using E = E8M0Rounding;
  return {
      {"fp16", kFp16, R::kNearestEven, 0x7C00, std::nullopt,
       [](float x) { return uint32_t{float_to_fp16(x)}; }},
      {"bf16", kBf16, R::kNearestEven, 0x7F80, std::nullopt,
       [](float x) { return uint32_t{float_to_bf16(x)}; }},
      {"e4m3", kE4M3, R::kNearestEven, 0x7E, 0x7Fu,
       [](float x) { return uint32_t{float_to_fp8e4m3(x)}; }},
      {"e5m2_satfinite", kE5M2, R::kNearestEven, 0x7B, 0x7Fu,
       [](float x) { return uint32_t{float_to_fp8e5m2(x)}; }},
      {"e5m2_nosat", kE5M2, R::kNearestEven, 0x7C, 0x7Fu,
       [](float x) { return uint32_t{float_to_fp8e5m2(x, false)}; }},
      {"e8m0_up_satfinite", kE8M0, R::kUp, 0xFE, 0xFFu,
       [](float x) { return uint32_t{float_to_e8m0(x, E::kUp)}; }},
      {"e8m0_up_nosat", kE8M0, R::kUp, 0xFF, 0xFFu,
       [](float x) { return uint32_t{float_to_e8m0(x, E::kUp, false)}; }},
      {"e8m0_down_satfinite", kE8M0, R::kDown, 0xFE, 0xFFu,
       [](float x) { return uint32_t{float_to_e8m0(x, E::kDown)}; }},
      {"e8m0_down_nosat", kE8M0, R::kDown, 0xFF, 0xFFu,
       [](float x) { return uint32_t{float_to_e8m0(x, E::kDown, false)}; }},
      {"e8m0_nearest_satfinite", kE8M0, R::kNearestEven, 0xFE, 0xFFu,
       [](float x) { return uint32_t{float_to_e8m0(x, E::kNearestEven)}; }},
      {"e8m0_nearest_nosat", kE8M0, R::kNearestEven, 0xFF, 0xFFu,
       [](float x) { return uint32_t{float_to_e8m0(x, E::kNearestEven, false)}; }},
      {"e2m1", kE2M1, R::kNearestEven, 0x7, 0x7u,
       [](float x) { return uint32_t{float_to_fp4e2m1(x)}; }},
  };
}

INSTANTIATE_TEST_SUITE_P(Formats, ConvertEncode, ::testing::ValuesIn(encode_cases()),
                         [](const auto& info) { return info.param.name; });

// ---- the documented special cases, spelled out ------------------------------------------

TEST(ConvertSemantics, DocumentedSpecialCases) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);               // max + half an ulp: ties to even = inf
  EXPECT_EQ(float_to_fp16(float_of(0xFFC12345u)), 0xFE09);  // sign and top payload kept
  EXPECT_EQ(float_to_fp16(float_of(0x7F800001u)), 0x7E00);  // signalling NaN made quiet
  EXPECT_EQ(float_to_bf16(float_of(0xFFC12345u)), 0xFFC1);
  EXPECT_EQ(float_to_bf16(float_of(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(float_to_bf16(float_of(0x7F7F8000u)), 0x7F80);  // rounds past max to inf
  EXPECT_EQ(float_to_fp8e4m3(464.0f), 0x7E);                // tie with the NaN code: 448
  EXPECT_EQ(float_to_fp8e4m3(1e30f), 0x7E);
  EXPECT_EQ(float_to_fp8e4m3(-inf), 0xFE);
  EXPECT_EQ(float_to_fp8e4m3(-std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(float_to_fp8e5m2(61439.0f), 0x7B);
  EXPECT_EQ(float_to_fp8e5m2(61440.0f), 0x7B);
  EXPECT_EQ(float_to_fp8e5m2(61440.0f, false), 0x7C);
  EXPECT_EQ(float_to_fp8e5m2(-inf), 0xFB);
  EXPECT_EQ(float_to_fp8e5m2(-inf, false), 0xFC);
  EXPECT_EQ(float_to_e8m0(0.0f, E8M0Rounding::kUp), 0x00);
  EXPECT_EQ(float_to_e8m0(-3.0f, E8M0Rounding::kUp), 128 + 1);      // |x| rounded up to 4
  EXPECT_EQ(float_to_e8m0(-3.0f, E8M0Rounding::kDown), 128);        // down to 2
  EXPECT_EQ(float_to_e8m0(1.5f, E8M0Rounding::kNearestEven), 128);  // tie: even code 128
  EXPECT_EQ(float_to_e8m0(3.0f, E8M0Rounding::kNearestEven), 128);  // tie: even code 128
  EXPECT_EQ(float_to_e8m0(float_of(0x7F000001u), E8M0Rounding::kUp), 0xFE);
  EXPECT_EQ(float_to_e8m0(float_of(0x7F000001u), E8M0Rounding::kUp, false), 0xFF);
  EXPECT_EQ(float_to_e8m0(inf, E8M0Rounding::kDown), 0xFE);
  EXPECT_EQ(bits_of(e8m0_to_float(0)), 0x00400000u);  // 2^-127
  EXPECT_EQ(float_to_fp4e2m1(5.0f), 0x6);             // tie between 4 and 6: even code
  EXPECT_EQ(float_to_fp4e2m1(-inf), 0xF);
  EXPECT_EQ(float_to_fp4e2m1(-std::numeric_limits<float>::quiet_NaN()), 0x7);
}

TEST(ConvertSemantics, BitCastsRoundTrip) {
  for (uint32_t bits : {0u, 0x80000000u, 0x00000001u, 0x3F800000u, 0x7F800000u, 0xFFC00001u})
    EXPECT_EQ(float_bits(float_of(bits)), bits);
  EXPECT_EQ(bits_of(bits_float(0x40490FDBu)), 0x40490FDBu);
}

TEST(ConvertFp4x2, ElementZeroIsTheLowNibble) {
  const uint8_t packed = pack_fp4x2(0x3, 0xC);
  EXPECT_EQ(packed, 0xC3);
  EXPECT_EQ(fp4x2_get(packed, 0), 0x3);
  EXPECT_EQ(fp4x2_get(packed, 1), 0xC);
  EXPECT_EQ(fp4x2_set(packed, 0, 0xA), 0xCA);
  EXPECT_EQ(fp4x2_set(packed, 1, 0x5), 0x53);
  EXPECT_EQ(pack_fp4x2(0x1F, 0xF2), 0x2F);  // only low nibbles are used
}

// ---- runtime dtype access ---------------------------------------------------------------

TEST(ConvertDType, StoresAndLoadsEveryFloatDType) {
  const float values[] = {1.5f, -0.5f, 3.0f, -6.0f, 0.5f};
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3,
                  DType::kFloat8E5M2, DType::kFloat4E2M1}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<uint8_t> buffer(dtype_storage_bytes(t, 5), 0xEE);
    for (size_t i = 0; i < 5; ++i) float_to_dtype(t, values[i], buffer.data(), i);
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(dtype_to_float(t, buffer.data(), i), values[i]) << i;
  }
  // fp4 element i lives in byte i / 2, low nibble first.
  uint8_t fp4[2] = {0, 0};
  float_to_dtype(DType::kFloat4E2M1, 1.0f, fp4, 1);   // code 0x2
  float_to_dtype(DType::kFloat4E2M1, -6.0f, fp4, 2);  // code 0xF
  EXPECT_EQ(fp4[0], 0x20);
  EXPECT_EQ(fp4[1], 0x0F);
  // e8m0 stores round up, like MX scales.
  uint8_t e8m0 = 0;
  float_to_dtype(DType::kFloat8E8M0, 3.0f, &e8m0, 0);
  EXPECT_EQ(dtype_to_float(DType::kFloat8E8M0, &e8m0, 0), 4.0f);
}

TEST(ConvertDType, UnsupportedDTypesRaise) {
  uint32_t word = 0;
  for (DType t : {DType::kByte, DType::kInt16, DType::kInt32, DType::kInt64}) {
    EXPECT_THROW(dtype_to_float(t, &word, 0), Error) << dtype_name(t);
    EXPECT_THROW(float_to_dtype(t, 1.0f, &word, 0), Error) << dtype_name(t);
  }
}

// ---- second opinion: CUDA's host conversions --------------------------------------------

#if defined(NORMTUNE_TEST_HAVE_CUDA_CONVERSIONS)

std::vector<float> cross_check_inputs() {
  std::vector<float> xs;
  for (const Format* f : {&kFp16, &kBf16, &kE4M3, &kE5M2, &kE8M0, &kE2M1}) {
    const std::vector<float> edges = edge_inputs(build_table(*f));
    xs.insert(xs.end(), edges.begin(), edges.end());
  }
  std::mt19937 rng(7u);
  for (int i = 0; i < 1'000'000; ++i) xs.push_back(float_of(static_cast<uint32_t>(rng())));
  return xs;
}

// Same code, or both NaN (CUDA's fp16/bf16 NaN is 0x7FFF; ours keeps the sign and payload).
void expect_same(const char* what, float x, uint32_t ours, uint32_t cuda, const Format& f,
                 int* failures) {
  const bool same =
      ours == cuda || (std::isnan(ref_decode(f, ours)) && std::isnan(ref_decode(f, cuda)));
  if (!same && ++*failures <= 8)
    ADD_FAILURE() << what << "(" << x << " = " << hex(bits_of(x)) << "): ours " << hex(ours)
                  << ", CUDA " << hex(cuda);
}

TEST(ConvertCudaCrossCheck, EncodersMatchCudaHostConversions) {
  int failures = 0;
  for (float x : cross_check_inputs()) {
    expect_same("fp16", x, float_to_fp16(x), static_cast<__half_raw>(__float2half_rn(x)).x, kFp16,
                &failures);
    expect_same("bf16", x, float_to_bf16(x),
                static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x, kBf16, &failures);
    expect_same("e4m3", x, float_to_fp8e4m3(x), __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3),
                kE4M3, &failures);
    expect_same("e5m2", x, float_to_fp8e5m2(x), __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2),
                kE5M2, &failures);
    expect_same("e5m2 nosat", x, float_to_fp8e5m2(x, false),
                __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2), kE5M2, &failures);
    for (bool sat : {true, false}) {
      const __nv_saturation_t s = sat ? __NV_SATFINITE : __NV_NOSAT;
      expect_same("e8m0 up", x, float_to_e8m0(x, E8M0Rounding::kUp, sat),
                  __nv_cvt_float_to_e8m0(x, s, cudaRoundPosInf), kE8M0, &failures);
      expect_same("e8m0 down", x, float_to_e8m0(x, E8M0Rounding::kDown, sat),
                  __nv_cvt_float_to_e8m0(x, s, cudaRoundZero), kE8M0, &failures);
    }
    expect_same("e2m1", x, float_to_fp4e2m1(x),
                __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest), kE2M1, &failures);
  }
  EXPECT_EQ(failures, 0);
}

TEST(ConvertCudaCrossCheck, DecodersMatchCudaHostConversions) {
  auto same = [](float ours, float cuda) {
    return bits_of(ours) == bits_of(cuda) || (std::isnan(ours) && std::isnan(cuda));
  };
  auto half_to_float = [](__half_raw h) { return __half2float(__half(h)); };
  for (uint32_t v = 0; v < 0x10000; ++v) {
    __half_raw h;
    h.x = static_cast<unsigned short>(v);
    __nv_bfloat16_raw b;
    b.x = static_cast<unsigned short>(v);
    EXPECT_TRUE(same(fp16_to_float(static_cast<uint16_t>(v)), half_to_float(h))) << hex(v);
    EXPECT_TRUE(same(bf16_to_float(static_cast<uint16_t>(v)), __bfloat162float(__nv_bfloat16(b))))
        << hex(v);
  }
  for (uint32_t v = 0; v < 0x100; ++v) {
    const auto u8 = static_cast<uint8_t>(v);
    EXPECT_TRUE(same(fp8e4m3_to_float(u8), half_to_float(__nv_cvt_fp8_to_halfraw(u8, __NV_E4M3))))
        << hex(v);
    EXPECT_TRUE(same(fp8e5m2_to_float(u8), half_to_float(__nv_cvt_fp8_to_halfraw(u8, __NV_E5M2))))
        << hex(v);
    EXPECT_TRUE(
        same(e8m0_to_float(u8), __bfloat162float(__nv_bfloat16(__nv_cvt_e8m0_to_bf16raw(u8)))))
        << hex(v);
    if (v < 16) {
      EXPECT_TRUE(same(fp4e2m1_to_float(u8), half_to_float(__nv_cvt_fp4_to_halfraw(u8, __NV_E2M1))))
          << hex(v);
    }
  }
}

#else

TEST(ConvertCudaCrossCheck, EncodersMatchCudaHostConversions) {
  GTEST_SKIP() << "CUDA's cuda_fp8.h/cuda_fp4.h are not available to this build";
}

#endif

}  // namespace
}  // namespace normtune
