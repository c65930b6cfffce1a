// Turning backward kernels into registry entries: names, keys, the general entries of one
// variant, and the tuned table (registry/tuned/*.def, Backward and BackwardAdd lines)
// expanded shard by shard.
#pragma once

#include <string>

#include <normtune/registry/registry.h>

#include "fwd_registration.cuh"
#include "norm_bwd_launch.cuh"

namespace normtune {

template <typename Traits>
NormKey bwd_key(int hidden) {
  NormKey k;
  k.norm = Traits::kRmsNorm ? NormType::kRMSNorm : NormType::kLayerNorm;
  k.stage = Traits::kAddGrad ? Stage::kBackwardAdd : Stage::kBackward;
  k.wtype = Elem<typename Traits::Weight>::kDType;
  k.itype = Elem<typename Traits::Input>::kDType;
  k.otype = k.itype;  // dx
  k.ctype = DType::kFloat32;
  k.hidden_size = static_cast<uint32_t>(hidden);
  return k;
}

// rmsnorm_bwd_bf16_bf16 (gamma's type, then x's) (+ "_h7168_n2_g128_r1" for a tuned entry).
template <typename Traits>
std::string bwd_kernel_name() {
  std::string name = Traits::kRmsNorm ? "rmsnorm" : "layernorm";
  name += Traits::kAddGrad ? "_bwd_add_" : "_bwd_";
  name += dtype_name(Elem<typename Traits::Weight>::kDType);
  name += '_';
  name += dtype_name(Elem<typename Traits::Input>::kDType);
  return name;
}

template <typename Traits>
void add_general_bwd(Registry& registry) {
  KernelEntry e;
  e.key = bwd_key<Traits>(kAnyHiddenSize);
  e.name = bwd_kernel_name<Traits>() + "_general";
  e.config = "layout planned per call: row in registers (vector or scalar), or column tiles";
  e.run = run_bwd_general<Traits>;
  e.workspace_bytes = bwd_general_workspace<Traits>;
  registry.add_general(std::move(e));
}

// The named fields of a tuned backward entry's config.
struct BwdTunedConfig {
  int vecs_per_thread = 1;  // 16-byte vectors of x and dz each thread holds; 0: long rows
  int threads_per_row = 1;  // threads sharing a row
  int rows_per_cta = 1;     // rows a CTA holds at once
};

template <typename Traits, int kHidden, int kN, int kG, int kR>
void add_tuned_bwd(Registry& registry, ArchFamily arch, const Provenance& provenance) {
  using Tuned = TunedBwd<Traits, kHidden, kN, kG, kR>;
  KernelEntry e;
  e.key = bwd_key<Traits>(kHidden);
  e.arch = arch;
  e.name = kN > 0 ? detail::concat(bwd_kernel_name<Traits>(), "_h", kHidden, "_n", kN, "_g", kG, "_r", kR)
                  : detail::concat(bwd_kernel_name<Traits>(), "_h", kHidden, "_columns");
  e.config = detail::concat("vecs_per_thread=", kN, " threads_per_row=", kG, " rows_per_cta=", kR);
  e.can_implement = Tuned::can_implement;
  e.run = Tuned::run;
  e.workspace_bytes = Tuned::workspace;
  e.provenance = provenance;
  registry.add_tuned(std::move(e));
}

}  // namespace normtune
