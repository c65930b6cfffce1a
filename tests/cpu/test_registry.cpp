// Registry: lookup, duplicates, fallback (with its one-time warning), no-entry errors, using
// test-local launchers in a test-local registry.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <normtune/normtune.h>
#include <normtune/registry/registry.h>

namespace normtune {
namespace {

using ::testing::HasSubstr;

// Test launchers record which one ran.
struct FakeArgs {
  int ran = 0;
  bool aligned = true;
};
void run_tuned(const void* args, cudaStream_t) { static_cast<FakeArgs*>(const_cast<void*>(args))->ran = 1; }
void run_general(const void* args, cudaStream_t) { static_cast<FakeArgs*>(const_cast<void*>(args))->ran = 2; }
const char* needs_alignment(const void* args) {
  return static_cast<const FakeArgs*>(args)->aligned ? nullptr : "x is not 16-byte aligned";
}

NormKey rms_fwd(uint32_t hidden, DType t = DType::kBFloat16, bool zero_centered_gamma = false) {
  return make_key(NormType::kRMSNorm, Stage::kForward, t, t, t, hidden, ScalingMode::kNone, zero_centered_gamma);
}

// The same key for a decode call (at most 128 rows).
NormKey decode(NormKey k) {
  k.rows = RowClass::kDecode;
  return k;
}

KernelEntry tuned_entry(uint32_t hidden, const char* name = "rmsnorm_fwd_test_tuned") {
  KernelEntry e;
  e.key = rms_fwd(hidden);
  e.arch = ArchFamily::kSm90;
  e.name = name;
  e.can_implement = needs_alignment;
  e.run = run_tuned;
  return e;
}

KernelEntry general_entry(const char* name = "rmsnorm_fwd_test_general") {
  KernelEntry e;
  e.key = rms_fwd(kAnyHiddenSize);
  e.name = name;
  e.run = run_general;
  return e;
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("NORMTUNE_WARN_FALLBACK"); }
  Registry registry;
};

TEST_F(RegistryTest, TunedEntryWinsWhenKeyAndArchMatch) {
  registry.add_tuned(tuned_entry(4096));
  registry.add_general(general_entry());
  FakeArgs args;
  ::testing::internal::CaptureStderr();
  const KernelEntry& e = registry.get_kernel(rms_fwd(4096), ArchFamily::kSm90, &args);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  e.run(&args, nullptr);
  EXPECT_EQ(args.ran, 1);
  const Selection sel = registry.select(rms_fwd(4096), ArchFamily::kSm90, &args);
  EXPECT_TRUE(sel.tuned);
  EXPECT_EQ(sel.entry->name, "rmsnorm_fwd_test_tuned");
}

TEST_F(RegistryTest, OtherHiddenSizeDtypeOrArchFallsBackToGeneral) {
  registry.add_tuned(tuned_entry(4096));
  registry.add_general(general_entry());
  FakeArgs args;
  for (ArchFamily arch : {ArchFamily::kSm80, ArchFamily::kSm100, ArchFamily::kGfx9}) {
    const Selection sel = registry.select(rms_fwd(4096), arch, &args);
    ASSERT_NE(sel.entry, nullptr);
    EXPECT_FALSE(sel.tuned);
    EXPECT_EQ(sel.entry->name, "rmsnorm_fwd_test_general");
  }
  EXPECT_FALSE(registry.select(rms_fwd(4097), ArchFamily::kSm90, &args).tuned);
  // Different dtype: no general entry registered for fp16 either.
  EXPECT_EQ(registry.select(rms_fwd(4096, DType::kFloat16), ArchFamily::kSm90, &args).entry,
            nullptr);
}

TEST_F(RegistryTest, IneligibleTunedCallFallsBackWithTheReason) {
  registry.add_tuned(tuned_entry(4096));
  registry.add_general(general_entry());
  FakeArgs args;
  args.aligned = false;
  ::testing::internal::CaptureStderr();
  registry.get_kernel(rms_fwd(4096), ArchFamily::kSm90, &args).run(&args, nullptr);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(args.ran, 2);
  EXPECT_EQ(err,
            "normtune: falling back to the general kernel: tuned kernel rmsnorm_fwd_test_tuned "
            "cannot run this call (x is not 16-byte aligned) for RMSNorm Forward hidden=4096 "
            "wtype=bf16 itype=bf16 otype=bf16 ctype=fp32 (sm_90)\n");
}

TEST_F(RegistryTest, FallbackWarnsOncePerKeyWithTheDesignedMessage) {
  registry.add_general(general_entry());
  FakeArgs args;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) registry.get_kernel(rms_fwd(128), ArchFamily::kSm90, &args);
  registry.get_kernel(rms_fwd(256), ArchFamily::kSm90, &args);
  registry.get_kernel(rms_fwd(128), ArchFamily::kSm80, &args);  // another arch: another key
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "normtune: falling back to the general kernel: no tuned kernel for RMSNorm Forward "
            "hidden=128 wtype=bf16 itype=bf16 otype=bf16 ctype=fp32 (sm_90)\n"
            "normtune: falling back to the general kernel: no tuned kernel for RMSNorm Forward "
            "hidden=256 wtype=bf16 itype=bf16 otype=bf16 ctype=fp32 (sm_90)\n"
            "normtune: falling back to the general kernel: no tuned kernel for RMSNorm Forward "
            "hidden=128 wtype=bf16 itype=bf16 otype=bf16 ctype=fp32 (sm_80)\n");
}

