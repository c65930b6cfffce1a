// NormKey: exhaustive pack/unpack round trips, rejection of out-of-range values, names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include <normtune/registry/norm_key.h>

namespace normtune {
namespace {

using ::testing::HasSubstr;

TEST(NormKey, RoundTripsEveryFieldCombinationThatMatters) {
  // Every norm x stage x (wtype, itype, otype, ctype) over every dtype x scaling x flags at
  // a few hidden sizes: 2 * 4 * 11^4 * 6 * 8 * 3 = 17 million keys.
  size_t checked = 0;
  for (int n = 0; n < kNumNormTypes; ++n)
    for (int s = 0; s < kNumStages; ++s)
      for (DType w : kAllDTypes)
        for (DType i : kAllDTypes)
          for (DType o : kAllDTypes)
            for (DType c : kAllDTypes)
              for (int m = 0; m < kNumScalingModes; ++m)
                for (uint8_t f = 0; f <= kAllKeyFlags; ++f)
                  for (uint32_t h : {kAnyHiddenSize, 7168u, kMaxHiddenSize}) {
                    NormKey k{static_cast<NormType>(n), static_cast<Stage>(s), w, i, o, c, h,
                              static_cast<ScalingMode>(m), f};
                    const uint64_t bits = pack(k);
                    const NormKey back = unpack(bits);
                    if (!(back == k)) FAIL() << "round trip broke for " << to_string(k);
                    ++checked;
                  }
  EXPECT_EQ(checked, size_t{2} * 4 * 14641 * 6 * (kAllKeyFlags + 1) * 3);
  EXPECT_EQ(kAllKeyFlags + 1, 8);  // zero-centered gamma, swizzled scales, column-wise output
}

TEST(NormKey, DistinctKeysPackToDistinctBits) {
  // Changing any single field changes the packed value, so no field is dropped.
  const NormKey base{NormType::kRMSNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16,
                     DType::kBFloat16, DType::kFloat32, 4096, ScalingMode::kNone, 0};
  const uint64_t b = pack(base);
  NormKey k = base;
  k.norm = NormType::kLayerNorm;
  EXPECT_NE(pack(k), b);
  k = base;
  k.stage = Stage::kBackward;
  EXPECT_NE(pack(k), b);
  k = base;
  k.wtype = DType::kFloat16;
  EXPECT_NE(pack(k), b);
  k = base;
  k.itype = DType::kFloat16;
  EXPECT_NE(pack(k), b);
  k = base;
  k.otype = DType::kFloat8E4M3;
  EXPECT_NE(pack(k), b);
  k = base;
  k.ctype = DType::kFloat16;
  EXPECT_NE(pack(k), b);
  k = base;
  k.hidden_size = 4097;
  EXPECT_NE(pack(k), b);
  k = base;
  k.scaling = ScalingMode::kMxfp8_1D;
  EXPECT_NE(pack(k), b);
  k = base;
  k.flags = kFlagZeroCenteredGamma;
  EXPECT_NE(pack(k), b);
}

TEST(NormKey, RandomHiddenSizesRoundTrip) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> hidden(0, kMaxHiddenSize);
  std::uniform_int_distribution<int> dt(0, kNumDTypes - 1);
  for (int trial = 0; trial < 200000; ++trial) {
    NormKey k;
    k.norm = static_cast<NormType>(trial % kNumNormTypes);
    k.stage = static_cast<Stage>(trial % kNumStages);
    k.wtype = static_cast<DType>(dt(rng));
    k.itype = static_cast<DType>(dt(rng));
    k.otype = static_cast<DType>(dt(rng));
    k.ctype = static_cast<DType>(dt(rng));
    k.hidden_size = hidden(rng);
    ASSERT_EQ(unpack(pack(k)), k) << to_string(k);
  }
}

TEST(NormKey, RejectsValuesThatDoNotFit) {
  NormKey k;
  k.hidden_size = kMaxHiddenSize + 1;
  EXPECT_THAT([&] { (void)pack(k); },
              ::testing::ThrowsMessage<Error>(HasSubstr("NormKey field 'hidden': value 16777216")));
  k = NormKey{};
  k.wtype = static_cast<DType>(11);
  EXPECT_THAT([&] { (void)pack(k); }, ::testing::ThrowsMessage<Error>(HasSubstr("'wtype'")));
  k = NormKey{};
  k.otype = static_cast<DType>(15);
  EXPECT_THAT([&] { (void)pack(k); }, ::testing::ThrowsMessage<Error>(HasSubstr("'otype'")));
  k = NormKey{};
  k.stage = static_cast<Stage>(kNumStages);
  EXPECT_THAT([&] { (void)pack(k); }, ::testing::ThrowsMessage<Error>(HasSubstr("'stage'")));
  k = NormKey{};
  k.norm = static_cast<NormType>(2);
  EXPECT_THAT([&] { (void)pack(k); }, ::testing::ThrowsMessage<Error>(HasSubstr("'norm'")));
  k = NormKey{};
  k.scaling = static_cast<ScalingMode>(100);  // TE's NVTE_INVALID_SCALING
  EXPECT_THAT([&] { (void)pack(k); }, ::testing::ThrowsMessage<Error>(HasSubstr("'scaling'")));
  k = NormKey{};
  k.flags = 0x80;
  EXPECT_THAT([&] { (void)pack(k); }, ::testing::ThrowsMessage<Error>(HasSubstr("'flags'")));
}

TEST(NormKey, UnpackRejectsCorruptBits) {
  const uint64_t good = pack(NormKey{});
  EXPECT_THAT([&] { (void)unpack(good | (uint64_t{1} << 63)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unused bits are set")));
  // A dtype field holding 15, which is no dtype.
  const auto& w = key_field(KeyField::kWType);
  EXPECT_THAT([&] { (void)unpack(good | (uint64_t{15} << w.offset)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("field 'wtype' holds 15")));
}

TEST(NormKey, LayoutTableIsConsistent) {
  uint64_t used = 0;
  for (const KeyFieldSpec& s : kKeyFields) {
    const uint64_t mask = detail::field_mask(s);
    EXPECT_EQ(used & mask, 0u) << s.name << " overlaps an earlier field";
    used |= mask;
    EXPECT_LE(s.offset + s.width, 64u) << s.name;
  }
}

TEST(NormKey, ToStringIsTheHumanForm) {
  NormKey k{NormType::kRMSNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16,
            DType::kBFloat16, DType::kFloat32, 7168, ScalingMode::kNone, 0};
  EXPECT_EQ(to_string(k), "RMSNorm Forward hidden=7168 wtype=bf16 itype=bf16 otype=bf16 ctype=fp32");
  k.norm = NormType::kLayerNorm;
  k.stage = Stage::kBackwardAdd;
  k.hidden_size = kAnyHiddenSize;
  k.otype = DType::kFloat8E4M3;
  k.scaling = ScalingMode::kMxfp8_1D;
  k.flags = kFlagZeroCenteredGamma;
  EXPECT_EQ(to_string(k),
            "LayerNorm BackwardAdd hidden=any wtype=bf16 itype=bf16 otype=fp8e4m3 ctype=fp32 "
            "scaling=mxfp8_1d zero_centered_gamma");
}

// ---- make_key: the one place a key is assembled ----------------------------------------
TEST(MakeKey, SetsEveryFieldWithAnFp32Ctype) {
  const NormKey k = make_key(NormType::kLayerNorm, Stage::kForward, DType::kFloat32, DType::kBFloat16,
                             DType::kBFloat16, 7168);
  EXPECT_EQ(k.norm, NormType::kLayerNorm);
  EXPECT_EQ(k.stage, Stage::kForward);
  EXPECT_EQ(k.wtype, DType::kFloat32);
  EXPECT_EQ(k.itype, DType::kBFloat16);
  EXPECT_EQ(k.otype, DType::kBFloat16);
  EXPECT_EQ(k.ctype, DType::kFloat32);
  EXPECT_EQ(k.hidden_size, 7168u);
  EXPECT_EQ(k.scaling, ScalingMode::kNone);
  EXPECT_EQ(k.flags, 0);
  // A forward key may narrow the output (fp32 -> bf16).
  const NormKey narrow = make_key(NormType::kRMSNorm, Stage::kForwardAdd, DType::kFloat32, DType::kFloat32,
                                  DType::kFloat16, 4096, ScalingMode::kMxfp8_1D);
  EXPECT_EQ(narrow.otype, DType::kFloat16);
  EXPECT_EQ(narrow.scaling, ScalingMode::kMxfp8_1D);
  EXPECT_EQ(narrow.ctype, DType::kFloat32);
}

TEST(MakeKey, ZeroCenteredGammaIsARunTimeFlag) {
  const NormKey plain = make_key(NormType::kRMSNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16,
                                 DType::kBFloat16, 4096);
  const NormKey zc = make_key(NormType::kRMSNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16,
                              DType::kBFloat16, 4096, ScalingMode::kNone, true);
  EXPECT_EQ(zc.flags, kFlagZeroCenteredGamma);
  EXPECT_NE(zc, plain);
  EXPECT_NE(pack(zc), pack(plain));  // part of the call's key (messages, plan caches)
  EXPECT_EQ(to_string(zc), to_string(plain) + " zero_centered_gamma");
  // ... but not of the registry entry that serves it.
  EXPECT_EQ(zc.entry_key(), plain);
  EXPECT_EQ(zc.entry_key().hidden_size, 4096u);
  EXPECT_EQ(zc.general(), plain.general());
  EXPECT_EQ(zc.general().hidden_size, kAnyHiddenSize);
  EXPECT_EQ(zc.general().flags, 0);
  EXPECT_EQ(plain.entry_key(), plain);
}

TEST(MakeKey, EntryKeyClearsOnlyRunTimeFlags) {
  NormKey k = make_key(NormType::kRMSNorm, Stage::kForward, DType::kFloat32, DType::kFloat32, DType::kFloat32, 512,
                       ScalingMode::kMxfp8_1D, true);
  k.flags |= kFlagSwizzledScales;  // the scale layout: a run-time argument of the kernel
  k.flags |= kFlagColumnwise;      // so is column-wise output (the general entry's row-tile kernel)
  EXPECT_EQ(k.entry_key().flags, 0);
  EXPECT_EQ(k.general().flags, 0);
  EXPECT_EQ(k.entry_key().scaling, ScalingMode::kMxfp8_1D);  // the scaling mode is part of the entry
  EXPECT_EQ(kRunTimeKeyFlags, kFlagZeroCenteredGamma | kFlagSwizzledScales | kFlagColumnwise);
  EXPECT_THAT(to_string(k), HasSubstr("swizzled_scales columnwise"));
}

TEST(MakeKey, BackwardKeyNeedsOtypeEqualToItype) {
  for (Stage s : {Stage::kBackward, Stage::kBackwardAdd}) {
    EXPECT_THAT([&] { (void)make_key(NormType::kRMSNorm, s, DType::kBFloat16, DType::kBFloat16, DType::kFloat32, 4096); },
                ::testing::ThrowsMessage<Error>(HasSubstr("a backward key's otype (dx) must be its itype (x)")));
    const NormKey ok = make_key(NormType::kLayerNorm, s, DType::kFloat32, DType::kFloat16, DType::kFloat16, 4096);
    EXPECT_EQ(ok.otype, DType::kFloat16);
    EXPECT_EQ(ok.ctype, DType::kFloat32);
  }
}

static_assert(make_key(NormType::kRMSNorm, Stage::kBackward, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16,
                       4096, ScalingMode::kNone, true)
                  .entry_key() == make_key(NormType::kRMSNorm, Stage::kBackward, DType::kBFloat16,
                                           DType::kBFloat16, DType::kBFloat16, 4096),
              "make_key is usable in constant expressions");

// The compile-time proof, exercised at compile time once more from a test TU.
static_assert(unpack(pack(NormKey{NormType::kLayerNorm, Stage::kForwardAdd, DType::kFloat4E2M1,
                                  DType::kFloat8E8M0, DType::kFloat8E5M2, DType::kInt64,
                                  kMaxHiddenSize, ScalingMode::kNvfp4_1D, kAllKeyFlags})) ==
              NormKey{NormType::kLayerNorm, Stage::kForwardAdd, DType::kFloat4E2M1,
                      DType::kFloat8E8M0, DType::kFloat8E5M2, DType::kInt64, kMaxHiddenSize,
                      ScalingMode::kNvfp4_1D, kAllKeyFlags});

TEST(RowClass, DecodeIsAtMost128RowsAndAKeyField) {
  EXPECT_EQ(row_class_of(0), RowClass::kDecode);
  EXPECT_EQ(row_class_of(1), RowClass::kDecode);
  EXPECT_EQ(row_class_of(kDecodeMaxRows), RowClass::kDecode);
  EXPECT_EQ(row_class_of(kDecodeMaxRows + 1), RowClass::kAny);
  NormKey k = make_key(NormType::kLayerNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, 4096);
  EXPECT_EQ(k.rows, RowClass::kAny);  // make_key: a key for any row count
  NormKey d = k;
  d.rows = RowClass::kDecode;
  EXPECT_NE(pack(d), pack(k));
  EXPECT_EQ(unpack(pack(d)), d);
  EXPECT_EQ(d.entry_key(), d);       // an entry's key keeps it (decode lines)
  EXPECT_EQ(d.general(), k.general());  // the general entry serves every row count
  EXPECT_EQ(d.any_rows(), k);
  EXPECT_THAT(to_string(d), ::testing::EndsWith(" rows<=128"));
  EXPECT_EQ(to_string(k).find("rows"), std::string::npos);
  EXPECT_EQ(row_class_name(RowClass::kDecode), "decode");
  // The bits above the fields stay free for the registry's slots.
  EXPECT_LT(pack(d), uint64_t{1} << kFirstFreeKeyBit);
  EXPECT_THROW(unpack(pack(d) | (uint64_t{1} << kFirstFreeKeyBit)), Error);
}

}  // namespace
}  // namespace normtune
