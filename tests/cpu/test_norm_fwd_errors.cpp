// Bad input to the forward API: a clear error naming the argument, raised before any device
// work (these run without a GPU: the pointers are never dereferenced).
//
// The workspace protocol (TransformerEngine 2.18's): a workspace with no elements is the size
// query, which selects the kernel first and so needs the device (gpu/test_norm_fwd.cpp tests
// it). Any other workspace makes a real call, whose data (pointers, alignment, overlaps) is
// checked before the device is touched: the fixture's workspace is such a tensor, [16] bytes
// at a fake 16-byte aligned address.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
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
  Handle workspace{fake(0x900000), {16}, kNVTEByte};  // a real call's workspace (no query)

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
  gamma.set(fake(0x200000), {kHidden}, kNVTEFloat32);  // FP8 z needs gamma of x's dtype
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat8E4M3);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr(
                                  "argument 'z': expected dtype bf16 (x's), got fp8e4m3 (a quantized z takes gamma of x's dtype")));
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat4E2M1);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("e2m1 needs NVFP4 or MXFP4 scaling")));
  gamma.set(fake(0x200000), {kHidden}, kNVTEBFloat16);
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


TEST_F(FwdErrors, ArgumentErrorsLeaveAQueryUnanswered) {
  // Shape and dtype checks come before the query is answered: the workspace keeps no elements.
  Handle query;
  gamma.set(fake(0x200000), {kHidden}, kNVTEFloat16);
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, z, rsigma, query, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'gamma': expected dtype bf16 (x's) or fp32, got fp16")));
  EXPECT_EQ(nvte_tensor_numel(query), 0u);
  Handle zero_bytes{nullptr, {0}, kNVTEByte};  // a reset workspace is a query too
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, z, rsigma, zero_bytes, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'gamma'")));
  EXPECT_EQ(nvte_tensor_numel(zero_bytes), 0u);
  gamma.set(fake(0x200000), {kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, gamma, -1.f, z, rsigma, query, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'epsilon'")));
  EXPECT_EQ(nvte_tensor_numel(query), 0u);
}

TEST_F(FwdErrors, NullDataAndOverlaps) {
  x.set(nullptr, {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'x': expected a device pointer to 32768 elements, got NULL")));
  x.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  rsigma.set(nullptr, {kRows}, kNVTEFloat32);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'rsigma': expected a device pointer to 8 elements, got NULL")));
  rsigma.set(fake(0x600000), {kRows}, kNVTEFloat32);
  z.set(fake(0x100000 + 64), {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'z': expected memory separate from 'x'")));
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEBFloat16);
  residual_out.set(fake(0x700000 + 2), {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { add(); },
              ThrowsMessage<Error>(HasSubstr("argument 'residual_out': expected memory separate from 'residual'")));
}

TEST_F(FwdErrors, NullDataWithAWrongWorkspaceNamesTheData) {
  // Data checks run before the workspace is compared with the query's answer.
  workspace.set(fake(0x900000), {16}, kNVTEFloat32);
  x.set(nullptr, {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'x': expected a device pointer")));
  x.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  workspace.set(nullptr, {16}, kNVTEByte);
  gamma.set(nullptr, {kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'gamma': expected a device pointer to 4096 elements, got NULL")));
}

TEST_F(FwdErrors, OutputsOverlappingEachOther) {
  rsigma.set(fake(0x400000 + 64), {kRows}, kNVTEFloat32);  // inside z
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'z': expected memory separate from 'rsigma'")));
  rsigma.set(fake(0x600000), {kRows}, kNVTEFloat32);
  mu.set(fake(0x600000 + 16), {kRows}, kNVTEFloat32);  // overlaps rsigma's last 16 bytes
  EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr("argument 'mu': expected memory separate from 'rsigma'")));
  mu.set(fake(0x600000), {kRows}, kNVTEFloat32);  // exactly rsigma: no output may alias another
  EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr("argument 'mu': expected memory separate from 'rsigma'")));
  mu.set(fake(0x500000), {kRows}, kNVTEFloat32);
  residual_out.set(fake(0x400000), {kRows, kHidden}, kNVTEBFloat16);  // z
  EXPECT_THAT([&] { add(); }, ThrowsMessage<Error>(HasSubstr("argument 'z': expected memory separate from 'residual_out'")));
  residual_out.set(fake(0x800000), {kRows, kHidden}, kNVTEBFloat16);
  z.set(fake(0x200000), {kRows, kHidden}, kNVTEBFloat16);  // over gamma (an input)
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'z': expected memory separate from 'gamma'")));
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEBFloat16);
  rsigma.set(fake(0x100000), {kRows}, kNVTEFloat32);  // over x
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'rsigma': expected memory separate from 'x'")));
}

TEST_F(FwdErrors, OutputsOverlappingTheWorkspace) {
  workspace.set(fake(0x400000 + 4096), {16}, kNVTEByte);  // inside z
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'z': expected memory separate from 'workspace'")));
  workspace.set(fake(0x600000), {16}, kNVTEByte);  // rsigma
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'rsigma': expected memory separate from 'workspace'")));
}

TEST_F(FwdErrors, PointersMisalignedToTheirElements) {
  rsigma.set(fake(0x600002), {kRows}, kNVTEFloat32);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'rsigma': expected a pointer aligned to its 4-byte elements")));
  rsigma.set(fake(0x600000), {kRows}, kNVTEFloat32);
  x.set(fake(0x100001), {kRows, kHidden}, kNVTEBFloat16);
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'x': expected a pointer aligned to its 2-byte elements")));
  x.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  mu.set(fake(0x500006), {kRows}, kNVTEFloat32);
  EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr("argument 'mu': expected a pointer aligned to its 4-byte elements")));
  mu.set(fake(0x500000), {kRows}, kNVTEFloat32);
  gamma.set(fake(0x200002), {kHidden}, kNVTEFloat32);  // fp32 gamma with bf16 x
  EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr("argument 'gamma': expected a pointer aligned to its 4-byte elements")));
}

// Per-tensor FP8 z: scale and scale_inv required, amax optional, each one fp32 value; the
// written ones apart from every argument; only amax on a high-precision z; block scalings
// other than MXFP8 not yet.
TEST_F(FwdErrors, Fp8OutputBuffers) {
  auto expect = [&](const char* fragment) {
    EXPECT_THAT([&] { rms(); }, ThrowsMessage<Error>(HasSubstr(fragment)));
    EXPECT_THAT([&] { ln(); }, ThrowsMessage<Error>(HasSubstr(fragment)));
    EXPECT_THAT([&] { add(); }, ThrowsMessage<Error>(HasSubstr(fragment)));
  };
  mu.set(fake(0x500000), {kRows}, kNVTEFloat32);
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat8E4M3);
  expect("argument 'z.scale (kNVTEScale)': expected a buffer (z is fp8e4m3), got none");
  z.set_param(kNVTEScale, fake(0xA00000), {1}, kNVTEFloat32);
  expect("argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected a buffer (z is fp8e4m3), got none");
  z.set_param(kNVTERowwiseScaleInv, fake(0xA00100), {1}, kNVTEBFloat16);
  expect("argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected one fp32 value, got bf16 of shape [1]");
  z.set_param(kNVTERowwiseScaleInv, fake(0xA00100), {2}, kNVTEFloat32);
  expect("argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected one fp32 value, got fp32 of shape [2]");
  z.set_param(kNVTERowwiseScaleInv, fake(0xA00100), {1}, kNVTEFloat32);
  // amax is optional: without it the call is complete.
  expect_rejected_after_the_data_checks([&] { rms(); });
  expect_rejected_after_the_data_checks([&] { ln(); });
  expect_rejected_after_the_data_checks([&] { add(); });
  z.set_param(kNVTEAmax, fake(0xA00200), {1, 1}, kNVTEFloat32);  // one value, any rank
  expect_rejected_after_the_data_checks([&] { rms(); });
  z.set_param(kNVTEAmax, fake(0xA00200), {4}, kNVTEFloat32);
  expect("argument 'z.amax (kNVTEAmax)': expected one fp32 value, got fp32 of shape [4]");
  // A NULL pointer is no buffer, whatever the shape (TransformerEngine's TensorWrapper passes
  // {NULL, [1]} for the buffers it was not given): no amax, and a missing scale_inv.
  z.set_param(kNVTEAmax, nullptr, {1}, kNVTEFloat32);
  expect_rejected_after_the_data_checks([&] { rms(); });
  z.set_param(kNVTERowwiseScaleInv, nullptr, {1}, kNVTEFloat32);
  expect("argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected a buffer (z is fp8e4m3), got none (no buffer, or a "
         "NULL pointer)");
  z.set_param(kNVTERowwiseScaleInv, fake(0xA00100), {1}, kNVTEFloat32);
  // Data: aligned, the written buffers apart from everything else.
  z.set_param(kNVTEAmax, fake(0xA00202), {1}, kNVTEFloat32);
  expect("argument 'z.amax (kNVTEAmax)': expected a pointer aligned to 4 bytes");
  z.set_param(kNVTEAmax, fake(0x400000 + 64), {1}, kNVTEFloat32);
  expect("argument 'z.amax (kNVTEAmax)': expected memory separate from 'z'");
  z.set_param(kNVTEAmax, fake(0x100000), {1}, kNVTEFloat32);
  expect("argument 'z.amax (kNVTEAmax)': expected memory separate from 'x'");
  z.set_param(kNVTEAmax, fake(0xA00100), {1}, kNVTEFloat32);
  expect("argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected memory separate from 'z.amax (kNVTEAmax)'");
  z.set_param(kNVTEAmax, fake(0xA00200), {1}, kNVTEFloat32);
  z.set_param(kNVTERowwiseScaleInv, fake(0x600000), {1}, kNVTEFloat32);
  expect("argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected memory separate from 'rsigma'");
  // scale is only read: it may sit in an input's memory.
  z.set_param(kNVTERowwiseScaleInv, fake(0xA00100), {1}, kNVTEFloat32);
  z.set_param(kNVTEScale, fake(0x200000), {1}, kNVTEFloat32);
  expect_rejected_after_the_data_checks([&] { rms(); });
  // e5m2 too.
  z.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat8E5M2);
  expect_rejected_after_the_data_checks([&] { ln(); });

  // A high-precision z has none of these buffers.
  Handle plain{fake(0x400000), {kRows, kHidden}, kNVTEBFloat16};
  plain.set_param(kNVTEScale, fake(0xA00000), {1}, kNVTEFloat32);
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, plain, rsigma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'z.scale (kNVTEScale)': expected no buffer for a z of dtype bf16 "
                                             "(scales belong to FP8 outputs), got a buffer of shape [1]")));
  // ... given with a pointer: TensorWrapper's {NULL, [1]} placeholders are no buffers.
  Handle wrapper_style{fake(0x400000), {kRows, kHidden}, kNVTEBFloat16};
  for (const NVTETensorParam param : {kNVTEScale, kNVTEAmax, kNVTERowwiseScaleInv}) {
    wrapper_style.set_param(param, nullptr, {1}, kNVTEFloat32);
  }
  expect_rejected_after_the_data_checks(
      [&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, wrapper_style, rsigma, workspace, 0, false, nullptr); });
  // ... except an amax (of its rounded values), checked as an FP8 z's.
  Handle with_amax{fake(0x400000), {kRows, kHidden}, kNVTEBFloat16};
  const auto rms_amax = [&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, with_amax, rsigma, workspace, 0, false, nullptr); };
  with_amax.set_param(kNVTEAmax, fake(0xA00200), {1}, kNVTEFloat32);
  expect_rejected_after_the_data_checks(rms_amax);
  with_amax.set_param(kNVTEAmax, fake(0xA00200), {1}, kNVTEFloat16);
  EXPECT_THAT(rms_amax, ThrowsMessage<Error>(HasSubstr("argument 'z.amax (kNVTEAmax)': expected one fp32 value, got fp16")));
  with_amax.set_param(kNVTEAmax, fake(0x400000 + 64), {1}, kNVTEFloat32);
  EXPECT_THAT(rms_amax, ThrowsMessage<Error>(HasSubstr("argument 'z.amax (kNVTEAmax)': expected memory separate from 'z'")));
  // 2-D block scaling is not an output of the norms: a clear error, not a wrong result.
  Handle b2d{NVTE_BLOCK_SCALING_2D, fake(0x400000), {kRows, kHidden}, kNVTEFloat8E4M3};
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, b2d, rsigma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'z': expected NVTE_DELAYED_TENSOR_SCALING (unquantized, or FP8 "
                                             "with one per-tensor scale), NVTE_MXFP8_1D_SCALING, NVTE_BLOCK_SCALING_1D, "
                                             "NVTE_NVFP4_1D_SCALING or NVTE_NORMTUNE_MXFP4_1D_SCALING (2-D blocks are "
                                             "not supported), got NVTE_BLOCK_SCALING_2D")));
  // An e2m1 z needs its block scaling.
  Handle fp4_plain{fake(0x400000), {kRows, kHidden}, kNVTEFloat4E2M1};
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, fp4_plain, rsigma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'z': expected dtype bf16 (x's), fp8e4m3 or fp8e5m2, got fp4e2m1")));
  // Inputs are never quantized.
  Handle mx_x{NVTE_MXFP8_1D_SCALING, fake(0x100000), {kRows, kHidden}, kNVTEBFloat16};
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(mx_x, gamma, 1e-5f, z, rsigma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'x': expected NVTE_DELAYED_TENSOR_SCALING (an unquantized tensor)")));
}

// MXFP8 z: FP8 data, hidden divisible by 32, E8M0 scales of TransformerEngine's padded shape
// [roundup(rows, 128), roundup(hidden / 32, 4)] = [128, 128] here; no per-tensor buffers, no
// column-wise data with its own scales optionally; 16-byte aligned data.
TEST_F(FwdErrors, Mxfp8OutputBuffers) {
  auto expect = [&](const Handle& out, const char* fragment) {
    EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, out, rsigma, workspace, 0, false, nullptr); },
                ThrowsMessage<Error>(HasSubstr(fragment)));
    EXPECT_THAT([&] { nvte_layernorm_fwd(x, gamma, beta, 1e-5f, out, mu, rsigma, workspace, 0, false, nullptr); },
                ThrowsMessage<Error>(HasSubstr(fragment)));
    EXPECT_THAT([&] {
      normtune_rmsnorm_add_fwd(x, residual, gamma, 1e-5f, out, residual_out, rsigma, workspace, 0, false, nullptr);
    }, ThrowsMessage<Error>(HasSubstr(fragment)));
  };
  Handle mx{NVTE_MXFP8_1D_SCALING, fake(0x400000), {kRows, kHidden}, kNVTEBFloat16};
  expect(mx, "argument 'z': expected dtype fp8e4m3 or fp8e5m2 for NVTE_MXFP8_1D_SCALING, got bf16");
  mx.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat4E2M1);
  expect(mx, "argument 'z': expected dtype fp8e4m3 or fp8e5m2 for NVTE_MXFP8_1D_SCALING, got fp4e2m1");
  mx.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat8E4M3);
  expect(mx, "argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected the E8M0 block scales, e8m0 of shape [128, 128], got none");
  mx.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 128}, kNVTEFloat32);
  expect(mx, "expected e8m0 of shape [128, 128] = [roundup(rows, 128), roundup(hidden / 32, 4)], got fp32 of shape [128, 128]");
  mx.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {8, 128}, kNVTEFloat8E8M0);
  expect(mx, "got e8m0 of shape [8, 128]");
  mx.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 128}, kNVTEFloat8E8M0);
  expect_rejected_after_the_data_checks([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, mx, rsigma, workspace, 0, false, nullptr); });
  mx.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {256, 128}, kNVTEFloat8E8M0);  // rows 129..256: 256
  Handle x200{fake(0x100000), {200, kHidden}, kNVTEBFloat16}, rs200{fake(0x600000), {200}, kNVTEFloat32};
  Handle mx200{NVTE_MXFP8_1D_SCALING, fake(0x400000), {200, kHidden}, kNVTEFloat8E4M3};
  mx200.set_param(kNVTERowwiseScaleInv, fake(0xF00000), {256, 128}, kNVTEFloat8E8M0);
  expect_rejected_after_the_data_checks(
      [&] { nvte_rmsnorm_fwd(x200, gamma, 1e-5f, mx200, rs200, workspace, 0, false, nullptr); });
  mx.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 128}, kNVTEFloat8E8M0);
  // Per-tensor buffers and column-wise data are refused.
  mx.set_param(kNVTEAmax, fake(0xA00200), {1}, kNVTEFloat32);
  expect(mx, "argument 'z.amax (kNVTEAmax)': expected no buffer (an MXFP8 z has block scales only)");
  mx.set_param(kNVTEAmax, nullptr, {1}, kNVTEFloat32);  // TensorWrapper's placeholder: no buffer
  mx.set_param(kNVTEScale, nullptr, {1}, kNVTEFloat32);
  expect_rejected_after_the_data_checks([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, mx, rsigma, workspace, 0, false, nullptr); });
  // Column-wise data: the row-wise data's dtype and shape, its own scales
  // [roundup(ceil(rows / 32), 4), roundup(hidden, 128)] = [4, 4096] for 8 x 4096, no amax.
  mx.set_param(kNVTEColumnwiseData, fake(0xC00000), {kRows, kHidden}, kNVTEFloat8E5M2);
  expect(mx, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected fp8e4m3 of shape [8, 4096] (the row-wise "
             "data's), got fp8e5m2 of shape [8, 4096]");
  mx.set_param(kNVTEColumnwiseData, fake(0xC00000), {kHidden, kRows}, kNVTEFloat8E4M3);  // transposed: TE's is not
  expect(mx, "got fp8e4m3 of shape [4096, 8]");
  mx.set_param(kNVTEColumnwiseData, fake(0xC00000), {kRows, kHidden}, kNVTEFloat8E4M3);
  expect(mx, "argument 'z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)': expected the column-wise E8M0 block "
             "scales, e8m0 of shape [4, 4096], got none");
  mx.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {1, 4096}, kNVTEFloat8E8M0);
  expect(mx, "expected e8m0 of shape [4, 4096] = [roundup(ceil(rows / 32), 4), roundup(hidden, 128)], got e8m0 of "
             "shape [1, 4096]");
  mx.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {4, 4096}, kNVTEFloat32);
  expect(mx, "got fp32 of shape [4, 4096]");
  mx.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {4, 4096}, kNVTEFloat8E8M0);
  mx.set_param(kNVTEColumnwiseAmax, fake(0xA00300), {1}, kNVTEFloat32);
  expect(mx, "argument 'z.columnwise_amax (kNVTEColumnwiseAmax)': expected no buffer (an MXFP8 z has block scales "
             "only)");
  mx.set_param(kNVTEColumnwiseAmax, nullptr, {1}, kNVTEFloat32);
  expect_rejected_after_the_data_checks([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, mx, rsigma, workspace, 0, false, nullptr); });
  expect_rejected_after_the_data_checks([&] {
    nvte_layernorm_fwd(x, gamma, beta, 1e-5f, mx, mu, rsigma, workspace, 0, false, nullptr);
  });
  // Its data: present, 16-byte aligned, apart from every argument and the other scales.
  mx.set_param(kNVTEColumnwiseData, nullptr, {kRows, kHidden}, kNVTEFloat8E4M3);
  expect(mx, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected a device pointer to 32768 elements, got NULL");
  mx.set_param(kNVTEColumnwiseData, fake(0xC00008), {kRows, kHidden}, kNVTEFloat8E4M3);
  expect(mx, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected a 16-byte aligned pointer (MXFP8)");
  mx.set_param(kNVTEColumnwiseData, fake(0x400000), {kRows, kHidden}, kNVTEFloat8E4M3);  // z's row-wise data
  expect(mx, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected memory separate from 'z'");
  mx.set_param(kNVTEColumnwiseData, fake(0xC00000), {kRows, kHidden}, kNVTEFloat8E4M3);
  mx.set_param(kNVTEColumnwiseScaleInv, nullptr, {4, 4096}, kNVTEFloat8E8M0);
  expect(mx, "argument 'z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)': expected a device pointer to 16384 E8M0 "
             "scales, got NULL");
  mx.set_param(kNVTEColumnwiseScaleInv, fake(0xB00000 + 64), {4, 4096}, kNVTEFloat8E8M0);
  expect(mx, "argument 'z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)': expected memory separate from "
             "'z.scale_inv (kNVTERowwiseScaleInv)'");
  mx.set_param(kNVTEColumnwiseScaleInv, fake(0xC00000 + 1024), {4, 4096}, kNVTEFloat8E8M0);
  expect(mx, "expected memory separate from 'z.columnwise_data (kNVTEColumnwiseData)'");
  mx.set_param(kNVTEColumnwiseScaleInv, fake(0x100000), {4, 4096}, kNVTEFloat8E8M0);
  expect(mx, "argument 'z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)': expected memory separate from 'x'");
  mx.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {4, 4096}, kNVTEFloat8E8M0);
  // 200 rows: ceil(200 / 32) = 7 column blocks, padded to 8.
  {
    Handle x200{fake(0x100000), {200, kHidden}, kNVTEBFloat16}, rs200{fake(0x600000), {200}, kNVTEFloat32};
    Handle mx200{NVTE_MXFP8_1D_SCALING, fake(0x400000), {200, kHidden}, kNVTEFloat8E4M3};
    mx200.set_param(kNVTERowwiseScaleInv, fake(0xF00000), {256, 128}, kNVTEFloat8E8M0);
    mx200.set_param(kNVTEColumnwiseData, fake(0x1400000), {200, kHidden}, kNVTEFloat8E4M3);
    mx200.set_param(kNVTEColumnwiseScaleInv, fake(0x1600000), {7, 4096}, kNVTEFloat8E8M0);
    EXPECT_THAT([&] { nvte_rmsnorm_fwd(x200, gamma, 1e-5f, mx200, rs200, workspace, 0, false, nullptr); },
                ThrowsMessage<Error>(HasSubstr("expected e8m0 of shape [8, 4096]")));
    mx200.set_param(kNVTEColumnwiseScaleInv, fake(0x1600000), {8, 4096}, kNVTEFloat8E8M0);
    expect_rejected_after_the_data_checks(
        [&] { nvte_rmsnorm_fwd(x200, gamma, 1e-5f, mx200, rs200, workspace, 0, false, nullptr); });
  }
  // Column-wise data alone is refused (the norm's output is read row-wise first).
  {
    Handle conly{NVTE_MXFP8_1D_SCALING, nullptr, {0}, kNVTEFloat8E4M3};
    conly.set_param(kNVTEColumnwiseData, fake(0xC00000), {kRows, kHidden}, kNVTEFloat8E4M3);
    conly.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {4, 4096}, kNVTEFloat8E8M0);
    EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, conly, rsigma, workspace, 0, false, nullptr); },
                ThrowsMessage<Error>(HasSubstr("argument 'z': expected row-wise data (column-wise data alone is not supported)")));
  }
  // No rows: empty buffers may be NULL, as frameworks pass them.
  {
    Handle x0{nullptr, {0, kHidden}, kNVTEBFloat16}, rs0{nullptr, {0}, kNVTEFloat32};
    Handle mx0{NVTE_MXFP8_1D_SCALING, nullptr, {0, kHidden}, kNVTEFloat8E4M3};
    mx0.set_param(kNVTERowwiseScaleInv, nullptr, {0, 128}, kNVTEFloat8E8M0);
    mx0.set_param(kNVTEColumnwiseData, nullptr, {0, kHidden}, kNVTEFloat8E4M3);
    mx0.set_param(kNVTEColumnwiseScaleInv, nullptr, {0, 4096}, kNVTEFloat8E8M0);
    expect_rejected_after_the_data_checks(
        [&] { nvte_rmsnorm_fwd(x0, gamma, 1e-5f, mx0, rs0, workspace, 0, false, nullptr); });
  }
  mx.set_param(kNVTEColumnwiseData, nullptr, {0}, kNVTEFloat8E4M3);
  // Column-wise scales without column-wise data are not silently dropped.
  expect(mx, "argument 'z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)': expected no buffer without column-wise "
             "data (kNVTEColumnwiseData), got a buffer of shape [4, 4096]");
  mx.set_param(kNVTEColumnwiseScaleInv, nullptr, {0}, kNVTEFloat8E8M0);
  // Data: the scales present and apart from every argument; the rest 16-byte aligned.
  mx.set_param(kNVTERowwiseScaleInv, nullptr, {128, 128}, kNVTEFloat8E8M0);
  expect(mx, "argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected a device pointer to 16384 E8M0 scales, got NULL");
  mx.set_param(kNVTERowwiseScaleInv, fake(0x400000 + 4096), {128, 128}, kNVTEFloat8E8M0);
  expect(mx, "argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected memory separate from 'z'");
  mx.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 128}, kNVTEFloat8E8M0);
  x.set(fake(0x100002), {kRows, kHidden}, kNVTEBFloat16);
  expect(mx, "argument 'x': expected a 16-byte aligned pointer (MXFP8 output)");
  x.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  // Hidden sizes that are not whole blocks.
  Handle x48{fake(0x100000), {kRows, 48}, kNVTEBFloat16}, g48{fake(0x200000), {48}, kNVTEBFloat16},
      z48{NVTE_MXFP8_1D_SCALING, fake(0x400000), {kRows, 48}, kNVTEFloat8E4M3};
  EXPECT_THAT([&] { nvte_rmsnorm_fwd(x48, g48, 1e-5f, z48, rsigma, workspace, 0, false, nullptr); },
              ThrowsMessage<Error>(HasSubstr("argument 'z': expected a hidden size divisible by 32 (MXFP8 blocks of 32 "
                                             "elements), got 48")));
}

