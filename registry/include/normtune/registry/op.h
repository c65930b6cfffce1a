// The operations normtune computes, by name: one table (kOps) that the CLI, the kernel names,
// the registration of the general entries and (later) the Python package read, so that no
// layer compares op names as strings of its own.
#pragma once

#include <cstddef>
#include <string_view>

#include <normtune/registry/norm_key.h>

namespace normtune {

struct OpInfo {
  const char* name;         // the CLI's and the benchmark's name: "rmsnorm_bwd_add"
  NormType norm;
  Stage stage;
  const char* kernel_name;  // the prefix of its kernels' procedural names: "rmsnorm_bwd_add"
  const char* c_function;   // the C API entry point that runs it
};

inline constexpr OpInfo kOps[] = {
    {"rmsnorm", NormType::kRMSNorm, Stage::kForward, "rmsnorm_fwd", "nvte_rmsnorm_fwd"},
    {"layernorm", NormType::kLayerNorm, Stage::kForward, "layernorm_fwd", "nvte_layernorm_fwd"},
    {"rmsnorm_add", NormType::kRMSNorm, Stage::kForwardAdd, "rmsnorm_add_fwd", "normtune_rmsnorm_add_fwd"},
    {"rmsnorm_bwd", NormType::kRMSNorm, Stage::kBackward, "rmsnorm_bwd", "nvte_rmsnorm_bwd"},
    {"layernorm_bwd", NormType::kLayerNorm, Stage::kBackward, "layernorm_bwd", "nvte_layernorm_bwd"},
    {"rmsnorm_bwd_add", NormType::kRMSNorm, Stage::kBackwardAdd, "rmsnorm_bwd_add", "nvte_rmsnorm_bwd_add"},
};
inline constexpr size_t kNumOps = sizeof(kOps) / sizeof(kOps[0]);

// The op of a name, or nullptr.
constexpr const OpInfo* find_op(std::string_view name) {
  for (const OpInfo& op : kOps) {
    if (name == op.name) return &op;
  }
  return nullptr;
}

// The op that computes (norm, stage); raises normtune::Error when there is none.
constexpr const OpInfo& op_of(NormType norm, Stage stage) {
  for (const OpInfo& op : kOps) {
    if (op.norm == norm && op.stage == stage) return op;
  }
  NORMTUNE_ERROR("no op computes ", norm_type_name(norm), " ", stage_name(stage));
}

// "rmsnorm, layernorm, ..." (for messages and --help texts).
std::string op_names(bool forward, bool backward);

namespace detail {

constexpr bool ops_are_distinct() {
  for (size_t i = 0; i < kNumOps; ++i) {
    for (size_t j = i + 1; j < kNumOps; ++j) {
      if (std::string_view(kOps[i].name) == kOps[j].name) return false;
      if (std::string_view(kOps[i].kernel_name) == kOps[j].kernel_name) return false;
      if (kOps[i].norm == kOps[j].norm && kOps[i].stage == kOps[j].stage) return false;
    }
  }
  return true;
}

}  // namespace detail

static_assert(detail::ops_are_distinct(), "kOps: two ops share a name or a (norm, stage)");
static_assert(&op_of(NormType::kRMSNorm, Stage::kBackwardAdd) == find_op("rmsnorm_bwd_add"),
              "kOps: lookups by name and by (norm, stage) disagree");

}  // namespace normtune
