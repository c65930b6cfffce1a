// Bad input to the backward API: a clear error naming the argument, raised before any
// device work (these run without a GPU: the pointers are never dereferenced). Errors that
// need the device (workspace size, null data, overlaps) are tested in gpu/test_norm_bwd.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

class BwdErrors : public ::testing::Test {
 protected:
  static constexpr size_t kRows = 8, kHidden = 4096;
  Handle dz{fake(0x100000), {kRows, kHidden}, kNVTEBFloat16};
  Handle x{fake(0x200000), {kRows, kHidden}, kNVTEBFloat16};
  Handle add{fake(0x300000), {kRows, kHidden}, kNVTEBFloat16};
  Handle mu{fake(0x400000), {kRows}, kNVTEFloat32};
  Handle rsigma{fake(0x500000), {kRows}, kNVTEFloat32};
  Handle gamma{fake(0x600000), {kHidden}, kNVTEBFloat16};
  Handle dx{fake(0x700000), {kRows, kHidden}, kNVTEBFloat16};
  Handle dgamma{fake(0x800000), {kHidden}, kNVTEBFloat16};
  Handle dbeta{fake(0x900000), {kHidden}, kNVTEBFloat16};
  Handle workspace;

  void rms(int sms = 0) { nvte_rmsnorm_bwd(dz, x, rsigma, gamma, dx, dgamma, workspace, sms, false, nullptr); }
  void rms_add() {
    nvte_rmsnorm_bwd_add(dz, x, add, rsigma, gamma, dx, dgamma, workspace, 0, false, nullptr);
  }
  void ln() { nvte_layernorm_bwd(dz, x, mu, rsigma, gamma, dx, dgamma, dbeta, workspace, 0, false, nullptr); }
};

TEST_F(BwdErrors, NullHandles) {
  EXPECT_THAT([&] { nvte_rmsnorm_bwd(nullptr, x, rsigma, gamma, dx, dgamma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'dz': expected a valid NVTETensor handle, got NULL")));
  EXPECT_THAT([&] { nvte_rmsnorm_bwd(dz, nullptr, rsigma, gamma, dx, dgamma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'x': expected a valid NVTETensor handle, got NULL")));
  EXPECT_THAT([&] { nvte_layernorm_bwd(dz, x, nullptr, rsigma, gamma, dx, dgamma, dbeta, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'mu': expected a valid NVTETensor handle, got NULL")));
  EXPECT_THAT([&] { nvte_layernorm_bwd(dz, x, mu, rsigma, gamma, dx, dgamma, nullptr, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'dbeta': expected a valid NVTETensor handle, got NULL")));
  EXPECT_THAT([&] { nvte_rmsnorm_bwd_add(dz, x, nullptr, rsigma, gamma, dx, dgamma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'add': expected a valid NVTETensor handle, got NULL")));
}

TEST_F(BwdErrors, Shapes) {
  x.set(fake(0x200000), {2, kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'x': expected a 2-D tensor")));
  x.set(fake(0x200000), {kRows, 0}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'x': expected a hidden size")));
  x.set(fake(0x200000), {kRows, kHidden}, kNVTEBFloat16);
  dz.set(fake(0x100000), {kRows + 1, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dz': expected shape x's = [8, 4096], got shape [9, 4096]")));
  dz.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  rsigma.set(fake(0x500000), {kRows - 1}, kNVTEFloat32);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'rsigma': expected shape [rows] = [8]")));
  rsigma.set(fake(0x500000), {kRows}, kNVTEFloat32);
  dgamma.set(fake(0x800000), {kHidden / 2}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dgamma': expected shape [hidden] = [4096]")));
  dgamma.set(fake(0x800000), {kHidden}, kNVTEBFloat16);
  dx.set(fake(0x700000), {kRows, kHidden + 8}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dx': expected shape")));
  dx.set(fake(0x700000), {kRows, kHidden}, kNVTEBFloat16);
  mu.set(fake(0x400000), {kRows, 1}, kNVTEFloat32);
  EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr("argument 'mu': expected shape [rows] = [8]")));
  add.set(fake(0x300000), {kRows}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms_add(); }, ThrowsMessage<Error>(HasSubstr("argument 'add': expected shape x's")));
}

TEST_F(BwdErrors, Dtypes) {
  x.set(fake(0x200000), {kRows, kHidden}, kNVTEFloat8E4M3);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'x': expected dtype fp32, fp16 or bf16")));
  x.set(fake(0x200000), {kRows, kHidden}, kNVTEBFloat16);
  dz.set(fake(0x100000), {kRows, kHidden}, kNVTEFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dz': expected dtype bf16, got fp16")));
  dz.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  rsigma.set(fake(0x500000), {kRows}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'rsigma': expected dtype fp32, got bf16")));
  rsigma.set(fake(0x500000), {kRows}, kNVTEFloat32);
  gamma.set(fake(0x600000), {kHidden}, kNVTEFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'gamma': expected dtype bf16 (x's) or fp32")));
  gamma.set(fake(0x600000), {kHidden}, kNVTEFloat32);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dgamma': expected dtype fp32, got bf16")));
  gamma.set(fake(0x600000), {kHidden}, kNVTEBFloat16);
  dx.set(fake(0x700000), {kRows, kHidden}, kNVTEFloat32);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dx': expected dtype bf16, got fp32")));
  dx.set(fake(0x700000), {kRows, kHidden}, kNVTEBFloat16);
  dbeta.set(fake(0x900000), {kHidden}, kNVTEFloat32);
  EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr("argument 'dbeta': expected dtype bf16, got fp32")));
  add.set(fake(0x300000), {kRows, kHidden}, kNVTEFloat16);
  EXPECT_THAT([&] { rms_add(); }, ThrowsMessage<Error>(HasSubstr("argument 'add': expected dtype bf16, got fp16")));
}

TEST_F(BwdErrors, NegativeMultiprocessorCount) {
  EXPECT_THAT([&] { rms(-1); },
              ThrowsMessage<Error>(HasSubstr("argument 'multiprocessorCount': expected a count >= 0")));
}

}  // namespace
}  // namespace normtune
