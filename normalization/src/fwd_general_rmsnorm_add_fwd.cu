// General (any hidden size) entries: rmsnorm_add_fwd, every supported (wtype, itype, otype).
#include "fwd_registration.cuh"
#include "register_families.h"

namespace normtune {

void register_general_rmsnorm_add_fwd(Registry& registry) {
  add_general_fwd<FwdTraits<fp32, fp32, fp32, true, true>>(registry);
  add_general_fwd<FwdTraits<fp32, fp32, bf16, true, true>>(registry);
  add_general_fwd<FwdTraits<fp32, fp32, fp16, true, true>>(registry);
  add_general_fwd<FwdTraits<bf16, bf16, bf16, true, true>>(registry);
  add_general_fwd<FwdTraits<fp32, bf16, bf16, true, true>>(registry);
  add_general_fwd<FwdTraits<fp16, fp16, fp16, true, true>>(registry);
  add_general_fwd<FwdTraits<fp32, fp16, fp16, true, true>>(registry);
}

}  // namespace normtune
