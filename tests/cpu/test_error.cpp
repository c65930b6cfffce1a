// Error messages name what was checked, the expected and actual values, and the location.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <normtune/common/error.h>
#include <normtune/common/warn_once.h>

namespace normtune {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

void check_gamma(int dtype) { NORMTUNE_CHECK_ARG(dtype == 6, "gamma", "dtype bf16", dtype); }

TEST(Error, ArgumentCheckNamesArgumentExpectedActualAndLocation) {
  EXPECT_NO_THROW(check_gamma(6));
  try {
    check_gamma(5);
    FAIL() << "expected a throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), MatchesRegex("normtune: argument 'gamma': expected dtype bf16, got 5 "
                                       "\\(check_gamma at test_error\\.cpp:[0-9]+\\)"));
  }
}

TEST(Error, IsAStdRuntimeError) {
  EXPECT_THROW(NORMTUNE_ERROR("boom ", 42), std::runtime_error);
  EXPECT_THAT([] { NORMTUNE_CHECK(1 + 1 == 3, "arithmetic is ", "broken"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("normtune: arithmetic is broken (")));
}

TEST(Error, RuntimeCheckNamesTheFailingStatement) {
  EXPECT_THAT([] { NORMTUNE_CUDA_CHECK(cudaErrorInvalidValue); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("in `cudaErrorInvalidValue` (operator() at test_error.cpp:")));
  EXPECT_NO_THROW(NORMTUNE_CUDA_CHECK(cudaSuccess));
}

TEST(OnceSet, FirstTimeIsTrueOnlyOnce) {
  OnceSet<int> s;
  EXPECT_TRUE(s.first_time(3));
  EXPECT_FALSE(s.first_time(3));
  EXPECT_TRUE(s.first_time(4));
  s.clear();
  EXPECT_TRUE(s.first_time(3));
}

TEST(WarnOnce, PrintsOncePerId) {
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(warn_once("test-id-a", "first"));
  EXPECT_FALSE(warn_once("test-id-a", "second"));
  EXPECT_TRUE(warn_once("test-id-b", "third"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "normtune: first\nnormtune: third\n");
}

TEST(EnvFlag, RecognisesFalseLikeValues) {
  for (const char* off : {"0", "false", "OFF", "No"}) {
    setenv("NORMTUNE_TEST_FLAG", off, 1);
    EXPECT_TRUE(env_flag_is_off("NORMTUNE_TEST_FLAG")) << off;
  }
  for (const char* on : {"1", "yes", "true", ""}) {
    setenv("NORMTUNE_TEST_FLAG", on, 1);
    EXPECT_FALSE(env_flag_is_off("NORMTUNE_TEST_FLAG")) << on;
  }
  unsetenv("NORMTUNE_TEST_FLAG");
  EXPECT_FALSE(env_flag_is_off("NORMTUNE_TEST_FLAG"));
}

}  // namespace
}  // namespace normtune
