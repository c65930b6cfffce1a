// normtune's own C++ entry points (beside the TransformerEngine-compatible C API in
// <normtune/transformer_engine.h>).
#pragma once

#include <span>

#include <normtune/common/dtype.h>
#include <normtune/registry/norm_key.h>
#include <normtune/registry/registry.h>

namespace normtune {

// The process-wide registry, filled by register_all() on first use (thread-safe).
const Registry& kernel_registry();

// Registers every kernel this build has: the general entries and the tuned tables
// (registry/tuned/*.def). Explicit, so that a static link keeps every kernel.
void register_all(Registry& registry);

// One supported combination of element types: gamma (and beta), x, z (dx for a backward),
// and z's scaling (kNone: unquantized or per-tensor FP8; else block-scaled).
struct TypeCombo {
  DType wtype, itype, otype;
  ScalingMode scaling = ScalingMode::kNone;
};
// Every combination an op of this stage supports (normalization/src/register/type_lists.def):
// the general entries, the C API's dtype checks and its messages all come from it.
std::span<const TypeCombo> supported_types(Stage stage);

// The library version, "MAJOR.MINOR.PATCH".
const char* version();

}  // namespace normtune