TEST_F(RegistryTest, EightThreadsFallingBackConcurrentlyWarnExactlyOncePerKey) {
  registry.add_general(general_entry());
  constexpr int kThreads = 8;
  constexpr int kKeys = 16;
  std::atomic<int> ready{0};
  std::atomic<int> ran{0};
  ::testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }  // start together
      for (int rep = 0; rep < 50; ++rep) {
        for (int k = 0; k < kKeys; ++k) {
          FakeArgs args;
          registry.get_kernel(rms_fwd(1000 + k), ArchFamily::kSm90, &args).run(&args, nullptr);
          ran.fetch_add(args.ran == 2);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(ran.load(), kThreads * 50 * kKeys);
  for (int k = 0; k < kKeys; ++k) {
    const std::string line = "hidden=" + std::to_string(1000 + k) + " ";
    size_t count = 0;
    for (size_t pos = err.find(line); pos != std::string::npos; pos = err.find(line, pos + 1)) ++count;
    EXPECT_EQ(count, 1u) << "key hidden=" << 1000 + k << " warned " << count << " times";
  }
  // Whole lines only: no interleaving.
  size_t lines = 0;
  for (char c : err) lines += c == '\n';
  EXPECT_EQ(lines, static_cast<size_t>(kKeys));
  EXPECT_TRUE(std::regex_search(err, std::regex("^(normtune: falling back[^\n]*\n){16}$")));
}

TEST_F(RegistryTest, EnvironmentVariableSilencesTheWarning) {
  registry.add_general(general_entry());
  FakeArgs args;
  setenv("NORMTUNE_WARN_FALLBACK", "0", 1);
  ::testing::internal::CaptureStderr();
  registry.get_kernel(rms_fwd(300), ArchFamily::kSm90, &args);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(&registry.get_kernel(rms_fwd(300), ArchFamily::kSm90, &args),
            registry.select(rms_fwd(300), ArchFamily::kSm90, &args).entry);
  unsetenv("NORMTUNE_WARN_FALLBACK");
}

TEST_F(RegistryTest, NoEntryIsAClearErrorNamingTheKey) {
  FakeArgs args;
  EXPECT_THAT([&] { registry.get_kernel(rms_fwd(5000), ArchFamily::kSm90, &args); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "no kernel for RMSNorm Forward hidden=5000 wtype=bf16 itype=bf16 otype=bf16 "
                  "ctype=fp32 (sm_90): no tuned kernel for")));
  EXPECT_THAT([&] { registry.get_kernel(rms_fwd(5000), ArchFamily::kSm90, &args); },
              ::testing::ThrowsMessage<Error>(HasSubstr("no general kernel either")));
}

TEST_F(RegistryTest, IneligibleEverywhereIsAnError) {
  registry.add_tuned(tuned_entry(4096));
  KernelEntry g = general_entry();
  g.can_implement = needs_alignment;
  registry.add_general(g);
  FakeArgs args;
  args.aligned = false;
  EXPECT_THAT([&] { registry.get_kernel(rms_fwd(4096), ArchFamily::kSm90, &args); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("general kernel rmsnorm_fwd_test_general cannot run it")));
}

