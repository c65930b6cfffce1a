#include "cudnn/backend_choice.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <normtune/common/error.h>
#include <normtune/normalization.h>

namespace normtune {

namespace {

std::atomic<int> g_switch[2] = {-1, -1};  // [backward]: nvte_enable_cudnn_norm_fwd / _bwd
std::atomic<int> g_gamma_in_wtype{-1};    // nvte_enable_zero_centered_gamma_in_weight_dtype

// TE's reading of a boolean variable: set and not "0" (TE compares with "1"; both accept 1/0).
// A TransformerEngine switch variable: -1 unset (or empty), 0 set off ("0", "false", "off",
// "no"), 1 set on (anything else).
int env_switch(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  const std::string_view s(v);
  return s == "0" || s == "false" || s == "off" || s == "no" ? 0 : 1;
}

// The variables, read once per process (as TransformerEngine reads its own): a call's path
// makes no environment lookup. reset_cudnn_norm_switches() makes the next call read them again.
struct EnvState {
  int te_cudnn[2] = {-1, -1};  // NVTE_NORM_FWD_USE_CUDNN, NVTE_NORM_BWD_USE_CUDNN (env_switch)
  int te_gamma_in_wtype = -1;  // NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE (env_switch)
  BackendChoice normtune;             // NORMTUNE_BACKEND
  std::string invalid;                // NORMTUNE_BACKEND's value when it is not a backend
};

EnvState read_env() {
  EnvState e;
  e.te_cudnn[0] = env_switch("NVTE_NORM_FWD_USE_CUDNN");
  e.te_cudnn[1] = env_switch("NVTE_NORM_BWD_USE_CUDNN");
  e.te_gamma_in_wtype = env_switch("NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE");
  const char* v = std::getenv("NORMTUNE_BACKEND");
  const std::string_view s(v != nullptr ? v : "");
  if (s == "auto") {
    e.normtune = {BackendRequest::kAuto, "NORMTUNE_BACKEND=auto"};
  } else if (s == "native") {
    e.normtune = {BackendRequest::kNative, "NORMTUNE_BACKEND=native"};
  } else if (s == "cudnn") {
    e.normtune = {BackendRequest::kCudnn, "NORMTUNE_BACKEND=cudnn"};
  } else if (!s.empty()) {
    e.invalid = s;
  }
  return e;
}

std::atomic<const EnvState*> g_env{nullptr};

const EnvState& env_state() {
  if (const EnvState* s = g_env.load(std::memory_order_acquire)) return *s;
  static std::mutex mutex;
  static std::vector<std::unique_ptr<EnvState>> kept;  // every state read (a reset leaves the old one valid)
  std::lock_guard<std::mutex> lock(mutex);
  if (const EnvState* s = g_env.load(std::memory_order_acquire)) return *s;
  kept.push_back(std::make_unique<EnvState>(read_env()));
  g_env.store(kept.back().get(), std::memory_order_release);
  return *kept.back();
}

}  // namespace

void reset_cudnn_norm_switches() {
  g_switch[0].store(-1);
  g_switch[1].store(-1);
  g_gamma_in_wtype.store(-1);
  g_env.store(nullptr, std::memory_order_release);
}

bool zero_centered_gamma_in_weight_dtype() {
  const int sw = g_gamma_in_wtype.load(std::memory_order_relaxed);
  return sw != -1 ? sw == 1 : env_state().te_gamma_in_wtype == 1;
}

int cudnn_norm_switch(bool backward) { return g_switch[backward ? 1 : 0].load(std::memory_order_relaxed); }

BackendChoice backend_choice(bool backward) {
  const int sw = cudnn_norm_switch(backward);
  if (sw == 1) {
    return {BackendRequest::kCudnn, backward ? "nvte_enable_cudnn_norm_bwd(true)" : "nvte_enable_cudnn_norm_fwd(true)"};
  }
  if (sw == 0) {  // TE's meaning: its own kernels, not cuDNN (nor a tuned line naming cuDNN)
    return {BackendRequest::kNative,
            backward ? "nvte_enable_cudnn_norm_bwd(false)" : "nvte_enable_cudnn_norm_fwd(false)"};
  }
  const EnvState& env = env_state();
  const int te = env.te_cudnn[backward ? 1 : 0];
  if (te == 1) return {BackendRequest::kCudnn, backward ? "NVTE_NORM_BWD_USE_CUDNN=1" : "NVTE_NORM_FWD_USE_CUDNN=1"};
  if (te == 0) {  // set off, as TE reads it: its own kernels (here: the native ones)
    return {BackendRequest::kNative, backward ? "NVTE_NORM_BWD_USE_CUDNN=0" : "NVTE_NORM_FWD_USE_CUDNN=0"};
  }
  if (!env.invalid.empty()) {
    NORMTUNE_ERROR("NORMTUNE_BACKEND: expected auto, native or cudnn, got '", env.invalid, "'");
  }
  return env.normtune;
}

}  // namespace normtune

extern "C" {

void nvte_enable_cudnn_norm_fwd(bool enable) { normtune::g_switch[0].store(enable ? 1 : 0); }
void nvte_enable_cudnn_norm_bwd(bool enable) { normtune::g_switch[1].store(enable ? 1 : 0); }
void nvte_enable_zero_centered_gamma_in_weight_dtype(bool enable) {
  normtune::g_gamma_in_wtype.store(enable ? 1 : 0);
}

}  // extern "C"
