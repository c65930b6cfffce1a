// Turning forward kernels into registry entries: names, keys, the general entries of one
// variant, and the tuned table (registry/tuned/*.def) expanded shard by shard.
#pragma once

#include <string>
#include <type_traits>

#include <normtune/registry/registry.h>

#include "norm_fwd_launch.cuh"

namespace normtune {

// The type tokens of the .def tables.
using fp32 = float;
using fp16 = fp16_t;
using bf16 = bf16_t;

template <typename Traits>
NormKey fwd_key(int hidden) {
  NormKey k;
  k.norm = Traits::kRmsNorm ? NormType::kRMSNorm : NormType::kLayerNorm;
  k.stage = Traits::kResidualAdd ? Stage::kForwardAdd : Stage::kForward;
  k.wtype = Elem<typename Traits::Weight>::kDType;
  k.itype = Elem<typename Traits::Input>::kDType;
  k.otype = Elem<typename Traits::Output>::kDType;
  k.ctype = DType::kFloat32;
  k.hidden_size = static_cast<uint32_t>(hidden);
  return k;
}

// rmsnorm_fwd_bf16_bf16_bf16 (+ "_h7168_n4_g224_c1" for a tuned entry).
template <typename Traits>
std::string fwd_kernel_name() {
  std::string name = Traits::kRmsNorm ? "rmsnorm" : "layernorm";
  name += Traits::kResidualAdd ? "_add_fwd_" : "_fwd_";
  name += dtype_name(Elem<typename Traits::Weight>::kDType);
  name += '_';
  name += dtype_name(Elem<typename Traits::Input>::kDType);
  name += '_';
  name += dtype_name(Elem<typename Traits::Output>::kDType);
  return name;
}

template <typename Traits>
void add_general_fwd(Registry& registry) {
  KernelEntry e;
  e.key = fwd_key<Traits>(kAnyHiddenSize);
  e.name = fwd_kernel_name<Traits>() + "_general";
  e.config = "layout planned per call: row in registers (vector or scalar), or streamed";
  e.run = run_fwd_general<Traits>;
  registry.add_general(std::move(e));
}

// The named fields of a tuned forward entry's config.
struct FwdTunedConfig {
  int vecs_per_thread = 1;  // 16-byte vectors each thread holds in registers
  int threads_per_row = 1;  // threads sharing a row
  int ctas_per_row = 1;     // cluster size (CTAs sharing a row)
  int rows_per_cta = 1;     // rows a CTA holds at once
  bool persistent = true;   // grid bounded by resident CTAs, or one row tile per CTA
};

template <typename Traits, int kHidden, int kN, int kG, int kC, int kR, bool kPersistent>
void add_tuned_fwd(Registry& registry, ArchFamily arch, const Provenance& provenance) {
  using Tuned = TunedFwd<Traits, kHidden, kN, kG, kC, kR, kPersistent>;
  KernelEntry e;
  e.key = fwd_key<Traits>(kHidden);
  e.arch = arch;
  e.name = detail::concat(fwd_kernel_name<Traits>(), "_h", kHidden, "_n", kN, "_g", kG, "_c", kC,
                          "_r", kR, kPersistent ? "_p" : "");
  e.config = detail::concat("vecs_per_thread=", kN, " threads_per_row=", kG, " ctas_per_row=", kC,
                            " rows_per_cta=", kR, " persistent=", kPersistent);
  e.can_implement = Tuned::can_implement;
  e.run = Tuned::run;
  e.provenance = provenance;
  registry.add_tuned(std::move(e));
}

#define NORMTUNE_UNPAREN(...) __VA_ARGS__

// T, made dependent on a template parameter: a table line's config is then checked only in
// the expansion that keeps the line (forward and backward lines have different fields).
template <int kDependency, typename T>
using DependentOn = std::conditional_t<kDependency >= 0, T, T>;

}  // namespace normtune
