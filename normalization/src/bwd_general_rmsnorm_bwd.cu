// General (any hidden size) entries: rmsnorm_bwd, every supported (wtype, itype).
#include "bwd_registration.cuh"
#include "register_families.h"

namespace normtune {

void register_general_rmsnorm_bwd(Registry& registry) {
  add_general_bwd<BwdTraits<fp32, fp32, true, false>>(registry);
  add_general_bwd<BwdTraits<bf16, bf16, true, false>>(registry);
  add_general_bwd<BwdTraits<fp32, bf16, true, false>>(registry);
  add_general_bwd<BwdTraits<fp16, fp16, true, false>>(registry);
  add_general_bwd<BwdTraits<fp32, fp16, true, false>>(registry);
}

}  // namespace normtune
