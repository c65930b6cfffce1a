// The registration functions of the kernel families, called by register_all().
#pragma once

#include <normtune/registry/registry.h>

namespace normtune {

inline constexpr int kTunedFwdShards = 6;
inline constexpr int kTunedBwdShards = 6;

// General forward entries (any hidden size), one function per variant.
void register_general_rmsnorm_fwd(Registry& registry);
void register_general_layernorm_fwd(Registry& registry);
void register_general_rmsnorm_add_fwd(Registry& registry);

// General backward entries (any hidden size), one function per variant.
void register_general_rmsnorm_bwd(Registry& registry);
void register_general_layernorm_bwd(Registry& registry);
void register_general_rmsnorm_add_bwd(Registry& registry);

// Tuned forward entries of registry/tuned/sm90.def, shard kShard of kTunedFwdShards.
template <int kShard>
void register_tuned_fwd_sm90(Registry& registry);

// Tuned backward entries of registry/tuned/sm90.def, shard kShard of kTunedBwdShards.
template <int kShard>
void register_tuned_bwd_sm90(Registry& registry);

}  // namespace normtune
