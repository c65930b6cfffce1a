// Turning kernels into registry entries, for both directions: the key and the procedural
// name of a kernel (from its traits, through make_key and the op table), its general entry,
// and a tuned entry from a table line (hidden size and plan as compile-time constants).
#pragma once

#include <string>
#include <type_traits>

#include <normtune/registry/op.h>
#include <normtune/registry/registry.h>
#include <normtune/tuning.h>

#include "launch/norm_bwd_launch.cuh"
#include "launch/norm_fwd_launch.cuh"

namespace normtune {

// The type tokens of register/type_lists.def and the tuned tables.
using fp32 = float;
using fp16 = fp16_t;
using bf16 = bf16_t;
using fp8e4m3 = fp8e4m3_t;
using fp8e5m2 = fp8e5m2_t;
using fp4e2m1 = fp4e2m1_t;

// FwdTraits or BwdTraits for (norm, stage), the types of a list line and z's scaling.
template <NormType kNorm, Stage kStage, typename W, typename I, typename O,
          ScalingMode kScaling = ScalingMode::kNone>
using TraitsFor = std::conditional_t<is_backward(kStage), BwdTraits<W, I, kNorm, kStage>,
                                     FwdTraits<W, I, O, kNorm, kStage, kScaling>>;

template <typename Traits>
constexpr ScalingMode scaling_of() {
  if constexpr (requires { Traits::kScaling; }) {
    return Traits::kScaling;
  } else {
    return ScalingMode::kNone;
  }
}

// The key of a kernel (hidden size kAnyHiddenSize for a general entry).
template <typename Traits>
constexpr NormKey key_of(uint32_t hidden_size) {
  return make_key(Traits::kNorm, Traits::kStage, Elem<typename Traits::Weight>::kDType,
                  Elem<typename Traits::Input>::kDType, Elem<typename Traits::Output>::kDType, hidden_size,
                  scaling_of<Traits>());
}

// The kernel name's tag of z's scaling: "" (none), "_mxfp8", "_block1d", "_nvfp4", "_mxfp4".
constexpr const char* scaling_tag(ScalingMode m) {
  switch (m) {
    case ScalingMode::kMxfp8_1D: return "_mxfp8";
    case ScalingMode::kBlock1D: return "_block1d";
    case ScalingMode::kNvfp4_1D: return "_nvfp4";
    case ScalingMode::kMxfp4_1D: return "_mxfp4";
    default: return "";
  }
}

// rmsnorm_fwd_bf16_bf16_bf16 (gamma's, x's, z's type; scaling_tag for block-scaled z); a
// backward names gamma's and x's.
template <typename Traits>
std::string kernel_base_name() {
  const NormKey k = key_of<Traits>(kAnyHiddenSize);
  std::string name = detail::concat(op_of(k.norm, k.stage).kernel_name, "_", dtype_name(k.wtype), "_",
                                    dtype_name(k.itype));
  if (!is_backward(k.stage)) name += detail::concat("_", dtype_name(k.otype));
  name += scaling_tag(k.scaling);
  return name;
}

template <typename Traits>
void add_general(Registry& registry) {
  using General = std::conditional_t<is_backward(Traits::kStage), GeneralBwd<Traits>, GeneralFwd<Traits>>;
  KernelEntry e;
  e.key = key_of<Traits>(kAnyHiddenSize);
  e.name = kernel_base_name<Traits>() + "_general";
  e.config = General::kConfig;
  e.run = General::run;
  e.workspace_bytes = General::workspace;
  registry.add_general(std::move(e));
}

// The general entries of one op: every line of its type list.
template <NormType kNorm, Stage kStage>
void add_general_entries(Registry& registry) {
#define NORMTUNE_FWD_TYPES(w, i, o) \
  if constexpr (!is_backward(kStage)) add_general<TraitsFor<kNorm, kStage, w, i, o>>(registry);
#define NORMTUNE_FWD_SCALED_TYPES(w, i, o, scaling)                                                \
  if constexpr (!is_backward(kStage)) {                                                            \
    add_general<TraitsFor<kNorm, kStage, w, i, o, ScalingMode::k##scaling>>(registry);              \
  }
#define NORMTUNE_BWD_TYPES(w, i) \
  if constexpr (is_backward(kStage)) add_general<TraitsFor<kNorm, kStage, w, i, i>>(registry);
#include "register/type_lists.def"
#undef NORMTUNE_FWD_TYPES
#undef NORMTUNE_FWD_SCALED_TYPES
#undef NORMTUNE_BWD_TYPES
}

// The launcher type of a tuned entry, by the type of its plan (declarations only: the
// overload that is not viable for the plan's type drops out).
template <typename Traits, int kHidden, FwdPlan kPlan>
TunedFwd<Traits, kHidden, kPlan> tuned_launcher();
template <typename Traits, int kHidden, BwdPlan kPlan>
TunedBwd<Traits, kHidden, kPlan> tuned_launcher();

// A tuned entry: kPlan is the table line's FwdPlan or BwdPlan.
template <typename Traits, int kHidden, auto kPlan>
void add_tuned(Registry& registry, ArchFamily arch, const Provenance& provenance, RowClass rows) {
  using Plan = std::remove_cvref_t<decltype(kPlan)>;
  static_assert(std::is_same_v<Plan, BwdPlan> == is_backward(Traits::kStage),
                "a forward line needs a FwdPlan config, a backward line a BwdPlan");
  static_assert(kPlan == canonical(kPlan), "a tuned line sets a field its layout does not use");
  KernelEntry e;
  e.key = key_of<Traits>(kHidden);
  e.key.rows = rows;
  e.arch = arch;
  e.name = detail::concat(kernel_base_name<Traits>(), "_h", kHidden, row_class_tag(rows), name_tags(kPlan));
  e.config = config_string(kPlan);
  using Tuned = decltype(tuned_launcher<Traits, kHidden, kPlan>());
  e.can_implement = Tuned::can_implement;
  e.run = Tuned::run;
  e.workspace_bytes = Tuned::workspace;
  e.provenance = provenance;
  registry.add_tuned(std::move(e));
}

// A line naming another backend (cuDNN) for a key: no kernel of ours, a record the call's
// selection reads (Registry::tuned_backend).
template <typename Traits>
void add_tuned_backend(Registry& registry, ArchFamily arch, Backend backend, RowClass rows, int hidden,
                       const Provenance& provenance) {
  TunedBackendLine line;
  line.key = key_of<Traits>(hidden);
  line.key.rows = rows;
  line.arch = arch;
  line.backend = backend;
  line.name = detail::concat(kernel_base_name<Traits>(), "_h", hidden, row_class_tag(rows), "_", backend_name(backend));
  line.provenance = provenance;
  registry.add_tuned_backend(std::move(line));
}

// The kShard-th part of a tuned table (lines whose number modulo NORMTUNE_TUNED_SHARDS is
// kShard), forward or backward lines; the generated tuned_sm90_<dir>_<k>.cu files
// instantiate it.
#define NORMTUNE_UNPAREN(...) __VA_ARGS__

// T, made dependent on a template parameter: a line's config is then checked only in the
// expansion that keeps the line (forward and backward lines have different plan types).
template <int kDependency, typename T>
using DependentOn = std::conditional_t<kDependency >= 0, T, T>;

template <bool kBackward, int kShard>
void register_tuned_sm90(Registry& registry) {
  (void)registry;
// NORMTUNE_TUNED_SCALED names z's scaling mode (ScalingMode::k<scaling>: Mxfp8_1D); the
// plain NORMTUNE_TUNED line is an unscaled (or per-tensor FP8) one; NORMTUNE_TUNED_DECODE is
// a plain line for calls of at most kDecodeMaxRows rows; NORMTUNE_TUNED_CUDNN names cuDNN as
// the winner for its key (rows: Any or Decode), beside the key's native line.
#define NORMTUNE_TUNED_LINE_(norm, stage, w, i, o, c, scaling, rows, hidden, config, provenance)      \
  if constexpr (is_backward(Stage::k##stage) == kBackward && __LINE__ % NORMTUNE_TUNED_SHARDS == kShard) { \
    using Traits = TraitsFor<NormType::k##norm, Stage::k##stage, w, i, o, ScalingMode::k##scaling>;  \
    static_assert(DType::kFloat32 == Elem<c>::kDType, "kernels compute in fp32 (ctype fp32)");         \
    static_assert(Elem<o>::kDType == Elem<typename Traits::Output>::kDType, "a backward's otype is itype"); \
    using Plan = std::conditional_t<kBackward, BwdPlan, FwdPlan>;                                     \
    constexpr DependentOn<kShard, Plan> plan{NORMTUNE_UNPAREN config};                                \
    add_tuned<Traits, hidden, plan>(registry, ArchFamily::kSm90, Provenance{NORMTUNE_UNPAREN provenance}, \
                                    RowClass::k##rows);                                               \
  }
#define NORMTUNE_TUNED_SCALED(norm, stage, w, i, o, c, scaling, hidden, config, provenance) \
  NORMTUNE_TUNED_LINE_(norm, stage, w, i, o, c, scaling, Any, hidden, config, provenance)
#define NORMTUNE_TUNED(norm, stage, w, i, o, c, hidden, config, provenance) \
  NORMTUNE_TUNED_LINE_(norm, stage, w, i, o, c, None, Any, hidden, config, provenance)
#define NORMTUNE_TUNED_DECODE(norm, stage, w, i, o, c, hidden, config, provenance) \
  NORMTUNE_TUNED_LINE_(norm, stage, w, i, o, c, None, Decode, hidden, config, provenance)
#define NORMTUNE_TUNED_CUDNN(norm, stage, w, i, o, c, rows, hidden, provenance)                            \
  if constexpr (is_backward(Stage::k##stage) == kBackward && __LINE__ % NORMTUNE_TUNED_SHARDS == kShard) { \
    using Traits = TraitsFor<NormType::k##norm, Stage::k##stage, w, i, o, ScalingMode::kNone>;         \
    static_assert(DType::kFloat32 == Elem<c>::kDType, "kernels compute in fp32 (ctype fp32)");         \
    add_tuned_backend<Traits>(registry, ArchFamily::kSm90, Backend::kCudnn, RowClass::k##rows, hidden, \
                              Provenance{NORMTUNE_UNPAREN provenance});                                \
  }
#include "sm90.def"
#undef NORMTUNE_TUNED
#undef NORMTUNE_TUNED_SCALED
#undef NORMTUNE_TUNED_DECODE
#undef NORMTUNE_TUNED_CUDNN
#undef NORMTUNE_TUNED_LINE_
}

}  // namespace normtune
