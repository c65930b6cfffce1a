// The normtune command-line tool: bench, tune, list and info (see kUsage below).
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/normtune.h>

#include "bench.h"
#include "tune.h"

namespace {

constexpr const char* kUsage = R"(normtune - tuned normalization kernels (RMSNorm, LayerNorm)

Usage:
  normtune <command> [options]

Commands:
  list [--filter TEXT]   Print every registered kernel entry, decoded: kind (tuned,
                         general, or cudnn: a cuDNN graph, in builds with cuDNN's frontend
                         headers), architecture family, key, kernel name, config and, for
                         tuned entries, where their timing came from; then the tuned lines
                         naming cuDNN for a key (kind tuned:cudnn). Decode lines (calls of at
                         most 128 rows) end their key in rows<=128. --filter keeps the
                         entries whose name or key contains TEXT.
  bench [options]        The main job: time the forward and backward kernels over a suite
                         of LLM shapes against same-shape memory operations measured in the
                         same run (see 'normtune bench --help'). Without a GPU it says so,
                         lists the registry and exits 0.
  tune [options]         Time every forward or backward layout per hidden size on this GPU
                         and print the fastest as lines for registry/tuned/<arch>.def (see
                         'normtune tune --help').
  info                   Print the GPUs this process sees (name, SMs, architecture family).
  help, --help, -h       Print this text.

Environment:
  NORMTUNE_WARN_FALLBACK=0   Silence the one-time warning printed when a call falls back
                             from a tuned kernel to the general kernel.
  NVTE_NORM_FWD_USE_CUDNN=1, NVTE_NORM_BWD_USE_CUDNN=1
                             TransformerEngine's switches: run the forward / backward calls
                             on the cuDNN backend (until nvte_enable_cudnn_norm_fwd/bwd is
                             called); an unsupported call is an error, never a fallback.
                             Set to 0 (TE's own kernels in TE): the native kernels.
  NORMTUNE_BACKEND=auto|native|cudnn
                             The backend when TE's switches are not set (default auto:
                             the tuned table's choice per key and row class: a native
                             kernel, tuned or general, or cuDNN where a tuned:cudnn line
                             names it and cuDNN can run the call; else a one-time warning
                             and the native kernel). nvte_enable_cudnn_norm_fwd/bwd(false)
                             asks for the native kernels.
  NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE=1
                             TransformerEngine's switch (until
                             nvte_enable_zero_centered_gamma_in_weight_dtype is called): the
                             cuDNN backend rounds zero-centered gamma + 1 to gamma's dtype;
                             the native kernels keep it in fp32 either way.
  NORMTUNE_CUDNN_LIBRARY=F   The cuDNN library to open (default libcudnn.so.9).
  NORMTUNE_CUDNN_PLAN_CACHE=N
                             cuDNN plans kept (least recently used out first; default 64).

Exit status: 0 on success, 2 on a usage error, 1 on any other error.
)";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "normtune: %s\nRun 'normtune --help' for usage.\n", message.c_str());
  return 2;
}

int cmd_list(const std::vector<std::string_view>& args) {
  std::string filter;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--filter" && i + 1 < args.size()) {
      filter = args[++i];
    } else {
      return usage_error("list: unknown option '" + std::string(args[i]) + "'");
    }
  }
  const normtune::Registry& registry = normtune::kernel_registry();
  const auto entries = registry.entries();
  std::printf("%-8s %-7s %-80s %-44s %s\n", "kind", "arch", "key", "kernel", "config / provenance");
  size_t shown = 0;
  for (const normtune::KernelEntry* e : entries) {
    const std::string key = normtune::to_string(e->key);
    if (!filter.empty() && key.find(filter) == std::string::npos &&
        e->name.find(filter) == std::string::npos) {
      continue;
    }
    std::string detail = e->config;
    if (!e->is_general()) {
      detail += normtune::detail::concat("  [", e->provenance.device, " ", e->provenance.date, " ",
                                         e->provenance.time_us, " us, ", e->provenance.tool, "]");
    }
    const char* kind = e->backend != normtune::Backend::kNative ? normtune::backend_name(e->backend).data()
                       : e->is_general()                            ? "general"
                                                                    : "tuned";
    std::printf("%-8s %-7s %-80s %-44s %s\n", kind,
                std::string(normtune::arch_family_name(e->arch)).c_str(), key.c_str(), e->name.c_str(),
                detail.c_str());
    ++shown;
  }
  // The table lines naming another backend for a key (kind "tuned:cudnn"): beside the key's
  // native line, chosen under NORMTUNE_BACKEND=auto where that backend can run the call.
  const auto lines = registry.tuned_backend_lines();
  size_t lines_shown = 0;
  for (const normtune::TunedBackendLine* l : lines) {
    const std::string key = normtune::to_string(l->key);
    if (!filter.empty() && key.find(filter) == std::string::npos && l->name.find(filter) == std::string::npos) continue;
    const std::string kind = normtune::detail::concat("tuned:", normtune::backend_name(l->backend));
    const std::string detail = normtune::detail::concat("[", l->provenance.device, " ", l->provenance.date, " ",
                                                        l->provenance.time_us, " us, ", l->provenance.tool, "]");
    std::printf("%-8s %-7s %-80s %-44s %s\n", kind.c_str(), std::string(normtune::arch_family_name(l->arch)).c_str(),
                key.c_str(), l->name.c_str(), detail.c_str());
    ++lines_shown;
  }
  std::printf("%zu of %zu registered entries shown, and %zu of %zu tuned lines naming another backend (normtune %s, %s build)\n",
              shown, entries.size(), lines_shown, lines.size(), normtune::version(), NORMTUNE_PLATFORM_NAME);
  if (entries.empty()) {
    std::printf("This build registers no kernels yet.\n");
  }
  return 0;
}

int cmd_info() {
  const int count = normtune::device_count();
  if (count == 0) {
    std::printf("No GPU is visible to this process (no device or no driver).\n");
    return 0;
  }
  for (int d = 0; d < count; ++d) {
    const normtune::DeviceInfo& info = normtune::device_info(d);
    std::printf("device %d: %s, %d SMs, %s (family %s), L2 %zu MiB, %zu GiB\n", d,
                info.name.c_str(), info.sm_count, info.arch_name.c_str(),
                std::string(normtune::arch_family_name(
                                normtune::arch_family_of(info.cc_major, info.cc_minor,
                                                         normtune::platform::kIsHip)))
                    .c_str(),
                info.l2_bytes >> 20, info.global_memory_bytes >> 30);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stdout);
    return 2;
  }
  const std::string_view cmd = args.front();
  args.erase(args.begin());
  try {
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (cmd == "list") return cmd_list(args);
    if (cmd == "bench") {
      if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
        std::fputs(normtune::bench::kHelp, stdout);
        return 0;
      }
      const int rc = normtune::bench::run(args);
      return rc >= 0 ? rc : cmd_list({});
    }
    if (cmd == "tune") {
      if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
        std::fputs(normtune::tune::kHelp, stdout);
        return 0;
      }
      return normtune::tune::run(args);
    }
    if (cmd == "info") return cmd_info();
    return usage_error("unknown command '" + std::string(cmd) + "'");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
