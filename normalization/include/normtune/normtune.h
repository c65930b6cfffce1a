// normtune's own C++ entry points (beside the TransformerEngine-compatible C API in
// <normtune/transformer_engine.h>).
#pragma once

#include <normtune/registry/registry.h>

namespace normtune {

// The process-wide registry, filled by register_all() on first use (thread-safe).
const Registry& kernel_registry();

// Registers every kernel this build has: the general entries and the tuned tables
// (registry/tuned/*.def). Explicit, so that a static link keeps every kernel.
void register_all(Registry& registry);

// The library version, "MAJOR.MINOR.PATCH".
const char* version();

}  // namespace normtune
