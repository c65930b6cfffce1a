// The Forward and ForwardAdd lines of registry/tuned/sm90.def as registry entries. The table
// is expanded in kTunedFwdShards translation units (fwd_tuned_sm90_<k>.cu), each compiling
// the lines whose line number modulo kTunedFwdShards is k, so a long table builds in parallel.
#pragma once

#include "fwd_registration.cuh"
#include "register_families.h"

namespace normtune {

template <int kShard>
void register_tuned_fwd_sm90(Registry& registry) {
  (void)registry;
#define NORMTUNE_TUNED(norm, stage, w, i, o, c, hidden, config, provenance)                        \
  if constexpr ((Stage::k##stage == Stage::kForward || Stage::k##stage == Stage::kForwardAdd) &&  \
                __LINE__ % kTunedFwdShards == kShard) {                                           \
    static_assert(DType::kFloat32 == Elem<c>::kDType, "forward kernels compute in fp32");        \
    constexpr DependentOn<kShard, FwdTunedConfig> cfg{NORMTUNE_UNPAREN config};                    \
    add_tuned_fwd<FwdTraits<w, i, o, NormType::k##norm == NormType::kRMSNorm,                    \
                            Stage::k##stage == Stage::kForwardAdd>,                               \
                  hidden, cfg.vecs_per_thread, cfg.threads_per_row, cfg.ctas_per_row,            \
                  cfg.rows_per_cta, cfg.persistent>(                                              \
        registry, ArchFamily::kSm90, Provenance{NORMTUNE_UNPAREN provenance});                    \
  }
#include "registry/tuned/sm90.def"
#undef NORMTUNE_TUNED
}

}  // namespace normtune
