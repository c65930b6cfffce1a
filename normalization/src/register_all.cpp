#include <utility>

#include <normtune/normtune.h>

#include "register_families.h"

namespace normtune {

namespace {

template <int... kShards>
void register_tuned_fwd_sm90_shards(Registry& registry, std::integer_sequence<int, kShards...>) {
  (register_tuned_fwd_sm90<kShards>(registry), ...);
}

template <int... kShards>
void register_tuned_bwd_sm90_shards(Registry& registry, std::integer_sequence<int, kShards...>) {
  (register_tuned_bwd_sm90<kShards>(registry), ...);
}

}  // namespace

void register_all(Registry& registry) {
  register_general_rmsnorm_fwd(registry);
  register_general_layernorm_fwd(registry);
  register_general_rmsnorm_add_fwd(registry);
  register_general_rmsnorm_bwd(registry);
  register_general_layernorm_bwd(registry);
  register_general_rmsnorm_add_bwd(registry);
  register_tuned_fwd_sm90_shards(registry, std::make_integer_sequence<int, kTunedFwdShards>{});
  register_tuned_bwd_sm90_shards(registry, std::make_integer_sequence<int, kTunedBwdShards>{});
}

const Registry& kernel_registry() {
  struct Filled {
    Registry registry;
    Filled() { register_all(registry); }
  };
  static const Filled filled;  // thread-safe initialization on first use
  return filled.registry;
}

const char* version() { return NORMTUNE_VERSION_STRING; }

}  // namespace normtune
