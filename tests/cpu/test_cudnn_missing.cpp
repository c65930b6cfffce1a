// libcudnn missing: NORMTUNE_CUDNN_LIBRARY pointing at nothing makes the loader fail with a
// message that says what was tried and how to fix it. Its own executable: the loader opens
// the library once per process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "normalization/src/cudnn/cudnn_library.h"

namespace normtune {
namespace {

using ::testing::HasSubstr;

TEST(CudnnLibrary, MissingLibraryIsAClearFailure) {
  setenv("NORMTUNE_CUDNN_LIBRARY", "/nonexistent/libcudnn.so.9", 1);
  std::string why;
  EXPECT_EQ(cudnn_library(&why), nullptr);
  EXPECT_THAT(why, HasSubstr("/nonexistent/libcudnn.so.9"));
  EXPECT_THAT(why, HasSubstr("NORMTUNE_CUDNN_LIBRARY"));
  EXPECT_THAT(why, HasSubstr("install cuDNN 9"));
  // Asked again (another thread, a later call): the same answer, no second attempt.
  unsetenv("NORMTUNE_CUDNN_LIBRARY");
  std::string again;
  EXPECT_EQ(cudnn_library(&again), nullptr);
  EXPECT_EQ(again, why);
}

}  // namespace
}  // namespace normtune