TEST_F(RegistryTest, DuplicateRegistrationIsAnError) {
  registry.add_tuned(tuned_entry(4096, "first"));
  EXPECT_THAT([&] { registry.add_tuned(tuned_entry(4096, "second")); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "duplicate tuned registration for RMSNorm Forward hidden=4096 wtype=bf16 "
                  "itype=bf16 otype=bf16 ctype=fp32 (sm_90): 'first' is already registered, "
                  "'second' was added again")));
  // The same key for another architecture family is not a duplicate.
  KernelEntry other = tuned_entry(4096, "hopper_is_not_ampere");
  other.arch = ArchFamily::kSm80;
  EXPECT_NO_THROW(registry.add_tuned(other));
  registry.add_general(general_entry("g1"));
  EXPECT_THAT([&] { registry.add_general(general_entry("g2")); },
              ::testing::ThrowsMessage<Error>(HasSubstr("duplicate general registration")));
  EXPECT_EQ(registry.size(), 3u);
}

TEST_F(RegistryTest, MalformedEntriesAreRejected) {
  KernelEntry no_hidden = tuned_entry(kAnyHiddenSize);
  EXPECT_THAT([&] { registry.add_tuned(no_hidden); },
              ::testing::ThrowsMessage<Error>(HasSubstr("a tuned entry needs a hidden size")));
  KernelEntry any_arch = tuned_entry(64);
  any_arch.arch = ArchFamily::kAny;
  EXPECT_THAT([&] { registry.add_tuned(any_arch); },
              ::testing::ThrowsMessage<Error>(HasSubstr("expected a concrete architecture family")));
  KernelEntry with_hidden = general_entry();
  with_hidden.key.hidden_size = 64;
  EXPECT_THAT([&] { registry.add_general(with_hidden); },
              ::testing::ThrowsMessage<Error>(HasSubstr("expected hidden size 'any'")));
  KernelEntry no_run = general_entry();
  no_run.run = nullptr;
  EXPECT_THAT([&] { registry.add_general(no_run); },
              ::testing::ThrowsMessage<Error>(HasSubstr("argument 'entry.run'")));
  EXPECT_EQ(registry.size(), 0u);
}

TEST_F(RegistryTest, ZeroCenteredGammaFindsTheEntryOfThePlainKey) {
  registry.add_tuned(tuned_entry(4096));
  registry.add_general(general_entry());
  FakeArgs args;
  const Selection plain = registry.select(rms_fwd(4096), ArchFamily::kSm90, &args);
  const Selection zc = registry.select(rms_fwd(4096, DType::kBFloat16, true), ArchFamily::kSm90, &args);
  ASSERT_NE(zc.entry, nullptr);
  EXPECT_TRUE(zc.tuned);
  EXPECT_EQ(zc.entry, plain.entry);
  // Another hidden size: the general entry, again regardless of the flag.
  const Selection g = registry.select(rms_fwd(4097, DType::kBFloat16, true), ArchFamily::kSm90, &args);
  ASSERT_NE(g.entry, nullptr);
  EXPECT_FALSE(g.tuned);
  EXPECT_EQ(g.entry->name, "rmsnorm_fwd_test_general");
  EXPECT_EQ(registry.select(rms_fwd(4097, DType::kBFloat16, true).general(), ArchFamily::kAny, &args).entry, g.entry);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(&registry.get_kernel(rms_fwd(4096, DType::kBFloat16, true), ArchFamily::kSm90, &args), plain.entry);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(RegistryTest, EntriesWithRunTimeFlagsAreRejected) {
  KernelEntry tuned = tuned_entry(4096);
  tuned.key = rms_fwd(4096, DType::kBFloat16, true);
  EXPECT_THAT([&] { registry.add_tuned(tuned); },
              ::testing::ThrowsMessage<Error>(HasSubstr("run-time flags (zero-centered gamma) are not part of an entry's key")));
  KernelEntry general = general_entry();
  general.key = rms_fwd(kAnyHiddenSize, DType::kBFloat16, true);
  EXPECT_THAT([&] { registry.add_general(general); },
              ::testing::ThrowsMessage<Error>(HasSubstr("run-time flags (zero-centered gamma) are not part of an entry's key")));
  EXPECT_EQ(registry.size(), 0u);
}

TEST_F(RegistryTest, ListingEnumeratesTunedThenGeneralSorted) {
  registry.add_general(general_entry());
  registry.add_tuned(tuned_entry(8192, "b"));
  registry.add_tuned(tuned_entry(1024, "a"));
  const auto all = registry.entries();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]->key.hidden_size, 1024u);
  EXPECT_EQ(all[1]->key.hidden_size, 8192u);
  EXPECT_TRUE(all[2]->is_general());
}

