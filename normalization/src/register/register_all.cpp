// register_all(): every op's general entries (the ops of kOps) and every shard of the tuned
// tables (the sm_90 table in CUDA builds); kernel_registry(), the process-wide registry filled by it.
#include <utility>

#include <normtune/normtune.h>
#include <normtune/registry/op.h>

#include "register/register_all.h"
#include "register/type_lists.h"
#ifdef NORMTUNE_WITH_CUDNN
#include "cudnn/cudnn_norm.h"
#endif

namespace normtune {

namespace {

template <size_t... kOp>
void register_general_of_ops(Registry& registry, std::index_sequence<kOp...>) {
  (register_general<kOps[kOp].norm, kOps[kOp].stage>(registry), ...);
}

#ifdef NORMTUNE_WITH_SM90_TABLE
template <bool kBackward, int... kShards>
void register_tuned_sm90_shards(Registry& registry, std::integer_sequence<int, kShards...>) {
  (register_tuned_sm90<kBackward, kShards>(registry), ...);
}
#endif

}  // namespace

void register_all(Registry& registry) {
  register_general_of_ops(registry, std::make_index_sequence<kNumOps>{});
#ifdef NORMTUNE_WITH_SM90_TABLE  // CUDA builds (normalization/CMakeLists.txt)
  register_tuned_sm90_shards<false>(registry, std::make_integer_sequence<int, NORMTUNE_TUNED_SHARDS>{});
  register_tuned_sm90_shards<true>(registry, std::make_integer_sequence<int, NORMTUNE_TUNED_SHARDS>{});
#endif
#ifdef NORMTUNE_WITH_CUDNN
  register_cudnn_entries(registry);
#endif
}

const Registry& kernel_registry() {
  struct Filled {
    Registry registry;
    Filled() { register_all(registry); }
  };
  static const Filled filled;  // thread-safe initialization on first use
  return filled.registry;
}

std::span<const TypeCombo> supported_types(Stage stage) { return supported_type_list(stage); }

const char* version() { return NORMTUNE_VERSION_STRING; }

}  // namespace normtune
