// The tensor API under its normtune_ names (see <normtune/tensor_api.def>): each calls the
// nvte_ function of this library (calls inside libnormtune bind locally: -Bsymbolic-functions).
#include <normtune/transformer_engine.h>

extern "C" {
#define NORMTUNE_C_FUNCTION(ret, name, params, args) \
  ret normtune_##name params { return nvte_##name args; }
#include <normtune/tensor_api.def>
#undef NORMTUNE_C_FUNCTION
}  // extern "C"
