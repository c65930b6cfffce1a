// libcudnn missing: NORMTUNE_CUDNN_LIBRARY pointing at nothing makes the loader fail with a
// message that says what was tried and how to fix it. Its own executable: the loader opens
// the library once per process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include <normtune/normtune.h>

#include "normalization/src/api/api_common.h"
#include "normalization/src/cudnn/cudnn_library.h"
#include "normalization/src/kernels/norm_fwd_args.h"

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

// A tuned line naming cuDNN where cuDNN cannot run (here: the library is missing; in a build
// without the backend: not built in): no entry, the native selection stands, and one warning
// per key says which line and why.
TEST(CudnnLibrary, ATableLineNamingCudnnFallsBackToNativeWithOneWarning) {
  setenv("NORMTUNE_CUDNN_LIBRARY", "/nonexistent/libcudnn.so.9", 1);
  unsetenv("NORMTUNE_WARN_FALLBACK");
  TunedBackendLine line;
  line.key = make_key(NormType::kLayerNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, 4096);
  line.key.rows = RowClass::kDecode;
  line.arch = ArchFamily::kSm90;
  line.backend = Backend::kCudnn;
  line.name = "layernorm_fwd_bf16_bf16_bf16_h4096_decode_cudnn";
  FwdArgs args;
  args.params.rows = 4;
  args.params.hidden = 4096;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(table_backend_kernel(line, line.key, &args), nullptr);
  EXPECT_EQ(table_backend_kernel(line, line.key, &args), nullptr);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_THAT(err, HasSubstr("layernorm_fwd_bf16_bf16_bf16_h4096_decode_cudnn"));
  EXPECT_THAT(err, HasSubstr("running the native kernel"));
  bool built = false;  // (the build's NORMTUNE_WITH_CUDNN is the library's, not this file's)
  for (const KernelEntry* e : kernel_registry().entries()) built = built || e->backend == Backend::kCudnn;
  EXPECT_THAT(err, HasSubstr(built ? "libcudnn.so.9" : "no cuDNN backend"));
}

}  // namespace
}  // namespace normtune
