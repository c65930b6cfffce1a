// nvte_rmsnorm_bwd, nvte_rmsnorm_bwd_add, nvte_layernorm_bwd: check the arguments against the
// entry point's table, build the key, select the kernel, answer the workspace query, check
// the data, run.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

#include <normtune/common/device_info.h>
#include <normtune/normtune.h>
#include <normtune/tuning.h>

#include "api/api_common.h"
#include "cudnn/backend_choice.h"
#include "kernels/norm_bwd_args.h"

namespace normtune {

namespace {

// Where the backward entry points keep their handles.
enum BwdSlot : int { kDz, kX, kAdd, kMu, kRsigma, kGamma, kDx, kDgamma, kDbeta, kNumBwdSlots };
static_assert(kNumBwdSlots <= kMaxCallSlots);

constexpr ArgSpec kDz_{"dz", kDz, Role::kIn, ShapeRule::kRowsHidden, DTypeRule::kSameAsInput};
constexpr ArgSpec kX_{"x", kX, Role::kIn, ShapeRule::kRowsHidden, DTypeRule::kInputType};
constexpr ArgSpec kRsigma_{"rsigma", kRsigma, Role::kIn, ShapeRule::kRows, DTypeRule::kFp32};
constexpr ArgSpec kGamma_{"gamma", kGamma, Role::kIn, ShapeRule::kHidden, DTypeRule::kWeightType};
// dx may be dz itself (in place: every element is read before it is written, by the thread
// that writes it), or, with an added gradient, add itself.
constexpr ArgSpec kDx_{"dx", kDx, Role::kOut, ShapeRule::kRowsHidden, DTypeRule::kSameAsInput, in_place_of(kDz)};
constexpr ArgSpec kDgamma_{"dgamma", kDgamma, Role::kOut, ShapeRule::kHidden, DTypeRule::kSameAsWeight};

constexpr ArgSpec kRmsArgs[] = {kDz_, kX_, kRsigma_, kGamma_, kDx_, kDgamma_};
constexpr ArgSpec kRmsAddArgs[] = {
    kDz_, kX_, {"add", kAdd, Role::kIn, ShapeRule::kRowsHidden, DTypeRule::kSameAsInput}, kRsigma_, kGamma_,
    {"dx", kDx, Role::kOut, ShapeRule::kRowsHidden, DTypeRule::kSameAsInput, in_place_of(kDz, kAdd)}, kDgamma_};
constexpr ArgSpec kLayerArgs[] = {
    kDz_, kX_, {"mu", kMu, Role::kIn, ShapeRule::kRows, DTypeRule::kFp32}, kRsigma_, kGamma_, kDx_, kDgamma_,
    {"dbeta", kDbeta, Role::kOut, ShapeRule::kHidden, DTypeRule::kSameAsWeight}};

constexpr CallSpec kRmsBwd{"nvte_rmsnorm_bwd", NormType::kRMSNorm, Stage::kBackward, kRmsArgs};
constexpr CallSpec kRmsAddBwd{"nvte_rmsnorm_bwd_add", NormType::kRMSNorm, Stage::kBackwardAdd, kRmsAddArgs};
constexpr CallSpec kLayerBwd{"nvte_layernorm_bwd", NormType::kLayerNorm, Stage::kBackward, kLayerArgs};
static_assert(spec_is_valid(kRmsBwd) && spec_is_valid(kRmsAddBwd) && spec_is_valid(kLayerBwd));

// The workspace a backward call needs, whatever its buffers' addresses: the largest need of
// the kernels that could serve the key (its tuned entry; the general entry with vector-aligned
// and with unaligned data). Which of them runs depends on alignment, and a size query may be
// made without data (TE's JAX binding) or with other buffers than the real call: both calls
// must get the same answer. A kernel uses only its own part of a larger workspace.
size_t workspace_bound(const NormKey& key, const BwdArgs& args, bool general_only) {
  BwdArgs aligned = args;  // null pointers count as aligned
  BwdParams& a = aligned.params;
  a.dz = a.x = a.add = a.gamma = nullptr;
  a.dx = nullptr;
  BwdArgs unaligned = aligned;
  const auto misaligned = reinterpret_cast<void*>(uintptr_t{4});  // never dereferenced: sizes only
  BwdParams& u = unaligned.params;
  u.dz = u.x = u.gamma = misaligned;
  u.dx = misaligned;
  auto need = [](const KernelEntry* e, const BwdArgs& with) {
    return e != nullptr && e->workspace_bytes != nullptr ? e->workspace_bytes(&with) : size_t{0};
  };
  const Registry& registry = kernel_registry();
  size_t bytes = 0;
  if (!general_only) {
    const Selection tuned = registry.select(key, current_arch_family(), &aligned);
    if (tuned.tuned) bytes = need(tuned.entry, aligned);
  }
  const KernelEntry* general = registry.select(key.general(), ArchFamily::kAny, &aligned).entry;
  return std::max({bytes, need(general, aligned), need(general, unaligned)});
}

void norm_bwd(const CallSpec& spec, const std::array<NVTETensor, kNumBwdSlots>& handles,
              NVTETensor workspace, int multiprocessorCount, bool zero_centered_gamma, cudaStream_t stream) {
  const CheckedCall call = check_call(spec, handles, multiprocessorCount);
  NORMTUNE_CHECK_ARG(call.rows <= static_cast<size_t>(std::numeric_limits<int>::max()), "x",
                     "at most 2^31 - 1 rows", call.rows);
  const NormKey key = key_of_call(spec, call, zero_centered_gamma);
  if (!is_size_query(workspace)) check_call_data(spec, call, workspace);

  BwdArgs args;
  BwdParams& p = args.params;
  p.dz = call.data(kDz);
  p.x = call.data(kX);
  p.add = call.data(kAdd);
  p.mu = static_cast<const float*>(call.data(kMu));
  p.rsigma = static_cast<const float*>(call.data(kRsigma));
  p.gamma = call.data(kGamma);
  p.dx = call.data(kDx);
  p.dgamma = call.data(kDgamma);
  p.dbeta = call.data(kDbeta);
  p.rows = static_cast<int64_t>(call.rows);
  p.hidden = static_cast<int>(call.hidden);
  p.zero_centered_gamma = zero_centered_gamma;
  const DeviceInfo& dev = device_info(current_device());
  args.sm_bound = sm_bound(multiprocessorCount, dev.sm_count);
  args.clusters = dev.supports_clusters;
  args.cudnn_gamma_in_wtype = zero_centered_gamma && zero_centered_gamma_in_weight_dtype();
  args.smem_per_cta = dev.shared_memory_per_block_optin;

  // With a plan override (the autotuner), the general kernel runs with that layout.
  const bool general_only = backward_plan_override() != nullptr;
  const KernelEntry& entry = select_kernel(key, &args, general_only);
  const size_t own = entry.backend == Backend::kNative ? workspace_bound(key, args, general_only)
                     : entry.workspace_bytes != nullptr ? entry.workspace_bytes(&args)
                                                        : 0;
  const size_t bytes =
      answered_workspace(key, &args, own, [&] { return workspace_bound(key, args, general_only); });
  if (workspace_protocol(workspace, bytes)) return;
  args.workspace = const_tensor_from_handle(workspace, "workspace").data.dptr;
  run_kernel(entry, &args, stream);
}

}  // namespace
}  // namespace normtune

