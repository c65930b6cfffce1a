// What every nvte_* normalization entry point does, in order:
//   1. check_call: each argument of its CallSpec (tensor_spec.h): handle, unquantized
//      buffer, shape, dtype (from the op's type list), multiprocessorCount;
//   2. key_of_call: the call's NormKey (make_key);
//   3. unless it is the size query, check_call_data: pointers present and aligned, no output
//      overlapping another argument or the workspace (except the spec's in-place aliases);
//   4. select_kernel, before the workspace is sized;
//   5. answered_workspace, then workspace_protocol: TransformerEngine's two-call protocol
//      with that size;
//   6. run_kernel.
// Every message names the argument, what was expected and what was given.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include <normtune/common/error.h>
#include <normtune/internal/tensor.h>
#include <normtune/normalization.h>
#include <normtune/registry/registry.h>

#include "api/tensor_spec.h"

namespace normtune {

// The checked arguments of a call, by the entry point's slots.
struct CheckedCall {
  size_t rows = 0, hidden = 0;
  std::array<const Tensor*, kMaxCallSlots> by_slot{};  // nullptr: not an argument of the call

  // The argument's buffer, or nullptr when the call has no such argument.
  const BasicTensor* find(int slot) const {
    return by_slot[slot] != nullptr ? &by_slot[slot]->data : nullptr;
  }
  const BasicTensor& operator[](int slot) const { return *find(slot); }
  // The argument's data pointer, or nullptr when the call has no such argument.
  void* data(int slot) const { return find(slot) != nullptr ? find(slot)->dptr : nullptr; }
};

// Step 1. `handles` holds every slot of the entry point (absent arguments: anything). x's
// [rows, hidden] is checked first, then every argument in table order: handle, unquantized,
// shape, then dtype. Raises normtune::Error naming the first bad argument.
CheckedCall check_call(const CallSpec& spec, std::span<const NVTETensor> handles,
                       int multiprocessorCount);

// Step 2: make_key from the checked dtypes (gamma's, x's, z's), hidden size, z's scaling mode
// and zero-centered gamma.
NormKey key_of_call(const CallSpec& spec, const CheckedCall& call, bool zero_centered_gamma);

// Step 4: the entry for `key` on the current device (tuned, else general; reports a fallback
// once), or the cuDNN backend's when the call asks for it (cudnn/backend_choice.h) or, under
// NORMTUNE_BACKEND=auto, when the tuned table names cuDNN for the key (NORMTUNE_TUNED_CUDNN)
// and cuDNN can run the call (else a one-time warning and the native entry).
// general_only: skip tuned entries and other backends (the autotuner times the general
// kernel's layouts).
const KernelEntry& select_kernel(const NormKey& key, const void* args, bool general_only = false);

// Step 5a: the workspace size a call is answered (the size query) and must bring (the real
// call): `own`, what the selected entry needs; but for a key whose tuned table line names
// another backend (select_kernel considered it for this call), the largest of `own`, that
// backend's need and native() (the native kernels' need), whichever of the two runs. The
// line's backend checks the call's data (16-byte alignment, dx over dz), which a size query
// made with null pointers may pass and the real call not (or the other way round): both
// calls must get the same answer. That need depends on the key, the row count and the
// device, and for cuDNN on the call's multiprocessorCount and TE's zero-centered-gamma switch
// (read once per call into its Args), not on its data (a plan the backend cannot build for a
// shape counts 0, for every call of that shape). A kernel uses only its own part of a larger
// workspace. (`native` is called only then; a template, so that the call's path builds no
// std::function.)
template <typename Native>
size_t answered_workspace(const NormKey& key, const void* args, size_t own, const Native& native);

// The need of the backend a tuned line names for this call's key (select_kernel considered
// the line for this call), or nullopt when no line names another backend.
std::optional<size_t> table_backend_workspace(const NormKey& key, const void* args);

template <typename Native>
size_t answered_workspace(const NormKey& key, const void* args, size_t own, const Native& native) {
  const std::optional<size_t> backend = table_backend_workspace(key, args);
  return backend ? std::max({own, *backend, native()}) : own;
}

// The cuDNN backend's entry for `key`, or normtune::Error naming `source` (what asked for
// cuDNN) and why it cannot run the call: not built in, not implemented for the key, the
// entry's own check (alignment, an amax of z, ...), libcudnn not found.
const KernelEntry& cudnn_kernel(const NormKey& key, const void* args, const char* source);

// The `backend` entry that can run the call, or nullptr with *why saying why not ("it does
// not implement <key> (...)", "this build of normtune has no cuDNN backend (...)", "it cannot
// run this call of <key>: <the entry's check>", or the library loader's message).
const KernelEntry* usable_backend_entry(const NormKey& key, Backend backend, const void* args, std::string* why);

// The entry of the backend a tuned line names, when that backend is built, implements the
// call, accepts its arguments, its library loads and its plan builds; else nullptr, after a
// warning once per line.
const KernelEntry* table_backend_kernel(const TunedBackendLine& line, const NormKey& key, const void* args);

// Whether this build has the cuDNN backend's entries (NORMTUNE_ENABLE_CUDNN).
#ifdef NORMTUNE_WITH_CUDNN
inline constexpr bool kCudnnBackendBuilt = true;
#else
inline constexpr bool kCudnnBackendBuilt = false;
#endif

// Whether this call is TransformerEngine's workspace size query: a workspace with
// numel() == 0 (a default tensor, or shape [0]). A query needs no data; any other call has
// its data checked (check_call_data) before the kernel is selected.
bool is_size_query(NVTETensor workspace);

// Step 3: pointers present and aligned to their elements, no output overlapping another
// argument or the workspace's buffer (except the spec's in-place aliases). Not for a query.
void check_call_data(const CallSpec& spec, const CheckedCall& call, NVTETensor workspace);

// Step 5b, TransformerEngine's two-call workspace protocol. For the size query, sets the
// workspace's shape to [max(bytes_needed, 1)] and its dtype to byte and returns true (the
// caller returns: no launch, nothing written). Any other workspace must have exactly that
// shape and dtype, memory and a 16-byte aligned pointer; returns false.
bool workspace_protocol(NVTETensor workspace, size_t bytes_needed);

// Step 6: runs `entry` and records it for last_kernel().
void run_kernel(const KernelEntry& entry, const void* args, cudaStream_t stream);

// The SMs a call's grid may use: multiprocessorCount (checked >= 0 by check_call), where
// 0, or more SMs than the device has, means all of them.
inline int sm_bound(int multiprocessorCount, int device_sms) {
  return multiprocessorCount > 0 && multiprocessorCount < device_sms ? multiprocessorCount : device_sms;
}

}  // namespace normtune