// NVFP4 with column-wise data (TransformerEngine's layout, kernels/block_scale.h): the
// transpose, e2m1 of shape [hidden, rows], rows a multiple of 16; E4M3 scales [roundup(hidden,
// 128), roundup(rows / 16, 4)]; an optional column-wise global amax (one fp32, read: apart from
// every output, the row-wise global amax apart from the column-wise outputs too); the
// column-wise buffers present, aligned and apart. MXFP4 and 1x128 FP8 stay row-wise only.
TEST_F(FwdErrors, Nvfp4ColumnwiseBuffers) {
  constexpr size_t kR = 48;  // three 16-row blocks: column-wise scales [4096, roundup(3, 4)] = [4096, 4]
  Handle x48{fake(0x100000), {kR, kHidden}, kNVTEBFloat16}, rs48{fake(0x600000), {kR}, kNVTEFloat32},
      mu48{fake(0x500000), {kR}, kNVTEFloat32}, res48{fake(0x700000), {kR, kHidden}, kNVTEBFloat16},
      res_out48{fake(0x800000), {kR, kHidden}, kNVTEBFloat16};
  auto calls = [&](const Handle& out) {
    return std::vector<std::function<void()>>{
        [&] { nvte_rmsnorm_fwd(x48, gamma, 1e-5f, out, rs48, workspace, 0, false, nullptr); },
        [&] { nvte_layernorm_fwd(x48, gamma, beta, 1e-5f, out, mu48, rs48, workspace, 0, false, nullptr); },
        [&] { normtune_rmsnorm_add_fwd(x48, res48, gamma, 1e-5f, out, res_out48, rs48, workspace, 0, false, nullptr); }};
  };
  auto expect = [&](const Handle& out, const char* fragment) {
    for (const auto& call : calls(out)) EXPECT_THAT(call, ThrowsMessage<Error>(HasSubstr(fragment)));
  };
  auto accepted = [&](const Handle& out) {
    for (const auto& call : calls(out)) expect_rejected_after_the_data_checks(call);
  };
  Handle nv{NVTE_NVFP4_1D_SCALING, fake(0x400000), {kR, kHidden}, kNVTEFloat4E2M1};
  nv.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 256}, kNVTEFloat8E4M3);
  nv.set_param(kNVTEAmax, fake(0xA00200), {1}, kNVTEFloat32);
  accepted(nv);
  nv.set_param(kNVTEColumnwiseAmax, fake(0xA00300), {1}, kNVTEFloat32);
  expect(nv, "argument 'z.columnwise_amax (kNVTEColumnwiseAmax)': expected no buffer without column-wise data "
             "(kNVTEColumnwiseData), got a buffer of shape [1]");
  nv.set_param(kNVTEColumnwiseAmax, nullptr, {1}, kNVTEFloat32);
  // The data: the transpose, in e2m1.
  nv.set_param(kNVTEColumnwiseData, fake(0xC00000), {kHidden, kR}, kNVTEFloat8E4M3);
  expect(nv, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected fp4e2m1 of shape [4096, 48] = [hidden, "
             "rows] (NVFP4's column-wise data is the transpose), got fp8e4m3 of shape [4096, 48]");
  nv.set_param(kNVTEColumnwiseData, fake(0xC00000), {kR, kHidden}, kNVTEFloat4E2M1);  // MXFP8's layout, not NVFP4's
  expect(nv, "got fp4e2m1 of shape [48, 4096]");
  nv.set_param(kNVTEColumnwiseData, fake(0xC00000), {kHidden, kR}, kNVTEFloat4E2M1);
  // Its scales.
  expect(nv, "argument 'z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)': expected the column-wise E4M3 block "
             "scales, fp8e4m3 of shape [4096, 4], got none");
  nv.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {4096, 4}, kNVTEFloat8E8M0);
  expect(nv, "expected fp8e4m3 of shape [4096, 4] = [roundup(hidden, 128), roundup(rows / 16, 4)], got e8m0 of "
             "shape [4096, 4]");
  nv.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {4, 4096}, kNVTEFloat8E4M3);  // MXFP8's orientation
  expect(nv, "got fp8e4m3 of shape [4, 4096]");
  nv.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {4096, 4}, kNVTEFloat8E4M3);
  accepted(nv);  // the column-wise encode scale from z.amax
  // The column-wise global amax: one fp32, read.
  nv.set_param(kNVTEColumnwiseAmax, fake(0xA00300), {2}, kNVTEFloat32);
  expect(nv, "argument 'z.columnwise_amax (kNVTEColumnwiseAmax)': expected one fp32 value (NVFP4: the column-wise "
             "global amax, read), got fp32 of shape [2]");
  nv.set_param(kNVTEColumnwiseAmax, fake(0xA00300), {1}, kNVTEBFloat16);
  expect(nv, "got bf16 of shape [1]");
  nv.set_param(kNVTEColumnwiseAmax, fake(0xA00302), {1}, kNVTEFloat32);
  expect(nv, "argument 'z.columnwise_amax (kNVTEColumnwiseAmax)': expected a pointer aligned to 4 bytes");
  nv.set_param(kNVTEColumnwiseAmax, fake(0x600000), {1}, kNVTEFloat32);  // rsigma's memory
  expect(nv, "argument 'z.columnwise_amax (kNVTEColumnwiseAmax)': expected memory separate from 'rsigma'");
  nv.set_param(kNVTEColumnwiseAmax, fake(0xC00000 + 256), {1}, kNVTEFloat32);
  expect(nv, "argument 'z.columnwise_amax (kNVTEColumnwiseAmax)': expected memory separate from 'z.columnwise_data "
             "(kNVTEColumnwiseData)'");
  nv.set_param(kNVTEColumnwiseAmax, fake(0xD00000 + 64), {1}, kNVTEFloat32);
  expect(nv, "expected memory separate from 'z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)'");
  nv.set_param(kNVTEColumnwiseAmax, fake(0xA00200), {1}, kNVTEFloat32);  // the row-wise amax's: both only read
  accepted(nv);
  nv.set_param(kNVTEColumnwiseAmax, fake(0xA00300), {1}, kNVTEFloat32);
  accepted(nv);
  // The row-wise global amax apart from the column-wise outputs.
  nv.set_param(kNVTEAmax, fake(0xD00000 + 128), {1}, kNVTEFloat32);
  expect(nv, "argument 'z.amax (kNVTEAmax)': expected memory separate from 'z.columnwise_scale_inv "
             "(kNVTEColumnwiseScaleInv)'");
  nv.set_param(kNVTEAmax, fake(0xA00200), {1}, kNVTEFloat32);
  // The column-wise buffers' data: present, aligned, apart from every argument and each other.
  nv.set_param(kNVTEColumnwiseData, nullptr, {kHidden, kR}, kNVTEFloat4E2M1);
  expect(nv, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected a device pointer to 196608 elements, "
             "got NULL");
  nv.set_param(kNVTEColumnwiseData, fake(0xC00008), {kHidden, kR}, kNVTEFloat4E2M1);
  expect(nv, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected a 16-byte aligned pointer (NVFP4)");
  nv.set_param(kNVTEColumnwiseData, fake(0x400000 + 4096), {kHidden, kR}, kNVTEFloat4E2M1);  // inside z's row-wise data
  expect(nv, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected memory separate from 'z'");
  nv.set_param(kNVTEColumnwiseData, fake(0xC00000), {kHidden, kR}, kNVTEFloat4E2M1);
  nv.set_param(kNVTEColumnwiseScaleInv, nullptr, {4096, 4}, kNVTEFloat8E4M3);
  expect(nv, "argument 'z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)': expected a device pointer to 16384 E4M3 "
             "scales, got NULL");
  nv.set_param(kNVTEColumnwiseScaleInv, fake(0xC00000 + 1024), {4096, 4}, kNVTEFloat8E4M3);
  expect(nv, "expected memory separate from 'z.columnwise_data (kNVTEColumnwiseData)'");
  nv.set_param(kNVTEColumnwiseScaleInv, fake(0xB00000 + 64), {4096, 4}, kNVTEFloat8E4M3);
  expect(nv, "argument 'z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)': expected memory separate from "
             "'z.scale_inv (kNVTERowwiseScaleInv)'");
  nv.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {4096, 4}, kNVTEFloat8E4M3);
  const uint8_t swizzled = 1;  // both scale tensors swizzled
  nvte_set_tensor_param_v2(nv, kNVTEWithGEMMSwizzledScales, &swizzled, sizeof(swizzled));
  accepted(nv);
  // A row count that is not whole 16-row blocks.
  {
    Handle x40{fake(0x100000), {40, kHidden}, kNVTEBFloat16}, rs40{fake(0x600000), {40}, kNVTEFloat32},
        nv40{NVTE_NVFP4_1D_SCALING, fake(0x400000), {40, kHidden}, kNVTEFloat4E2M1};
    nv40.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 256}, kNVTEFloat8E4M3);
    nv40.set_param(kNVTEColumnwiseData, fake(0xC00000), {kHidden, 40}, kNVTEFloat4E2M1);
    nv40.set_param(kNVTEColumnwiseScaleInv, fake(0xD00000), {4096, 4}, kNVTEFloat8E4M3);
    EXPECT_THAT([&] { nvte_rmsnorm_fwd(x40, gamma, 1e-5f, nv40, rs40, workspace, 0, false, nullptr); },
                ThrowsMessage<Error>(HasSubstr("argument 'z.columnwise_data (kNVTEColumnwiseData)': expected a row "
                                               "count divisible by 16 (NVFP4 column-wise blocks are 16 rows of a "
                                               "column), got 40")));
  }
  // MXFP4 and 1x128 FP8: row-wise only.
  {
    Handle mx4{NVTE_NORMTUNE_MXFP4_1D_SCALING, fake(0x400000), {kR, kHidden}, kNVTEFloat4E2M1};
    mx4.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 128}, kNVTEFloat8E8M0);
    mx4.set_param(kNVTEColumnwiseData, fake(0xC00000), {kHidden, kR}, kNVTEFloat4E2M1);
    expect(mx4, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected no column-wise data (MXFP4 z is "
                "row-wise only here; MXFP8 and NVFP4 also have column-wise)");
    Handle b128{NVTE_BLOCK_SCALING_1D, fake(0x400000), {kR, kHidden}, kNVTEFloat8E4M3};
    b128.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {32, 48}, kNVTEFloat32);
    b128.set_param(kNVTEColumnwiseData, fake(0xC00000), {kHidden, kR}, kNVTEFloat8E4M3);
    expect(b128, "expected no column-wise data (");
  }
}

