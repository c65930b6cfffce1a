/* Every C function of normtune under a normtune_ name: the same signatures and semantics as
 * the nvte_* names of <normtune/transformer_engine.h> and <normtune/normalization.h>
 * (normtune_create_tensor is nvte_create_tensor, ...).
 *
 * Why: a framework that uses TransformerEngine for GEMMs and attention and normtune for
 * normalization links both libraries, and both define nvte_create_tensor, nvte_rmsnorm_fwd,
 * ...; by name, every nvte_* call goes to whichever library the dynamic loader found first.
 * The normtune_ names reach normtune whatever the load order, and normtune's own code binds
 * its internal calls to itself (linked with -Bsymbolic-functions), so a TransformerEngine
 * loaded first cannot take them over. Handles are not interchangeable: pass a handle made by
 * normtune_create_tensor only to normtune_ functions. */
#ifndef NORMTUNE_NORMTUNE_API_H_
#define NORMTUNE_NORMTUNE_API_H_

#include <normtune/normalization.h>
#include <normtune/transformer_engine.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NORMTUNE_C_FUNCTION(ret, name, params, args) ret normtune_##name params;
#include <normtune/tensor_api.def>
#include <normtune/normalization_api.def>
#undef NORMTUNE_C_FUNCTION

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NORMTUNE_NORMTUNE_API_H_
