// Which backend a normalization call asks for: TransformerEngine's switches first, with TE's
// meaning, then normtune's variable. (And TE's switch of how the cuDNN backend forms
// zero-centered gamma, at the end.)
//   - nvte_enable_cudnn_norm_fwd(bool) / nvte_enable_cudnn_norm_bwd(bool) set the choice of
//     the forward / backward calls for the whole process: true is cuDNN, false the native
//     kernels (TE's own kernels in TE: never cuDNN, not even where the tuned table names it);
//   - until one is called, TE's variables NVTE_NORM_FWD_USE_CUDNN / NVTE_NORM_BWD_USE_CUDNN
//     give it when set (1: cuDNN; 0, false, off, no: the native kernels);
//   - when neither is set: NORMTUNE_BACKEND=auto|native|cudnn (default auto: what the
//     tuned table says for the call's key: a native tuned or general kernel, or cuDNN where a
//     NORMTUNE_TUNED_CUDNN line names it and cuDNN can run the call).
// A call that asks for cuDNN gets it or a clear error (cuDNN not built in, libcudnn not
// found, or the call is one the cuDNN backend does not implement); never the native kernel
// instead. Under auto, a table line naming cuDNN where cuDNN cannot run gives a one-time
// warning and the native kernel.
#pragma once

namespace normtune {

enum class BackendRequest { kAuto, kNative, kCudnn };

struct BackendChoice {
  BackendRequest request = BackendRequest::kAuto;
  const char* source = "";  // what set it: "NVTE_NORM_FWD_USE_CUDNN=1", "NORMTUNE_BACKEND=cudnn", ...
};

// The choice for a forward (backward = false) or backward call. The variables are read once
// per process, as TransformerEngine reads its own (no environment lookup on a call's path);
// raises normtune::Error, at every call, for a NORMTUNE_BACKEND value that is not auto, native
// or cudnn.
BackendChoice backend_choice(bool backward);

// What nvte_enable_cudnn_norm_fwd/bwd set: -1 (never called: the variable decides), 0 or 1.
int cudnn_norm_switch(bool backward);
// Back to "never called", and the variables read again at the next call (tests); the
// zero-centered gamma switch below too.
void reset_cudnn_norm_switches();

// Whether the cuDNN backend rounds gamma + 1 to gamma's dtype for zero-centered gamma:
// nvte_enable_zero_centered_gamma_in_weight_dtype's setting, or until it is called,
// TransformerEngine's variable NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE (read once per process, as
// the others); off when neither says. Only the cuDNN backend reads it, as in TE.
bool zero_centered_gamma_in_weight_dtype();

}  // namespace normtune
