// The catalogue of bad calls: every entry point of the C API, every kind of mistake, each a
// table row with the message fragment it must raise. The tensors' memory is host memory
// poisoned with one byte pattern, standing in for device memory: a rejected call must not
// touch it (it is checked byte for byte after every row), and none of these calls reaches
// the device (a row whose call got that far would fail on its message).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <normtune/common/error.h>
#include <normtune/normalization.h>

#include "fake_handles.h"

namespace normtune {
namespace {

using test::fake;
using test::Handle;

constexpr size_t kRows = 8, kHidden = 256;
constexpr uint8_t kPoison = 0xA5;

// One arena of host memory cut into 256-byte aligned slots, each large enough for an fp32
// [kRows, kHidden] tensor.
class Arena {
 public:
  static constexpr size_t kSlot = kRows * kHidden * 4;
  Arena() : mem_(kSlots * kSlot + 256, kPoison) {}
  void* slot(int i) {
    const uintptr_t base = (reinterpret_cast<uintptr_t>(mem_.data()) + 255) & ~uintptr_t{255};
    return reinterpret_cast<void*>(base + static_cast<size_t>(i) * kSlot);
  }
  // The first byte that is no longer the poison, or -1.
  ptrdiff_t first_written() const {
    for (size_t i = 0; i < mem_.size(); ++i) {
      if (mem_[i] != kPoison) return static_cast<ptrdiff_t>(i);
    }
    return -1;
  }

 private:
  static constexpr int kSlots = 16;
  std::vector<uint8_t> mem_;
};

// Every tensor of every entry point, valid for bf16 [kRows, kHidden] until a row changes one.
struct Call {
  Arena arena;
  Handle x{arena.slot(0), {kRows, kHidden}, kNVTEBFloat16};
  Handle residual{arena.slot(1), {kRows, kHidden}, kNVTEBFloat16};
  Handle gamma{arena.slot(2), {kHidden}, kNVTEBFloat16};
  Handle beta{arena.slot(3), {kHidden}, kNVTEBFloat16};
  Handle z{arena.slot(4), {kRows, kHidden}, kNVTEBFloat16};
  Handle residual_out{arena.slot(5), {kRows, kHidden}, kNVTEBFloat16};
  Handle mu{arena.slot(6), {kRows}, kNVTEFloat32};
  Handle rsigma{arena.slot(7), {kRows}, kNVTEFloat32};
  Handle dz{arena.slot(8), {kRows, kHidden}, kNVTEBFloat16};
  Handle add{arena.slot(9), {kRows, kHidden}, kNVTEBFloat16};
  Handle dx{arena.slot(10), {kRows, kHidden}, kNVTEBFloat16};
  Handle dgamma{arena.slot(11), {kHidden}, kNVTEBFloat16};
  Handle dbeta{arena.slot(12), {kHidden}, kNVTEBFloat16};
  Handle workspace{arena.slot(13), {16}, kNVTEByte};  // a real call's workspace (not a query)
  float epsilon = 1e-5f;
  int sms = 0;
  // Overrides of a handle argument (NULL, destroyed or foreign handles).
  NVTETensor x_arg = nullptr, gamma_arg = nullptr, z_arg = nullptr, beta_arg = nullptr, residual_arg = nullptr,
             dz_arg = nullptr, mu_arg = nullptr;
  bool null_x = false, null_gamma = false, null_z = false, null_beta = false, null_residual = false,
       null_dz = false, null_mu = false;

  NVTETensor pick(NVTETensor h, NVTETensor over, bool null) const { return null ? nullptr : over ? over : h; }