TEST(ArchFamily, MapsComputeCapabilities) {
  EXPECT_EQ(arch_family_of(9, 0, false), ArchFamily::kSm90);
  EXPECT_EQ(arch_family_of(8, 6, false), ArchFamily::kSm80);
  EXPECT_EQ(arch_family_of(10, 0, false), ArchFamily::kSm100);
  EXPECT_EQ(arch_family_of(9, 0, true), ArchFamily::kGfx9);
  EXPECT_EQ(arch_family_of(7, 0, false), ArchFamily::kUnknown);
  EXPECT_EQ(arch_family_name(ArchFamily::kSm90), "sm_90");
}

TEST(GlobalRegistry, EveryEntryIsWellFormedAndUnique) {
  // The process-wide registry (register_all): whatever this build has, every entry decodes,
  // has a launcher and a procedural name.
  const Registry& r = kernel_registry();
  for (const KernelEntry* e : r.entries()) {
    EXPECT_NE(e->run, nullptr) << e->name;
    EXPECT_EQ(unpack(pack(e->key)), e->key);
    EXPECT_FALSE(e->name.empty());
  }
  EXPECT_EQ(&r, &kernel_registry());
}


// Another backend's entries (cuDNN): one per general key and backend, never chosen by
// select(), found by select_backend(), listed after the native entries.
TEST_F(RegistryTest, BackendEntriesAreAskedForByBackend) {
  registry.add_general(general_entry());
  KernelEntry cudnn = general_entry("rmsnorm_fwd_test_cudnn");
  cudnn.backend = Backend::kCudnn;
  cudnn.can_implement = needs_alignment;
  cudnn.run = run_tuned;
  registry.add_backend(cudnn);
  EXPECT_EQ(registry.size(), 2u);

  FakeArgs args;
  const Selection native = registry.select(rms_fwd(4096), ArchFamily::kSm90, &args);
  ASSERT_NE(native.entry, nullptr);
  EXPECT_EQ(native.entry->name, "rmsnorm_fwd_test_general");

  const Selection sel = registry.select_backend(rms_fwd(4096, DType::kBFloat16, true), Backend::kCudnn, &args);
  ASSERT_NE(sel.entry, nullptr);
  EXPECT_EQ(sel.entry->name, "rmsnorm_fwd_test_cudnn");
  EXPECT_EQ(sel.entry->backend, Backend::kCudnn);
  args.aligned = false;
  const Selection rejected = registry.select_backend(rms_fwd(4096), Backend::kCudnn, &args);
  EXPECT_EQ(rejected.entry, nullptr);
  ASSERT_NE(rejected.general_rejection, nullptr);
  EXPECT_STREQ(rejected.general_rejection, "x is not 16-byte aligned");
  EXPECT_EQ(registry.select_backend(rms_fwd(4096, DType::kFloat16), Backend::kCudnn, &args).general_candidate, nullptr);

  const auto all = registry.entries();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all.back()->backend, Backend::kCudnn);
  EXPECT_EQ(backend_name(Backend::kCudnn), "cudnn");
  EXPECT_EQ(backend_name(Backend::kNative), "native");
}

TEST_F(RegistryTest, BackendEntryChecks) {
  KernelEntry e = general_entry("rmsnorm_fwd_test_cudnn");
  e.backend = Backend::kCudnn;
  registry.add_backend(e);
  try {
    registry.add_backend(e);
    FAIL() << "a duplicate backend entry was accepted";
  } catch (const Error& err) {
    EXPECT_THAT(err.what(), HasSubstr("duplicate cudnn registration"));
    EXPECT_THAT(err.what(), HasSubstr("rmsnorm_fwd_test_cudnn"));
  }
  KernelEntry native = general_entry("rmsnorm_fwd_test_native");
  EXPECT_THROW(registry.add_backend(native), Error);  // native entries go through add_general
  KernelEntry sized = e;
  sized.key = rms_fwd(4096);
  EXPECT_THROW(registry.add_backend(sized), Error);  // backend entries serve every hidden size
  KernelEntry decode_backend = sized;
  decode_backend.key = decode(rms_fwd(kAnyHiddenSize));
  EXPECT_THROW(registry.add_backend(decode_backend), Error);  // and every row count
  KernelEntry decode_general = general_entry("decode general");
  decode_general.key = decode(decode_general.key);
  EXPECT_THROW(registry.add_general(decode_general), Error);
}

