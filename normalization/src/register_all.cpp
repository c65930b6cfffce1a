#include <normtune/normtune.h>

namespace normtune {

void register_all(Registry& registry) {
  // Kernel families add their general entries and include their tuned tables here.
  (void)registry;
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
