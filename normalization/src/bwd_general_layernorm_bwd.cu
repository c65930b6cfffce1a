// General (any hidden size) entries: layernorm_bwd, every supported (wtype, itype).
#include "bwd_registration.cuh"
#include "register_families.h"

namespace normtune {

void register_general_layernorm_bwd(Registry& registry) {
  add_general_bwd<BwdTraits<fp32, fp32, false, false>>(registry);
  add_general_bwd<BwdTraits<bf16, bf16, false, false>>(registry);
  add_general_bwd<BwdTraits<fp32, bf16, false, false>>(registry);
  add_general_bwd<BwdTraits<fp16, fp16, false, false>>(registry);
  add_general_bwd<BwdTraits<fp32, fp16, false, false>>(registry);
}

}  // namespace normtune