extern "C" {

void nvte_rmsnorm_bwd(const NVTETensor dz, const NVTETensor x, const NVTETensor rsigma,
                      const NVTETensor gamma, NVTETensor dx, NVTETensor dgamma,
                      NVTETensor workspace, const int multiprocessorCount,
                      const bool zero_centered_gamma, cudaStream_t stream) {
  normtune::norm_bwd(normtune::kRmsBwd, {dz, x, nullptr, nullptr, rsigma, gamma, dx, dgamma, nullptr},
                     workspace, multiprocessorCount, zero_centered_gamma, stream);
}

void nvte_rmsnorm_bwd_add(const NVTETensor dz, const NVTETensor x, const NVTETensor add,
                          const NVTETensor rsigma, const NVTETensor gamma, NVTETensor dx,
                          NVTETensor dgamma, NVTETensor workspace, const int multiprocessorCount,
                          const bool zero_centered_gamma, cudaStream_t stream) {
  normtune::norm_bwd(normtune::kRmsAddBwd, {dz, x, add, nullptr, rsigma, gamma, dx, dgamma, nullptr},
                     workspace, multiprocessorCount, zero_centered_gamma, stream);
}

void nvte_layernorm_bwd(const NVTETensor dz, const NVTETensor x, const NVTETensor mu,
                        const NVTETensor rsigma, const NVTETensor gamma, NVTETensor dx,
                        NVTETensor dgamma, NVTETensor dbeta, NVTETensor workspace,
                        const int multiprocessorCount, const bool zero_centered_gamma,
                        cudaStream_t stream) {
  normtune::norm_bwd(normtune::kLayerBwd, {dz, x, nullptr, mu, rsigma, gamma, dx, dgamma, dbeta},
                     workspace, multiprocessorCount, zero_centered_gamma, stream);
}

}  // extern "C"