// ---- row classes: decode lines --------------------------------------------------------

TEST_F(RegistryTest, DecodeCallsTakeTheirDecodeLineFirstThenTheLineForAnyRows) {
  registry.add_tuned(tuned_entry(4096, "rmsnorm_fwd_test_tuned"));
  KernelEntry d = tuned_entry(4096, "rmsnorm_fwd_test_tuned_decode");
  d.key = decode(d.key);
  registry.add_tuned(d);
  registry.add_general(general_entry());
  FakeArgs args;
  // A decode call: its decode line. A call of more rows: the line for any row count.
  EXPECT_EQ(registry.select(decode(rms_fwd(4096)), ArchFamily::kSm90, &args).entry->name, "rmsnorm_fwd_test_tuned_decode");
  EXPECT_EQ(registry.select(rms_fwd(4096), ArchFamily::kSm90, &args).entry->name, "rmsnorm_fwd_test_tuned");
  // No decode line for 8192: a decode call takes the line for any rows, then the general.
  registry.add_tuned(tuned_entry(8192, "rmsnorm_fwd_test_tuned_8192"));
  const Selection s8192 = registry.select(decode(rms_fwd(8192)), ArchFamily::kSm90, &args);
  EXPECT_TRUE(s8192.tuned);
  EXPECT_EQ(s8192.entry->name, "rmsnorm_fwd_test_tuned_8192");
  const Selection s2048 = registry.select(decode(rms_fwd(2048)), ArchFamily::kSm90, &args);
  EXPECT_FALSE(s2048.tuned);
  EXPECT_EQ(s2048.entry->name, "rmsnorm_fwd_test_general");
  // Zero-centered gamma (a run-time flag) changes none of it.
  EXPECT_EQ(registry.select(decode(rms_fwd(4096, DType::kBFloat16, true)), ArchFamily::kSm90, &args).entry->name,
            "rmsnorm_fwd_test_tuned_decode");
}

TEST_F(RegistryTest, ADecodeLineThatDeclinesLeavesTheCallToTheLineForAnyRows) {
  registry.add_tuned(tuned_entry(4096, "rmsnorm_fwd_test_tuned"));
  KernelEntry d = tuned_entry(4096, "rmsnorm_fwd_test_tuned_decode");
  d.key = decode(d.key);
  d.can_implement = [](const void*) -> const char* { return "declines every call"; };
  registry.add_tuned(d);
  registry.add_general(general_entry());
  FakeArgs args;
  const Selection sel = registry.select(decode(rms_fwd(4096)), ArchFamily::kSm90, &args);
  EXPECT_TRUE(sel.tuned);
  EXPECT_EQ(sel.entry->name, "rmsnorm_fwd_test_tuned");
  // Both declining: the general entry, and the reason names the decode line.
  args.aligned = false;
  const Selection general = registry.select(decode(rms_fwd(4096)), ArchFamily::kSm90, &args);
  EXPECT_FALSE(general.tuned);
  EXPECT_EQ(general.entry->name, "rmsnorm_fwd_test_general");
  EXPECT_THAT(general.fallback_reason(decode(rms_fwd(4096)), ArchFamily::kSm90), HasSubstr("rmsnorm_fwd_test_tuned_decode"));
}

TEST_F(RegistryTest, TheFallbackWarningIsOncePerKeyWhateverTheRowClass) {
  registry.add_general(general_entry());
  FakeArgs args;
  ::testing::internal::CaptureStderr();
  registry.get_kernel(rms_fwd(3000), ArchFamily::kSm90, &args);
  registry.get_kernel(decode(rms_fwd(3000)), ArchFamily::kSm90, &args);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_THAT(err, HasSubstr("hidden=3000"));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("rows<=")));
}

// ---- tuned lines naming another backend ----------------------------------------------
TunedBackendLine cudnn_line(NormKey key, const char* name) {
  TunedBackendLine l;
  l.key = key;
  l.arch = ArchFamily::kSm90;
  l.backend = Backend::kCudnn;
  l.name = name;
  return l;
}

