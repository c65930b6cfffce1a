// nvte_rmsnorm_fwd, nvte_layernorm_fwd, normtune_rmsnorm_add_fwd: check the arguments against
// the entry point's table, build the key, select the kernel, answer the workspace query,
// check the data, run.
#include <algorithm>
#include <array>
#include <cmath>

#include <normtune/common/device_info.h>
#include <normtune/tuning.h>

#include "api/api_common.h"
#include "cudnn/backend_choice.h"
#include "kernels/norm_fwd_args.h"

namespace normtune {

namespace {

// Where the forward entry points keep their handles.
enum FwdSlot : int { kX, kResidual, kGamma, kBeta, kZ, kResidualOut, kMu, kRsigma, kNumFwdSlots };
static_assert(kNumFwdSlots <= kMaxCallSlots);

constexpr ArgSpec kX_{"x", kX, Role::kIn, ShapeRule::kRowsHidden, DTypeRule::kInputType};
constexpr ArgSpec kGamma_{"gamma", kGamma, Role::kIn, ShapeRule::kHidden, DTypeRule::kWeightType};
constexpr ArgSpec kZ_{"z", kZ, Role::kOut, ShapeRule::kRowsHidden, DTypeRule::kOutputType};
constexpr ArgSpec kRsigma_{"rsigma", kRsigma, Role::kOut, ShapeRule::kRows, DTypeRule::kFp32};

constexpr ArgSpec kRmsArgs[] = {kX_, kGamma_, kZ_, kRsigma_};
constexpr ArgSpec kLayerArgs[] = {
    kX_, kGamma_, {"beta", kBeta, Role::kIn, ShapeRule::kHidden, DTypeRule::kSameAsWeight},
    kZ_, {"mu", kMu, Role::kOut, ShapeRule::kRows, DTypeRule::kFp32}, kRsigma_};
// residual_out may be residual itself (in place).
constexpr ArgSpec kRmsAddArgs[] = {
    kX_, {"residual", kResidual, Role::kIn, ShapeRule::kRowsHidden, DTypeRule::kSameAsInput}, kGamma_, kZ_,
    {"residual_out", kResidualOut, Role::kOut, ShapeRule::kRowsHidden, DTypeRule::kSameAsInput, in_place_of(kResidual)},
    kRsigma_};

constexpr CallSpec kRmsFwd{"nvte_rmsnorm_fwd", NormType::kRMSNorm, Stage::kForward, kRmsArgs};
constexpr CallSpec kLayerFwd{"nvte_layernorm_fwd", NormType::kLayerNorm, Stage::kForward, kLayerArgs};
constexpr CallSpec kRmsAddFwd{"normtune_rmsnorm_add_fwd", NormType::kRMSNorm, Stage::kForwardAdd, kRmsAddArgs};
static_assert(spec_is_valid(kRmsFwd) && spec_is_valid(kLayerFwd) && spec_is_valid(kRmsAddFwd));

void norm_fwd(const CallSpec& spec, const std::array<NVTETensor, kNumFwdSlots>& handles,
              NVTETensor workspace, float epsilon, int multiprocessorCount, bool zero_centered_gamma,
              cudaStream_t stream) {
  const CheckedCall call = check_call(spec, handles, multiprocessorCount);
  NORMTUNE_CHECK_ARG(epsilon >= 0.f && std::isfinite(epsilon), "epsilon", "a finite value >= 0", epsilon);
  const NormKey key = key_of_call(spec, call, zero_centered_gamma);
  if (!is_size_query(workspace)) check_call_data(spec, call, workspace);

  const DeviceInfo& dev = device_info(current_device());
  FwdArgs args;
  FwdParams& p = args.params;
  p.x = call.data(kX);
  p.residual = call.data(kResidual);
  p.gamma = call.data(kGamma);
  p.beta = call.data(kBeta);
  p.z = call.data(kZ);
  p.residual_out = call.data(kResidualOut);
  p.mu = static_cast<float*>(call.data(kMu));
  p.rsigma = static_cast<float*>(call.data(kRsigma));
  if (const Tensor& z = *call.by_slot[kZ]; z.scaling_mode != NVTE_DELAYED_TENSOR_SCALING) {  // block-scaled (checked)
    p.block_scales = static_cast<uint8_t*>(z.scale_inv.dptr);
    p.swizzled_scales = z.with_gemm_swizzled_scales;
    if (z.scaling_mode == NVTE_NVFP4_1D_SCALING) p.global_amax = static_cast<const float*>(z.amax.dptr);
    if (z.has_columnwise_data()) {
      p.z_colwise = z.columnwise_data.dptr;
      p.colwise_block_scales = static_cast<uint8_t*>(z.columnwise_scale_inv.dptr);
      if (z.scaling_mode == NVTE_NVFP4_1D_SCALING) {  // none of its own: the row-wise one (TE's rule)
        p.colwise_global_amax =
            z.columnwise_amax.dptr != nullptr ? static_cast<const float*>(z.columnwise_amax.dptr) : p.global_amax;
      }
    }
  } else {
    if (is_fp8(z.data.dtype)) {  // per-tensor FP8
      p.scale = static_cast<const float*>(z.scale.dptr);
      p.scale_inv = static_cast<float*>(z.scale_inv.dptr);
    }
    p.amax = static_cast<float*>(z.amax.dptr);  // FP8 or high precision; may be null
  }
  p.rows = static_cast<int64_t>(call.rows);
  p.hidden = static_cast<int>(call.hidden);
  p.epsilon = epsilon;
  p.zero_centered_gamma = zero_centered_gamma;
  args.sm_bound = sm_bound(multiprocessorCount, dev.sm_count);
  args.clusters = dev.supports_clusters;
  args.cudnn_gamma_in_wtype = zero_centered_gamma && zero_centered_gamma_in_weight_dtype();

  // The kernel is chosen before the workspace query is answered, so that the size is the
  // chosen kernel's. With a plan override (the autotuner) the general kernel runs.
  const KernelEntry& entry = select_kernel(key, &args, forward_plan_override() != nullptr);
  const size_t bytes = answered_workspace(key, &args, entry.workspace_bytes != nullptr ? entry.workspace_bytes(&args) : 0,
                                          [] { return size_t{0}; });  // (the native forward needs none)
  if (workspace_protocol(workspace, bytes)) return;
  if (call.rows == 0) return;
  args.workspace = const_tensor_from_handle(workspace, "workspace").data.dptr;
  run_kernel(entry, &args, stream);
}

}  // namespace
}  // namespace normtune

