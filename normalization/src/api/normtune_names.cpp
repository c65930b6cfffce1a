// The normalization entry points under their normtune_ names (see
// <normtune/normalization_api.def>); calls inside libnormtune bind locally.
#include <normtune/normalization.h>

extern "C" {
#define NORMTUNE_C_FUNCTION(ret, name, params, args) \
  ret normtune_##name params { return nvte_##name args; }
#include <normtune/normalization_api.def>
#undef NORMTUNE_C_FUNCTION
}  // extern "C"
