// The backend switches (TransformerEngine's variables and functions, NORMTUNE_BACKEND) and the
// cuDNN plan cache. No GPU needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <normtune/normalization.h>
#include <normtune/normtune.h>
#include <normtune/normtune_api.h>

#include "normalization/src/cudnn/backend_choice.h"
#include "normalization/src/cudnn/plan_cache.h"

namespace normtune {
namespace {

using ::testing::HasSubstr;

class BackendChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    unsetenv("NVTE_NORM_FWD_USE_CUDNN");
    unsetenv("NVTE_NORM_BWD_USE_CUDNN");
    unsetenv("NORMTUNE_BACKEND");
    unsetenv("NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE");
    reset_cudnn_norm_switches();
  }
};

TEST_F(BackendChoiceTest, AutoByDefault) {
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kAuto);
  EXPECT_EQ(backend_choice(true).request, BackendRequest::kAuto);
  EXPECT_EQ(cudnn_norm_switch(false), -1);
}

// (The variables are read once per process; set() changes one and has them read again.)
void set(const char* name, const char* value) {
  setenv(name, value, 1);
  reset_cudnn_norm_switches();
}

TEST_F(BackendChoiceTest, TransformerEngineVariablesPerDirection) {
  set("NVTE_NORM_FWD_USE_CUDNN", "1");
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kCudnn);
  EXPECT_STREQ(backend_choice(false).source, "NVTE_NORM_FWD_USE_CUDNN=1");
  EXPECT_EQ(backend_choice(true).request, BackendRequest::kAuto);  // the backward has its own
  set("NVTE_NORM_BWD_USE_CUDNN", "1");
  EXPECT_EQ(backend_choice(true).request, BackendRequest::kCudnn);
  // Set off, as TE reads it: TE's own kernels, here the native ones (never the table's cuDNN).
  set("NVTE_NORM_FWD_USE_CUDNN", "0");
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kNative);
  EXPECT_STREQ(backend_choice(false).source, "NVTE_NORM_FWD_USE_CUDNN=0");
  set("NVTE_NORM_FWD_USE_CUDNN", "false");
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kNative);
  // Empty is unset: NORMTUNE_BACKEND (default auto) decides.
  set("NVTE_NORM_FWD_USE_CUDNN", "");
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kAuto);
}

TEST_F(BackendChoiceTest, VariablesAreReadOncePerProcess) {
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kAuto);
  setenv("NVTE_NORM_FWD_USE_CUDNN", "1", 1);  // as TransformerEngine: too late for this process
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kAuto);
}

TEST_F(BackendChoiceTest, TransformerEngineFunctionsOverrideTheVariables) {
  set("NVTE_NORM_FWD_USE_CUDNN", "1");
  nvte_enable_cudnn_norm_fwd(false);
  EXPECT_EQ(cudnn_norm_switch(false), 0);
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kNative);  // TE's own kernels: ours
  EXPECT_STREQ(backend_choice(false).source, "nvte_enable_cudnn_norm_fwd(false)");
  nvte_enable_cudnn_norm_bwd(true);
  EXPECT_EQ(backend_choice(true).request, BackendRequest::kCudnn);
  EXPECT_STREQ(backend_choice(true).source, "nvte_enable_cudnn_norm_bwd(true)");
  normtune_enable_cudnn_norm_fwd(true);  // the normtune_ name is the same switch
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kCudnn);
}

