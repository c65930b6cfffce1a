// The Backward and BackwardAdd lines of registry/tuned/sm90.def as registry entries,
// expanded in kTunedBwdShards translation units (bwd_tuned_sm90_<k>.cu) by line number.
#pragma once

#include "bwd_registration.cuh"
#include "register_families.h"

namespace normtune {

template <int kShard>
void register_tuned_bwd_sm90(Registry& registry) {
  (void)registry;
#define NORMTUNE_TUNED(norm, stage, w, i, o, c, hidden, config, provenance)                         \
  if constexpr ((Stage::k##stage == Stage::kBackward || Stage::k##stage == Stage::kBackwardAdd) && \
                __LINE__ % kTunedBwdShards == kShard) {                                            \
    static_assert(DType::kFloat32 == Elem<c>::kDType, "backward kernels compute in fp32");        \
    static_assert(Elem<i>::kDType == Elem<o>::kDType, "dx has x's dtype");                        \
    constexpr DependentOn<kShard, BwdTunedConfig> cfg{NORMTUNE_UNPAREN config};                     \
    add_tuned_bwd<BwdTraits<w, i, NormType::k##norm == NormType::kRMSNorm,                        \
                            Stage::k##stage == Stage::kBackwardAdd>,                               \
                  hidden, cfg.vecs_per_thread, cfg.threads_per_row, cfg.rows_per_cta>(            \
        registry, ArchFamily::kSm90, Provenance{NORMTUNE_UNPAREN provenance});                     \
  }
#include "registry/tuned/sm90.def"
#undef NORMTUNE_TUNED
}

}  // namespace normtune
