// The kernel registry: tuned entries (exact key, per GPU architecture family) in front of
// general entries (hidden size wildcarded, any architecture).
//
// The registry knows keys and launchers, not kernels: a launcher is a pair of functions over
// an opaque argument struct owned by the layer that registers it (CUTLASS-style
// can_implement + run). Registration is explicit (see normalization's register_all), never
// through static initializers; a duplicate registration raises normtune::Error.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <normtune/common/platform.h>
#include <normtune/common/warn_once.h>
#include <normtune/registry/norm_key.h>

namespace normtune {

// GPU architecture families: a Hopper tuning is not an MI300 tuning.
enum class ArchFamily : uint8_t { kAny = 0, kSm80, kSm90, kSm100, kSm120, kGfx9, kUnknown };

std::string_view arch_family_name(ArchFamily a);  // "sm_90", "gfx9", "any", ...
// The family of a device from its compute capability (HIP devices report gfx9 as 9.x).
ArchFamily arch_family_of(int cc_major, int cc_minor, bool is_hip);
// The family of the caller's current device (cached device properties).
ArchFamily current_arch_family();

// Returns nullptr when the call can run, else a static string saying why not
// ("x is not 16-byte aligned"). `args` is the registering layer's argument struct.
using CanImplementFn = const char* (*)(const void* args);
using RunFn = void (*)(const void* args, cudaStream_t stream);
// Bytes of workspace the call needs (the same answer for the size query and the real call).
using WorkspaceFn = size_t (*)(const void* args);

// Where a tuned entry's numbers came from (printed by `normtune list`).
struct Provenance {
  const char* device = "";  // "NVIDIA H200"
  const char* date = "";    // "2026-11-30"
  double time_us = 0;       // measured time of the entry at its shape
  const char* tool = "";    // "normtune tune 0.1.0"
};

// What runs an entry's calls: normtune's own kernels, or a cuDNN graph (normalization's
// src/cudnn/, built when cuDNN's frontend headers are found; libcudnn opened at run time).
enum class Backend : uint8_t { kNative = 0, kCudnn = 1 };
std::string_view backend_name(Backend b);  // "native", "cudnn"

struct KernelEntry {
  NormKey key;                 // hidden_size == kAnyHiddenSize for a general entry
  Backend backend = Backend::kNative;
  ArchFamily arch = ArchFamily::kAny;
  std::string name;            // procedural: rmsnorm_fwd_bf16_bf16_bf16_h7168_n4_g224_c1
  std::string config;          // the named config fields, human readable
  CanImplementFn can_implement = nullptr;  // nullptr: can run every call of its key
  RunFn run = nullptr;
  WorkspaceFn workspace_bytes = nullptr;   // nullptr: the kernel needs no workspace
  Provenance provenance;       // tuned entries only

  bool is_general() const { return key.hidden_size == kAnyHiddenSize; }
};

// A tuned-table line that names another backend than the native kernels for a key
// (NORMTUNE_TUNED_CUDNN): that backend's plan was timed faster than every native layout at
// the line's shape. It carries no launcher: the call runs the backend's entry (add_backend)
// when that backend is usable, else the native selection (with a one-time warning).
struct TunedBackendLine {
  NormKey key;  // an entry key with an exact hidden size (and row class)
  ArchFamily arch = ArchFamily::kUnknown;
  Backend backend = Backend::kCudnn;
  std::string name;  // "layernorm_fwd_bf16_bf16_bf16_h4096_decode_cudnn"
  Provenance provenance;
};

// The outcome of a lookup. Building it allocates nothing (it is on every call's path);
// the words for a fallback or a failure are made only when they are printed.
struct Selection {
  const KernelEntry* entry = nullptr;  // what runs; nullptr: no kernel can run the call
  bool tuned = false;
  const KernelEntry* tuned_candidate = nullptr;    // the exact-key entry, if any
  const char* tuned_rejection = nullptr;           // why it cannot run the call
  const KernelEntry* general_candidate = nullptr;  // the general entry, if any
  const char* general_rejection = nullptr;         // why it cannot run the call

  // "no tuned kernel for <key> (sm_90)" or "tuned kernel <name> cannot run this call (...)".
  std::string fallback_reason(const NormKey& key, ArchFamily arch) const;
};

class Registry {
 public:
  // A tuned entry: exact key (hidden size set), a concrete architecture family.
  void add_tuned(KernelEntry entry);
  // A general entry: hidden size wildcarded; serves every architecture family.
  void add_general(KernelEntry entry);
  // An entry of another backend than the native kernels (general: hidden size wildcarded),
  // at most one per (key, backend). Never chosen by select() / get_kernel(): the caller asks
  // for it by backend (select_backend).
  void add_backend(KernelEntry entry);

  // A table line naming another backend for its key; at most one per (key, arch), beside
  // (not instead of) that key's native tuned entry, which runs when the backend cannot.
  void add_tuned_backend(TunedBackendLine line);
  // The line naming another backend for a call's key on `arch`: a decode call's decode line
  // first, else (when the table has no native decode line for the key either) the line for
  // any row count; nullptr when the table names none (the native selection stands). Hash
  // lookups: on every call's path under NORMTUNE_BACKEND=auto.
  const TunedBackendLine* tuned_backend(const NormKey& key, ArchFamily arch) const;
  // Every such line, sorted as entries().
  std::vector<const TunedBackendLine*> tuned_backend_lines() const;

  // The `backend` entry for `key` (its general key), and whether it can run the call:
  // sel.entry is nullptr when there is none or it cannot (sel.general_rejection says why).
  Selection select_backend(const NormKey& key, Backend backend, const void* args) const;

  // Which entry a call would run, without side effects. `key` is the call's key: the entries
  // are looked up by key.entry_key() (run-time flags cleared), then, for a decode call (row
  // class kDecode), by the same key for any row count, then key.general().
  Selection select(const NormKey& key, ArchFamily arch, const void* args) const;

  // The entry to run: the tuned one when it matches and can run the call, else the general
  // one, printing once per distinct (key, arch) per process:
  //   normtune: falling back to the general kernel: no tuned kernel for <key> (sm_90)
  // NORMTUNE_WARN_FALLBACK=0 silences it. No entry at all raises normtune::Error.
  const KernelEntry& get_kernel(const NormKey& key, ArchFamily arch, const void* args) const;

  // Every entry, tuned first, sorted by architecture then key.
  std::vector<const KernelEntry*> entries() const;
  size_t size() const { return tuned_.size() + general_.size() + backends_.size(); }

 private:
  static uint64_t tuned_slot(const NormKey& key, ArchFamily arch);
  static uint64_t backend_slot(const NormKey& key, Backend backend);
  std::unordered_map<uint64_t, KernelEntry> tuned_;
  std::unordered_map<uint64_t, KernelEntry> general_;
  std::unordered_map<uint64_t, KernelEntry> backends_;
  std::unordered_map<uint64_t, TunedBackendLine> tuned_backends_;
  mutable OnceSet<uint64_t> warned_;  // (key, arch) slots whose fallback was reported
};

}  // namespace normtune
