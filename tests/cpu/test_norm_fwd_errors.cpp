// Bad input to the forward API: a clear error naming the argument, raised before any device
// work (these run without a GPU: the pointers are never dereferenced).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include <normtune/common/error.h>
#include <normtune/normalization.h>

#include "fake_handles.h"

namespace normtune {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using test::fake;
using test::Handle;

class FwdErrors : public ::testing::Test {
 protected:
  static constexpr size_t kRows = 8, kHidden = 4096;
  Handle x{fake(0x100000), {kRows, kHidden}, kNVTEBFloat16};
  Handle gamma{fake(0x200000), {kHidden}, kNVTEBFloat16};
  Handle beta{fake(0x300000), {kHidden}, kNVTEBFloat16};
  Handle z{fake(0x400000), {kRows, kHidden}, kNVTEBFloat16};
  Handle mu{fake(0x500000), {kRows}, kNVTEFloat32};
  Handle rsigma{fake(0x600000), {kRows}, kNVTEFloat32};
  Handle residual{fake(0x700000), {kRows, kHidden}, kNVTEBFloat16};
  Handle residual_out{fake(0x800000), {kRows, kHidden}, kNVTEBFloat16};
  Handle workspace;

  void rms(float eps = 1e-5f, int sms = 0) {
    nvte_rmsnorm_fwd(x, gamma, eps, z, rsigma, workspace, sms, false, nullptr);
  }
  void ln() { nvte_layernorm_fwd(x, gamma, beta, 1e-5f, z, mu, rsigma, workspace, 0, false, nullptr); }
  void add() {
    normtune_rmsnorm_add_fwd(x, residual, gamma, 1e-5f, z, residual_out, rsigma, workspace, 0,
                             false, nullptr);
  }
};

TEST_F(FwdErrors, NullAndDestroyedHandles) {
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(nullptr, gamma, 1e-5f, z, rsigma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'x': expected a valid NVTETensor handle, got NULL")));
  NVTETensor dead = nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
  nvte_destroy_tensor(dead);
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, dead, 1e-5f, z, rsigma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'gamma': expected a valid NVTETensor handle")));
}

TEST_F(FwdErrors, Shapes) {
  x.set(fake(0x100000), {2, kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'x': expected a 2-D tensor")));
  x.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  gamma.set(fake(0x200000), {kHidden - 1}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); },
              ThrowsMessage<Error>(HasSubstr("argument 'gamma': expected shape [hidden] = [4096], got shape [4095]")));
  gamma.set(fake(0x200000), {kHidden}, kNVTEBFloat16);
  z.set(fake(0x400000), {kRows, kHidden + 1}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'z': expected shape")));
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEBFloat16);
  rsigma.set(fake(0x600000), {kRows + 1}, kNVTEFloat32);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'rsigma': expected shape [rows] = [8]")));
  x.set(fake(0x100000), {kRows, 0}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'x': expected a hidden size")));
}

TEST_F(FwdErrors, Dtypes) {
  x.set(fake(0x100000), {kRows, kHidden}, kNVTEInt32);
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEInt32);
  gamma.set(fake(0x200000), {kHidden}, kNVTEInt32);
  EXPECT_THAT([&] { rms(); },
              ThrowsMessage<Error>(HasSubstr("argument 'x': expected dtype fp32, fp16 or bf16, got int32")));
  x.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  gamma.set(fake(0x200000), {kHidden}, kNVTEFloat16);
  EXPECT_THAT([&] { rms(); },
              ThrowsMessage<Error>(HasSubstr("argument 'gamma': expected dtype bf16 (x's) or fp32, got fp16")));
  gamma.set(fake(0x200000), {kHidden}, kNVTEBFloat16);
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat8E4M3);
  EXPECT_THAT([&] { rms(); },
              ThrowsMessage<Error>(HasSubstr("argument 'z': expected dtype bf16 (x's), got fp8e4m3 (quantized outputs are not supported yet)")));
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEBFloat16);
  rsigma.set(fake(0x600000), {kRows}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'rsigma': expected dtype fp32, got bf16")));
  rsigma.set(fake(0x600000), {kRows}, kNVTEFloat32);
  beta.set(fake(0x300000), {kHidden}, kNVTEFloat32);
  EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr("argument 'beta': expected dtype bf16, got fp32")));
  residual.set(fake(0x700000), {kRows, kHidden}, kNVTEFloat32);
  EXPECT_THAT([&] { add(); }, ThrowsMessage<Error>(HasSubstr("argument 'residual': expected dtype bf16, got fp32")));
}

TEST_F(FwdErrors, Scalars) {
  EXPECT_THAT([&] { rms(-1.f); }, ThrowsMessage<Error>(HasSubstr("argument 'epsilon': expected a finite value >= 0, got -1")));
  EXPECT_THAT([&] { rms(1e-5f, -3); },
              ThrowsMessage<Error>(HasSubstr("argument 'multiprocessorCount': expected a count >= 0")));
}

TEST_F(FwdErrors, WorkspaceQueryThenWrongSize) {
  rms();  // the size query: no device work
  const NVTEShape s = nvte_tensor_shape(workspace);
  ASSERT_EQ(s.ndim, 1u);
  EXPECT_EQ(s.data[0], 0u);
  workspace.set(fake(0x900000), {16}, kNVTEByte);
  EXPECT_THAT([&] { rms(); },
              ThrowsMessage<Error>(HasSubstr("argument 'workspace': expected the shape [0] and dtype byte")));
}

TEST_F(FwdErrors, NullDataAndOverlaps) {
  workspace.set(nullptr, {0}, kNVTEByte);  // the answer to the query: a valid second call
  x.set(nullptr, {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'x': expected a device pointer to 32768 elements, got NULL")));
  x.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  z.set(fake(0x100000 + 64), {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'z': expected memory separate from 'x'")));
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEBFloat16);
  residual_out.set(fake(0x700000 + 2), {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { add(); },
              ThrowsMessage<Error>(HasSubstr("argument 'residual_out': expected memory separate from 'residual'")));
}

}  // namespace
}  // namespace normtune