TEST_F(BackendChoiceTest, NormtuneVariableWhenTransformerEngineSaysNothing) {
  set("NORMTUNE_BACKEND", "native");
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kNative);
  set("NORMTUNE_BACKEND", "cudnn");
  EXPECT_EQ(backend_choice(true).request, BackendRequest::kCudnn);
  EXPECT_STREQ(backend_choice(true).source, "NORMTUNE_BACKEND=cudnn");
  set("NORMTUNE_BACKEND", "auto");
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kAuto);
  // TE's switch wins over it.
  set("NORMTUNE_BACKEND", "native");
  nvte_enable_cudnn_norm_fwd(true);
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kCudnn);
  set("NORMTUNE_BACKEND", "cuDNN!");
  for (int i = 0; i < 2; ++i) {  // every call, not only the first
    try {
      backend_choice(true);
      FAIL() << "an unknown NORMTUNE_BACKEND was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("NORMTUNE_BACKEND"));
      EXPECT_THAT(e.what(), HasSubstr("auto, native or cudnn"));
      EXPECT_THAT(e.what(), HasSubstr("cuDNN!"));
    }
  }
}

// TransformerEngine's switch for zero-centered gamma + 1 in gamma's dtype (read by the cuDNN
// backend only): off by default; TE's variable until the function is called; the function,
// under either name, from then on; independent of the backend switches.
TEST_F(BackendChoiceTest, ZeroCenteredGammaInWeightDtype) {
  EXPECT_FALSE(zero_centered_gamma_in_weight_dtype());
  set("NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE", "1");
  EXPECT_TRUE(zero_centered_gamma_in_weight_dtype());
  EXPECT_EQ(backend_choice(false).request, BackendRequest::kAuto);
  set("NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE", "0");
  EXPECT_FALSE(zero_centered_gamma_in_weight_dtype());
  nvte_enable_zero_centered_gamma_in_weight_dtype(true);
  EXPECT_TRUE(zero_centered_gamma_in_weight_dtype());
  EXPECT_EQ(cudnn_norm_switch(false), -1);
  set("NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE", "1");  // (set() resets the function's setting too)
  normtune_enable_zero_centered_gamma_in_weight_dtype(false);
  EXPECT_FALSE(zero_centered_gamma_in_weight_dtype());
  nvte_enable_cudnn_norm_fwd(true);
  EXPECT_FALSE(zero_centered_gamma_in_weight_dtype());
}

// ---- the plan cache ------------------------------------------------------------------------
TEST(PlanCache, KeepsTheMostRecentlyUsedWithinItsBound) {
  LruCache<int, int> cache(3);
  int built = 0;
  auto get = [&](int k) {
    return *cache.get(k, [&] {
      ++built;
      return std::make_shared<int>(k * 10);
    });
  };
  EXPECT_EQ(get(1), 10);
  EXPECT_EQ(get(2), 20);
  EXPECT_EQ(get(3), 30);
  EXPECT_EQ(built, 3);
  EXPECT_EQ(get(1), 10);  // a hit: 1 is now the most recent
  EXPECT_EQ(built, 3);
  EXPECT_EQ(get(4), 40);  // evicts 2, the least recently used
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(get(3), 30);
  EXPECT_EQ(get(1), 10);
  EXPECT_EQ(built, 4);
  EXPECT_EQ(get(2), 20);  // rebuilt
  EXPECT_EQ(built, 5);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.hits(), 3u);
  EXPECT_EQ(cache.builds(), 5u);
}

TEST(PlanCache, EightThreadsShareOneBoundedCache) {
  LruCache<int, int> cache(16);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        const int k = (i * 7 + t) % 24;  // more keys than the bound: evictions all along
        const std::shared_ptr<int> v = cache.get(k, [k] { return std::make_shared<int>(k + 1000); });
        if (v == nullptr || *v != k + 1000) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache.size(), 16u);
  EXPECT_EQ(cache.hits() + cache.builds(), 8u * 20000u);
}

TEST(PlanCache, AnEvictedPlanLivesWhileItsCallerHoldsIt) {
  LruCache<int, std::string> cache(1);
  const std::shared_ptr<std::string> held = cache.get(1, [] { return std::make_shared<std::string>("one"); });
  cache.get(2, [] { return std::make_shared<std::string>("two"); });  // evicts 1
  EXPECT_EQ(*held, "one");
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace normtune
