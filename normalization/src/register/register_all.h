// The registration functions register_all() calls; their definitions are generated
// translation units (see normalization/CMakeLists.txt).
#pragma once

#include <normtune/registry/norm_key.h>
#include <normtune/registry/registry.h>

namespace normtune {

// The general entries of the op (norm, stage): one per line of its type list.
template <NormType kNorm, Stage kStage>
void register_general(Registry& registry);

// The tuned entries of registry/tuned/sm90.def, forward or backward lines, shard kShard of
// NORMTUNE_TUNED_SHARDS.
template <bool kBackward, int kShard>
void register_tuned_sm90(Registry& registry);

}  // namespace normtune