extern "C" {

void nvte_layernorm_fwd(const NVTETensor x, const NVTETensor gamma, const NVTETensor beta,
                        const float epsilon, NVTETensor z, NVTETensor mu, NVTETensor rsigma,
                        NVTETensor workspace, const int multiprocessorCount,
                        const bool zero_centered_gamma, cudaStream_t stream) {
  normtune::norm_fwd(normtune::kLayerFwd, {x, nullptr, gamma, beta, z, nullptr, mu, rsigma}, workspace,
                     epsilon, multiprocessorCount, zero_centered_gamma, stream);
}

void nvte_rmsnorm_fwd(const NVTETensor x, const NVTETensor gamma, const float epsilon,
                      NVTETensor z, NVTETensor rsigma, NVTETensor workspace,
                      const int multiprocessorCount, const bool zero_centered_gamma,
                      cudaStream_t stream) {
  normtune::norm_fwd(normtune::kRmsFwd, {x, nullptr, gamma, nullptr, z, nullptr, nullptr, rsigma}, workspace,
                     epsilon, multiprocessorCount, zero_centered_gamma, stream);
}

void normtune_rmsnorm_add_fwd(const NVTETensor x, const NVTETensor residual,
                              const NVTETensor gamma, const float epsilon, NVTETensor z,
                              NVTETensor residual_out, NVTETensor rsigma, NVTETensor workspace,
                              const int multiprocessorCount, const bool zero_centered_gamma,
                              cudaStream_t stream) {
  normtune::norm_fwd(normtune::kRmsAddFwd, {x, residual, gamma, nullptr, z, residual_out, nullptr, rsigma},
                     workspace, epsilon, multiprocessorCount, zero_centered_gamma, stream);
}

}  // extern "C"