// NVFP4, MXFP4 and FP8 with 1x128 block scales (kernels/block_scale.h): the data's dtype,
// hidden a multiple of the block, the scales' dtype and TransformerEngine's shape, no
// per-tensor buffers but NVFP4's global amax (read: apart from every output), no column-wise
// data, NVFP4's tensor flags as this library implements them; 16-byte aligned data.
TEST_F(FwdErrors, BlockScaledOutputBuffers) {
  auto expect = [&](const Handle& out, const char* fragment) {
    EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, out, rsigma, workspace, 0, false, nullptr); },
                ThrowsMessage<Error>(HasSubstr(fragment)));
    EXPECT_THAT([&] { nvte_layernorm_fwd(x, gamma, beta, 1e-5f, out, mu, rsigma, workspace, 0, false, nullptr); },
                ThrowsMessage<Error>(HasSubstr(fragment)));
    EXPECT_THAT([&] {
      normtune_rmsnorm_add_fwd(x, residual, gamma, 1e-5f, out, residual_out, rsigma, workspace, 0, false, nullptr);
    }, ThrowsMessage<Error>(HasSubstr(fragment)));
  };
  auto accepted = [&](const Handle& out) {
    expect_rejected_after_the_data_checks(
        [&] { nvte_rmsnorm_fwd(x, gamma, 1e-5f, out, rsigma, workspace, 0, false, nullptr); });
    expect_rejected_after_the_data_checks(
        [&] { nvte_layernorm_fwd(x, gamma, beta, 1e-5f, out, mu, rsigma, workspace, 0, false, nullptr); });
    expect_rejected_after_the_data_checks([&] {
      normtune_rmsnorm_add_fwd(x, residual, gamma, 1e-5f, out, residual_out, rsigma, workspace, 0, false, nullptr);
    });
  };
  // NVFP4: e2m1 data, E4M3 scales [roundup(rows, 128), roundup(hidden / 16, 4)] = [128, 256].
  Handle nv{NVTE_NVFP4_1D_SCALING, fake(0x400000), {kRows, kHidden}, kNVTEFloat8E4M3};
  expect(nv, "argument 'z': expected dtype fp4e2m1 for NVTE_NVFP4_1D_SCALING, got fp8e4m3");
  nv.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat4E2M1);
  expect(nv, "argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected the E4M3 block scales, fp8e4m3 of shape "
             "[128, 256], got none");
  nv.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 256}, kNVTEFloat8E8M0);
  expect(nv, "expected fp8e4m3 of shape [128, 256] = [roundup(rows, 128), roundup(hidden / 16, 4)], got e8m0 of "
             "shape [128, 256]");
  nv.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 128}, kNVTEFloat8E4M3);
  expect(nv, "got fp8e4m3 of shape [128, 128]");
  nv.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 256}, kNVTEFloat8E4M3);
  accepted(nv);  // no global amax: an encode scale of 1
  nv.set_param(kNVTEAmax, fake(0xA00200), {1}, kNVTEFloat32);
  accepted(nv);
  nv.set_param(kNVTEAmax, fake(0xA00200), {2}, kNVTEFloat32);
  expect(nv, "argument 'z.amax (kNVTEAmax)': expected one fp32 value (NVFP4: the global amax, read), got fp32 of "
             "shape [2]");
  nv.set_param(kNVTEAmax, fake(0xA00202), {1}, kNVTEFloat32);
  expect(nv, "argument 'z.amax (kNVTEAmax)': expected a pointer aligned to 4 bytes");
  nv.set_param(kNVTEAmax, fake(0x600000), {1}, kNVTEFloat32);  // rsigma's memory: written by the call
  expect(nv, "argument 'z.amax (kNVTEAmax)': expected memory separate from 'rsigma'");
  nv.set_param(kNVTEAmax, fake(0x100000), {1}, kNVTEFloat32);  // x's: only read, as the amax
  accepted(nv);
  nv.set_param(kNVTEAmax, fake(0xA00200), {1}, kNVTEFloat32);
  nv.set_param(kNVTEScale, fake(0xA00000), {1}, kNVTEFloat32);
  expect(nv, "argument 'z.scale (kNVTEScale)': expected no buffer (an NVFP4 z has block scales only)");
  nv.set_param(kNVTEScale, nullptr, {1}, kNVTEFloat32);
  {
    Handle row_scaled{NVTE_NVFP4_1D_SCALING, fake(0x400000), {kRows, kHidden}, kNVTEFloat4E2M1};
    row_scaled.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 256}, kNVTEFloat8E4M3);
    const uint8_t on = 1;
    nvte_set_tensor_param_v2(row_scaled, kNVTERowScaledNVFP4, &on, sizeof(on));
    expect(row_scaled, "argument 'z (kNVTERowScaledNVFP4)': expected false (one global amax per tensor; row-scaled "
                       "NVFP4 is not supported), got true");
    Handle four_over_six{NVTE_NVFP4_1D_SCALING, fake(0x400000), {kRows, kHidden}, kNVTEFloat4E2M1};
    four_over_six.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 256}, kNVTEFloat8E4M3);
    const int bound = 256;
    nvte_set_tensor_param_v2(four_over_six, kNVTENVFP4E4M3Max, &bound, sizeof(bound));
    expect(four_over_six, "argument 'z (kNVTENVFP4E4M3Max)': expected 448 (256 belongs to 4over6 quantization, not "
                          "supported), got 256");
  }
  // Column-wise data (Nvfp4ColumnwiseBuffers below) needs rows in whole 16-row blocks.
  nv.set_param(kNVTEColumnwiseData, fake(0xC00000), {kHidden, kRows}, kNVTEFloat4E2M1);
  expect(nv, "argument 'z.columnwise_data (kNVTEColumnwiseData)': expected a row count divisible by 16 (NVFP4 "
             "column-wise blocks are 16 rows of a column), got 8");
  nv.set_param(kNVTEColumnwiseData, nullptr, {0}, kNVTEFloat4E2M1);
  // Data: scales present and apart, z and the inputs 16-byte aligned; swizzled scales fine.
  nv.set_param(kNVTERowwiseScaleInv, nullptr, {128, 256}, kNVTEFloat8E4M3);
  expect(nv, "argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected a device pointer to 32768 E4M3 scales, got NULL");
  nv.set_param(kNVTERowwiseScaleInv, fake(0x400000 + 512), {128, 256}, kNVTEFloat8E4M3);
  expect(nv, "argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected memory separate from 'z'");
  nv.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 256}, kNVTEFloat8E4M3);
  x.set(fake(0x100008), {kRows, kHidden}, kNVTEBFloat16);
  expect(nv, "argument 'x': expected a 16-byte aligned pointer (NVFP4 output)");
  x.set(fake(0x100000), {kRows, kHidden}, kNVTEBFloat16);
  const uint8_t swizzled = 1;
  nvte_set_tensor_param_v2(nv, kNVTEWithGEMMSwizzledScales, &swizzled, sizeof(swizzled));
  accepted(nv);
  // A hidden size of 40 (not a multiple of 16) with a z of `mode`: the message.
  auto rejects_hidden_40 = [&](NVTEScalingMode mode, NVTEDType zdtype, const char* message) {
    Handle x40{fake(0x100000), {kRows, 40}, kNVTEBFloat16}, g40{fake(0x200000), {40}, kNVTEBFloat16},
        z40{mode, fake(0x400000), {kRows, 40}, zdtype};
    EXPECT_THAT([&] { nvte_rmsnorm_fwd(x40, g40, 1e-5f, z40, rsigma, workspace, 0, false, nullptr); },
                ThrowsMessage<Error>(HasSubstr(message)));
  };
  rejects_hidden_40(NVTE_NVFP4_1D_SCALING, kNVTEFloat4E2M1,
                    "argument 'z': expected a hidden size divisible by 16 (NVFP4 blocks of 16 elements), got 40");
  // e2m1 codes come from x of gamma's dtype.
  {
    Handle g32{fake(0x200000), {kHidden}, kNVTEFloat32};
    EXPECT_THAT([&] { nvte_rmsnorm_fwd(x, g32, 1e-5f, nv, rsigma, workspace, 0, false, nullptr); },
                ThrowsMessage<Error>(HasSubstr("argument 'z': expected no dtype: no supported z for x of dtype bf16, "
                                               "gamma of dtype fp32 and scaling nvfp4_1d, got fp4e2m1")));
  }

  // MXFP4 (normtune's mode): e2m1 data, E8M0 scales shaped as MXFP8's, no amax.
  Handle m4{NVTE_NORMTUNE_MXFP4_1D_SCALING, fake(0x400000), {kRows, kHidden}, kNVTEFloat8E4M3};
  expect(m4, "argument 'z': expected dtype fp4e2m1 for NVTE_NORMTUNE_MXFP4_1D_SCALING, got fp8e4m3");
  m4.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat4E2M1);
  m4.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 256}, kNVTEFloat8E8M0);
  expect(m4, "expected e8m0 of shape [128, 128] = [roundup(rows, 128), roundup(hidden / 32, 4)], got e8m0 of shape "
             "[128, 256]");
  m4.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {128, 128}, kNVTEFloat8E8M0);
  accepted(m4);
  m4.set_param(kNVTEAmax, fake(0xA00200), {1}, kNVTEFloat32);
  expect(m4, "argument 'z.amax (kNVTEAmax)': expected no buffer (an MXFP4 z has block scales only)");
  m4.set_param(kNVTEAmax, nullptr, {1}, kNVTEFloat32);
  nvte_set_tensor_param_v2(m4, kNVTEWithGEMMSwizzledScales, &swizzled, sizeof(swizzled));
  accepted(m4);

  // FP8 with 1x128 blocks: fp8 data, fp32 scale_inv [ceil(hidden / 128), roundup(rows, 4)] = [32, 8].
  Handle b1{NVTE_BLOCK_SCALING_1D, fake(0x400000), {kRows, kHidden}, kNVTEFloat4E2M1};
  expect(b1, "argument 'z': expected dtype fp8e4m3 or fp8e5m2 for NVTE_BLOCK_SCALING_1D, got fp4e2m1");
  b1.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat8E4M3);
  expect(b1, "argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected the fp32 block scales, fp32 of shape [32, 8], "
             "got none");
  b1.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {8, 32}, kNVTEFloat32);  // not transposed: TE's is
  expect(b1, "expected fp32 of shape [32, 8] = [ceil(hidden / 128), roundup(rows, 4)], got fp32 of shape [8, 32]");
  b1.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {32, 8}, kNVTEFloat32);
  accepted(b1);
  b1.set(fake(0x400000), {kRows, kHidden}, kNVTEFloat8E5M2);
  accepted(b1);
  b1.set_param(kNVTERowwiseScaleInv, fake(0xB00002), {32, 8}, kNVTEFloat32);
  expect(b1, "argument 'z.scale_inv (kNVTERowwiseScaleInv)': expected a pointer aligned to its 4-byte scales");
  b1.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {32, 8}, kNVTEFloat32);
  b1.set_param(kNVTEScale, fake(0xA00000), {1}, kNVTEFloat32);
  expect(b1, "argument 'z.scale (kNVTEScale)': expected no buffer (a 1x128-block FP8 z has block scales only)");
  b1.set_param(kNVTEScale, nullptr, {1}, kNVTEFloat32);
  nvte_set_tensor_param_v2(b1, kNVTEWithGEMMSwizzledScales, &swizzled, sizeof(swizzled));
  expect(b1, "argument 'z (kNVTEWithGEMMSwizzledScales)': expected false for NVTE_BLOCK_SCALING_1D");
  {
    // A partial last block (hidden 64 + 128 x k, as TransformerEngine allows): scale rows
    // ceil(hidden / 128); hidden must still be a multiple of 16.
    Handle x64{fake(0x100000), {kRows, 1088}, kNVTEBFloat16}, g64{fake(0x200000), {1088}, kNVTEBFloat16},
        z64{NVTE_BLOCK_SCALING_1D, fake(0x400000), {kRows, 1088}, kNVTEFloat8E4M3};
    auto rms64 = [&] { nvte_rmsnorm_fwd(x64, g64, 1e-5f, z64, rsigma, workspace, 0, false, nullptr); };
    z64.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {8, 8}, kNVTEFloat32);
    EXPECT_THAT(rms64, ThrowsMessage<Error>(HasSubstr("expected fp32 of shape [9, 8] = [ceil(hidden / 128), "
                                                      "roundup(rows, 4)], got fp32 of shape [8, 8]")));
    z64.set_param(kNVTERowwiseScaleInv, fake(0xB00000), {9, 8}, kNVTEFloat32);
    expect_rejected_after_the_data_checks(rms64);
    rejects_hidden_40(NVTE_BLOCK_SCALING_1D, kNVTEFloat8E4M3,
                      "argument 'z': expected a hidden size divisible by 16 (1x128-block FP8 blocks of 128 elements, "
                      "a row's last one may be partial), got 40");
  }
}

TEST_F(FwdErrors, ValidDataReachesTheDeviceStep) {
  // Elements aligned to themselves only (not to 16 bytes) pass the data checks.
  x.set(fake(0x100002), {kRows, kHidden}, kNVTEBFloat16);
  expect_rejected_after_the_data_checks([&] { rms(); });
  // residual_out may be residual itself (in place).
  residual_out.set(fake(0x700000), {kRows, kHidden}, kNVTEBFloat16);
  expect_rejected_after_the_data_checks([&] { add(); });
  expect_rejected_after_the_data_checks([&] { ln(); });
}

}  // namespace
}  // namespace normtune