TEST_F(RegistryTest, TunedBackendLinesAreFoundByKeyArchAndRowClass) {
  registry.add_tuned_backend(cudnn_line(decode(rms_fwd(4096)), "rmsnorm_fwd_h4096_decode_cudnn"));
  registry.add_tuned_backend(cudnn_line(rms_fwd(8192), "rmsnorm_fwd_h8192_cudnn"));
  const TunedBackendLine* d = registry.tuned_backend(decode(rms_fwd(4096, DType::kBFloat16, true)), ArchFamily::kSm90);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name, "rmsnorm_fwd_h4096_decode_cudnn");
  // A call of more rows does not take a decode line; a decode call takes a line for any rows.
  EXPECT_EQ(registry.tuned_backend(rms_fwd(4096), ArchFamily::kSm90), nullptr);
  ASSERT_NE(registry.tuned_backend(decode(rms_fwd(8192)), ArchFamily::kSm90), nullptr);
  EXPECT_EQ(registry.tuned_backend(decode(rms_fwd(8192)), ArchFamily::kSm90)->name, "rmsnorm_fwd_h8192_cudnn");
  // Another architecture, dtype or hidden size: none.
  EXPECT_EQ(registry.tuned_backend(rms_fwd(8192), ArchFamily::kSm100), nullptr);
  EXPECT_EQ(registry.tuned_backend(rms_fwd(8192, DType::kFloat16), ArchFamily::kSm90), nullptr);
  EXPECT_EQ(registry.tuned_backend(rms_fwd(8193), ArchFamily::kSm90), nullptr);
  // They are not entries: selection of the native kernels is unchanged, and the listing
  // has them apart, sorted.
  EXPECT_TRUE(registry.entries().empty());
  const auto lines = registry.tuned_backend_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]->name, "rmsnorm_fwd_h4096_decode_cudnn");
}

// A decode call with a native decode line is not taken by a backend's line for any rows (the
// decode race chose the native layout); without a native decode line it is.
TEST_F(RegistryTest, ANativeDecodeLineOutranksABackendLineForAnyRows) {
  registry.add_tuned_backend(cudnn_line(rms_fwd(4096), "rmsnorm_fwd_h4096_cudnn"));
  registry.add_tuned_backend(cudnn_line(rms_fwd(8192), "rmsnorm_fwd_h8192_cudnn"));
  KernelEntry d = tuned_entry(4096, "rmsnorm_fwd_test_tuned_decode");
  d.key = decode(d.key);
  registry.add_tuned(d);
  EXPECT_EQ(registry.tuned_backend(decode(rms_fwd(4096)), ArchFamily::kSm90), nullptr);
  ASSERT_NE(registry.tuned_backend(rms_fwd(4096), ArchFamily::kSm90), nullptr);  // more rows: the line
  ASSERT_NE(registry.tuned_backend(decode(rms_fwd(8192)), ArchFamily::kSm90), nullptr);
  // (on another architecture the native decode line is not that key's)
  TunedBackendLine other = cudnn_line(rms_fwd(4096), "rmsnorm_fwd_h4096_cudnn_sm100");
  other.arch = ArchFamily::kSm100;
  registry.add_tuned_backend(other);
  ASSERT_NE(registry.tuned_backend(decode(rms_fwd(4096)), ArchFamily::kSm100), nullptr);
}

TEST_F(RegistryTest, TunedBackendLineChecks) {
  registry.add_tuned_backend(cudnn_line(rms_fwd(4096), "first"));
  EXPECT_THROW(registry.add_tuned_backend(cudnn_line(rms_fwd(4096), "again")), Error);
  TunedBackendLine native = cudnn_line(rms_fwd(2048), "native");
  native.backend = Backend::kNative;
  EXPECT_THROW(registry.add_tuned_backend(native), Error);
  EXPECT_THROW(registry.add_tuned_backend(cudnn_line(rms_fwd(kAnyHiddenSize), "general")), Error);
  EXPECT_THROW(registry.add_tuned_backend(cudnn_line(rms_fwd(2048, DType::kBFloat16, true), "flag")), Error);
  TunedBackendLine any_arch = cudnn_line(rms_fwd(2048), "any arch");
  any_arch.arch = ArchFamily::kAny;
  EXPECT_THROW(registry.add_tuned_backend(any_arch), Error);
}

}  // namespace
}  // namespace normtune