  void rms_fwd() {
    nvte_rmsnorm_fwd(pick(x, x_arg, null_x), pick(gamma, gamma_arg, null_gamma), epsilon, pick(z, z_arg, null_z),
                     rsigma, workspace, sms, false, nullptr);
  }
  void ln_fwd() {
    nvte_layernorm_fwd(pick(x, x_arg, null_x), pick(gamma, gamma_arg, null_gamma), pick(beta, beta_arg, null_beta),
                       epsilon, pick(z, z_arg, null_z), mu, rsigma, workspace, sms, false, nullptr);
  }
  void add_fwd() {
    normtune_rmsnorm_add_fwd(pick(x, x_arg, null_x), pick(residual, residual_arg, null_residual), gamma, epsilon, z,
                             residual_out, rsigma, workspace, sms, false, nullptr);
  }
  void rms_bwd() {
    nvte_rmsnorm_bwd(pick(dz, dz_arg, null_dz), x, rsigma, gamma, dx, dgamma, workspace, sms, false, nullptr);
  }
  void rms_bwd_add() {
    nvte_rmsnorm_bwd_add(pick(dz, dz_arg, null_dz), x, add, rsigma, gamma, dx, dgamma, workspace, sms, false, nullptr);
  }
  void ln_bwd() {
    nvte_layernorm_bwd(pick(dz, dz_arg, null_dz), x, pick(mu, mu_arg, null_mu), rsigma, gamma, dx, dgamma, dbeta,
                       workspace, sms, false, nullptr);
  }
};

using Entry = void (Call::*)();
struct BadCall {
  const char* what;
  Entry entry;
  std::function<void(Call&)> spoil;
  const char* message;  // a fragment of the error
};

void* at(Call& c, int slot, size_t byte_offset = 0) { return static_cast<char*>(c.arena.slot(slot)) + byte_offset; }
const NVTETensor kForeign = fake(0x12345678);

const BadCall kCatalogue[] = {
    // ---- handles
    {"x NULL", &Call::rms_fwd, [](Call& c) { c.null_x = true; },
     "argument 'x': expected a valid NVTETensor handle, got NULL"},
    {"gamma NULL (LayerNorm)", &Call::ln_fwd, [](Call& c) { c.null_gamma = true; },
     "argument 'gamma': expected a valid NVTETensor handle, got NULL"},
    {"beta NULL", &Call::ln_fwd, [](Call& c) { c.null_beta = true; },
     "argument 'beta': expected a valid NVTETensor handle, got NULL"},
    {"z NULL", &Call::rms_fwd, [](Call& c) { c.null_z = true; },
     "argument 'z': expected a valid NVTETensor handle, got NULL"},
    {"residual NULL", &Call::add_fwd, [](Call& c) { c.null_residual = true; },
     "argument 'residual': expected a valid NVTETensor handle, got NULL"},
    {"dz NULL", &Call::rms_bwd, [](Call& c) { c.null_dz = true; },
     "argument 'dz': expected a valid NVTETensor handle, got NULL"},
    {"mu NULL (LayerNorm backward)", &Call::ln_bwd, [](Call& c) { c.null_mu = true; },
     "argument 'mu': expected a valid NVTETensor handle, got NULL"},
    {"gamma destroyed", &Call::rms_fwd,
     [](Call& c) {
       c.gamma_arg = nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
       nvte_destroy_tensor(c.gamma_arg);
     },
     "(already destroyed)"},
    {"z foreign", &Call::rms_fwd, [](Call& c) { c.z_arg = kForeign; }, "(not created by nvte_create_tensor)"},
    {"dz foreign", &Call::ln_bwd, [](Call& c) { c.dz_arg = kForeign; }, "(not created by nvte_create_tensor)"},
    // ---- shapes
    {"x 1-D", &Call::rms_fwd, [](Call& c) { c.x.set(at(c, 0), {kRows * kHidden}, kNVTEBFloat16); },
     "argument 'x': expected a 2-D tensor [rows, hidden]"},
    {"x 3-D", &Call::ln_fwd, [](Call& c) { c.x.set(at(c, 0), {2, 4, kHidden}, kNVTEBFloat16); },
     "argument 'x': expected a 2-D tensor [rows, hidden]"},
    {"hidden 0", &Call::rms_fwd, [](Call& c) { c.x.set(at(c, 0), {kRows, 0}, kNVTEBFloat16); },
     "argument 'x': expected a hidden size (last dim) in [1, 16777215], got 0"},
    {"hidden 2^24", &Call::rms_bwd, [](Call& c) { c.x.set(at(c, 0), {1, size_t{1} << 24}, kNVTEBFloat16); },
     "argument 'x': expected a hidden size (last dim) in [1, 16777215], got 16777216"},
    {"rows beyond the limit", &Call::rms_fwd,
     [](Call& c) { c.x.set(at(c, 0), {size_t{1} << 61, 4}, kNVTEByte); }, "argument 'x': expected fewer rows"},
    {"gamma [hidden - 1]", &Call::rms_fwd, [](Call& c) { c.gamma.set(at(c, 2), {kHidden - 1}, kNVTEBFloat16); },
     "argument 'gamma': expected shape [hidden] = [256], got shape [255]"},
    {"beta [2, hidden]", &Call::ln_fwd, [](Call& c) { c.beta.set(at(c, 3), {2, kHidden}, kNVTEBFloat16); },
     "argument 'beta': expected shape"},
    {"z transposed", &Call::rms_fwd, [](Call& c) { c.z.set(at(c, 4), {kHidden, kRows}, kNVTEBFloat16); },
     "argument 'z': expected shape"},
    {"rsigma [rows + 1]", &Call::rms_fwd, [](Call& c) { c.rsigma.set(at(c, 7), {kRows + 1}, kNVTEFloat32); },
     "argument 'rsigma': expected shape [rows] = [8]"},
    {"mu [rows - 1]", &Call::ln_fwd, [](Call& c) { c.mu.set(at(c, 6), {kRows - 1}, kNVTEFloat32); },
     "argument 'mu': expected shape [rows] = [8]"},
    {"residual other rows", &Call::add_fwd,
     [](Call& c) { c.residual.set(at(c, 1), {kRows / 2, kHidden}, kNVTEBFloat16); }, "argument 'residual': expected shape"},
    {"dgamma [hidden + 1]", &Call::rms_bwd, [](Call& c) { c.dgamma.set(at(c, 11), {kHidden + 1}, kNVTEBFloat16); },
     "argument 'dgamma': expected shape"},
    {"add other hidden", &Call::rms_bwd_add, [](Call& c) { c.add.set(at(c, 9), {kRows, kHidden / 2}, kNVTEBFloat16); },
     "argument 'add': expected shape"},
    // ---- dtypes
    {"x int32", &Call::rms_fwd, [](Call& c) { c.x.set(at(c, 0), {kRows, kHidden}, kNVTEInt32); },
     "argument 'x': expected dtype fp32, fp16 or bf16, got int32"},
    {"gamma fp16 for bf16 x", &Call::rms_fwd, [](Call& c) { c.gamma.set(at(c, 2), {kHidden}, kNVTEFloat16); },
     "argument 'gamma': expected dtype bf16 (x's) or fp32, got fp16"},
    {"beta fp32 beside a bf16 gamma", &Call::ln_fwd, [](Call& c) { c.beta.set(at(c, 3), {kHidden}, kNVTEFloat32); },
     "argument 'beta': expected dtype bf16, got fp32"},
    {"rsigma bf16", &Call::rms_fwd, [](Call& c) { c.rsigma.set(at(c, 7), {kRows}, kNVTEBFloat16); },
     "argument 'rsigma': expected dtype fp32, got bf16"},
    {"z fp4", &Call::rms_fwd, [](Call& c) { c.z.set(at(c, 4), {kRows, kHidden}, kNVTEFloat4E2M1); },
     "e2m1 needs NVFP4 or MXFP4 scaling"},
    {"residual fp32 beside bf16 x", &Call::add_fwd,
     [](Call& c) { c.residual.set(at(c, 1), {kRows, kHidden}, kNVTEFloat32); },
     "argument 'residual': expected dtype bf16, got fp32"},
    {"dz fp16 beside bf16 x", &Call::rms_bwd, [](Call& c) { c.dz.set(at(c, 8), {kRows, kHidden}, kNVTEFloat16); },
     "argument 'dz': expected dtype bf16"},
    {"dx fp32 beside bf16 x", &Call::ln_bwd, [](Call& c) { c.dx.set(at(c, 10), {kRows, kHidden}, kNVTEFloat32); },
     "argument 'dx': expected dtype bf16"},
    {"dbeta fp16 beside bf16 gamma", &Call::ln_bwd, [](Call& c) { c.dbeta.set(at(c, 12), {kHidden}, kNVTEFloat16); },
     "argument 'dbeta': expected dtype bf16"},
    {"mu fp16 (LayerNorm backward)", &Call::ln_bwd, [](Call& c) { c.mu.set(at(c, 6), {kRows}, kNVTEFloat16); },
     "argument 'mu': expected dtype fp32, got fp16"},
    // ---- scaling modes
    {"x MXFP8", &Call::rms_fwd,
     [](Call& c) {
       c.x_arg = nvte_create_tensor(NVTE_MXFP8_1D_SCALING);
       NVTEBasicTensor b{at(c, 0), kNVTEBFloat16, nvte_make_shape(std::vector<size_t>{kRows, kHidden}.data(), 2)};
       nvte_set_tensor_param_v2(c.x_arg, kNVTERowwiseData, &b, sizeof(b));
     },
     "argument 'x': expected NVTE_DELAYED_TENSOR_SCALING (an unquantized tensor)"},
    // ---- data
    {"x NULL data", &Call::rms_fwd, [](Call& c) { c.x.set(nullptr, {kRows, kHidden}, kNVTEBFloat16); },
     "argument 'x': expected a device pointer to 2048 elements, got NULL"},
    {"gamma NULL data (backward)", &Call::rms_bwd, [](Call& c) { c.gamma.set(nullptr, {kHidden}, kNVTEBFloat16); },
     "argument 'gamma': expected a device pointer to 256 elements, got NULL"},
    {"add NULL data", &Call::rms_bwd_add, [](Call& c) { c.add.set(nullptr, {kRows, kHidden}, kNVTEBFloat16); },
     "argument 'add': expected a device pointer"},
    {"z over x", &Call::rms_fwd, [](Call& c) { c.z.set(at(c, 0, 512), {kRows, kHidden}, kNVTEBFloat16); },
     "argument 'z': expected memory separate from 'x'"},
    {"rsigma inside z", &Call::rms_fwd, [](Call& c) { c.rsigma.set(at(c, 4, 64), {kRows}, kNVTEFloat32); },
     "expected memory separate from"},
    {"mu over rsigma", &Call::ln_fwd, [](Call& c) { c.mu.set(at(c, 7), {kRows}, kNVTEFloat32); },
     "argument 'mu': expected memory separate from 'rsigma'"},
    {"residual_out half over residual", &Call::add_fwd,
     [](Call& c) { c.residual_out.set(at(c, 1, 2), {kRows, kHidden}, kNVTEBFloat16); },
     "argument 'residual_out': expected memory separate from 'residual'"},
    {"dx over x", &Call::rms_bwd, [](Call& c) { c.dx.set(at(c, 0), {kRows, kHidden}, kNVTEBFloat16); },
     "argument 'dx': expected memory separate from 'x'"},
    {"dbeta over dgamma", &Call::ln_bwd, [](Call& c) { c.dbeta.set(at(c, 11), {kHidden}, kNVTEBFloat16); },
     "expected memory separate from"},
    {"workspace over gamma", &Call::rms_bwd, [](Call& c) { c.workspace.set(at(c, 2), {16}, kNVTEByte); },
     "expected memory separate from"},
    // ---- scalars
    {"epsilon negative", &Call::rms_fwd, [](Call& c) { c.epsilon = -1.f; },
     "argument 'epsilon': expected a finite value >= 0, got -1"},
    {"epsilon NaN", &Call::ln_fwd, [](Call& c) { c.epsilon = std::nanf(""); }, "argument 'epsilon': expected a finite value"},
    {"epsilon Inf", &Call::add_fwd, [](Call& c) { c.epsilon = INFINITY; }, "argument 'epsilon': expected a finite value"},
    {"multiprocessorCount negative (forward)", &Call::rms_fwd, [](Call& c) { c.sms = -4; },
     "argument 'multiprocessorCount': expected a count >= 0"},
    {"multiprocessorCount negative (backward)", &Call::ln_bwd, [](Call& c) { c.sms = -1; },
     "argument 'multiprocessorCount': expected a count >= 0"},
};

TEST(BadCallCatalogue, AtLeastFortyDistinctRows) {
  EXPECT_GE(std::size(kCatalogue), 40u);
  std::vector<std::string> names;
  for (const BadCall& b : kCatalogue) names.push_back(b.what);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "two rows with one name";
}

TEST(BadCallCatalogue, EveryRowIsAClearErrorAndWritesNothing) {
  for (const BadCall& b : kCatalogue) {
    SCOPED_TRACE(b.what);
    Call c;
    ASSERT_NO_THROW(b.spoil(c));
    std::string message;
    try {
      (c.*b.entry)();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      message = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "raised something other than normtune::Error: " << e.what();
    }
    EXPECT_THAT(message, ::testing::HasSubstr(b.message));
    EXPECT_EQ(c.arena.first_written(), -1) << "a rejected call wrote the tensors' memory";
    if (c.x_arg != nullptr && c.x_arg != kForeign) nvte_destroy_tensor(c.x_arg);
  }
}

}  // namespace
}  // namespace normtune
