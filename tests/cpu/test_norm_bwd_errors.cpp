// Bad input to the backward API: a clear error naming the argument, raised before any
// device work (these run without a GPU: the pointers are never dereferenced).
//
// The workspace protocol (TransformerEngine 2.18's): a workspace with no elements is the size
// query, which selects the kernel first and so needs the device (gpu/test_norm_bwd.cpp tests
// it, and the workspace size errors). Any other workspace makes a real call, whose data
// (pointers, alignment, overlaps) is checked before the device is touched: the fixture's
// workspace is such a tensor, [16] bytes at a fake 16-byte aligned address.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/normalization.h>

#include "fake_handles.h"

namespace normtune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

using test::fake;
using test::Handle;
using test::expect_rejected_after_the_data_checks;

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
  Handle workspace{fake(0xA00000), {16}, kNVTEByte};  // a real call's workspace (no query)

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


TEST_F(BwdErrors, ArgumentErrorsLeaveAQueryUnanswered) {
  Handle query;
  dx.set(fake(0x700000), {kRows, kHidden}, kNVTEFloat32);
  EXPECT_THAT([&] { nvte_rmsnorm_bwd(dz, x, rsigma, gamma, dx, dgamma, query, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'dx': expected dtype bf16, got fp32")));
  EXPECT_EQ(nvte_tensor_numel(query), 0u);
  Handle zero_bytes{nullptr, {0}, kNVTEByte};
  EXPECT_THAT([&] { nvte_rmsnorm_bwd(dz, x, rsigma, gamma, dx, dgamma, zero_bytes, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'dx'")));
  EXPECT_EQ(nvte_tensor_numel(zero_bytes), 0u);
}

TEST_F(BwdErrors, NullData) {
  dz.set(nullptr, {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dz': expected a device pointer to 32768 elements, got NULL")));
  dz.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  mu.set(nullptr, {kRows}, kNVTEFloat32);
  EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr("argument 'mu': expected a device pointer to 8 elements, got NULL")));
  mu.set(fake(0x400000), {kRows}, kNVTEFloat32);
  dgamma.set(nullptr, {kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms_add(); }, ThrowsMessage<Error>(HasSubstr("argument 'dgamma': expected a device pointer")));
  dgamma.set(fake(0x800000), {kHidden}, kNVTEBFloat16);
  // Data checks come before the workspace is compared with the query's answer.
  workspace.set(nullptr, {16}, kNVTEFloat32);
  add.set(nullptr, {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms_add(); }, ThrowsMessage<Error>(HasSubstr("argument 'add': expected a device pointer")));
}

TEST_F(BwdErrors, Overlaps) {
  dx.set(fake(0x200000), {kRows, kHidden}, kNVTEBFloat16);  // x
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dx': expected memory separate from 'x'")));
  dx.set(fake(0x100000 + 2), {kRows, kHidden}, kNVTEBFloat16);  // a shifted view of dz (dz itself is in place)
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dx': expected memory separate from 'dz'")));
  dx.set(fake(0x300000 + 16), {kRows, kHidden}, kNVTEBFloat16);  // a shifted view of add
  EXPECT_THAT([&] { rms_add(); }, ThrowsMessage<Error>(HasSubstr("argument 'dx': expected memory separate from 'add'")));
  dx.set(fake(0x700000), {kRows, kHidden}, kNVTEBFloat16);
  dgamma.set(fake(0x700000 + 64), {kHidden}, kNVTEBFloat16);  // inside dx
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dx': expected memory separate from 'dgamma'")));
  dgamma.set(fake(0x900000), {kHidden}, kNVTEBFloat16);  // dbeta
  EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr("argument 'dgamma': expected memory separate from 'dbeta'")));
  dgamma.set(fake(0x600000), {kHidden}, kNVTEBFloat16);  // gamma
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dgamma': expected memory separate from 'gamma'")));
  dgamma.set(fake(0x800000), {kHidden}, kNVTEBFloat16);
  workspace.set(fake(0x800000 - 16), {32}, kNVTEByte);  // ends inside dgamma
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dgamma': expected memory separate from 'workspace'")));
  workspace.set(fake(0x700000), {16}, kNVTEByte);  // dx
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dx': expected memory separate from 'workspace'")));
  // The backward writes its partials into the workspace while it reads the inputs.
  workspace.set(fake(0x600000 + 32), {16}, kNVTEByte);  // inside gamma
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'workspace': expected memory separate from 'gamma'")));
  workspace.set(fake(0x200000), {64}, kNVTEByte);  // x
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'workspace': expected memory separate from 'x'")));
}

TEST_F(BwdErrors, PointersMisalignedToTheirElements) {
  rsigma.set(fake(0x500002), {kRows}, kNVTEFloat32);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'rsigma': expected a pointer aligned to its 4-byte elements")));
  rsigma.set(fake(0x500000), {kRows}, kNVTEFloat32);
  mu.set(fake(0x400001), {kRows}, kNVTEFloat32);
  EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr("argument 'mu': expected a pointer aligned to its 4-byte elements")));
  mu.set(fake(0x400000), {kRows}, kNVTEFloat32);
  dz.set(fake(0x100001), {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dz': expected a pointer aligned to its 2-byte elements")));
  dz.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  gamma.set(fake(0x600000), {kHidden}, kNVTEFloat32);
  dgamma.set(fake(0x800002), {kHidden}, kNVTEFloat32);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'dgamma': expected a pointer aligned to its 4-byte elements")));
}

TEST_F(BwdErrors, InPlaceAndValidDataReachTheDeviceStep) {
  expect_rejected_after_the_data_checks([&] { rms(); });
  expect_rejected_after_the_data_checks([&] { ln(); });
  dx.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);  // dz itself
  expect_rejected_after_the_data_checks([&] { rms(); });
  expect_rejected_after_the_data_checks([&] { rms_add(); });
  dx.set(fake(0x300000), {kRows, kHidden}, kNVTEBFloat16);  // add itself
  expect_rejected_after_the_data_checks([&] { rms_add(); });
}

}  // namespace
}  // namespace normtune
