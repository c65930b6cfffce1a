#include <normtune/registry/registry.h>

#include <algorithm>
#include <tuple>

#include <normtune/common/device_info.h>
#include <normtune/common/warn_once.h>

namespace normtune {

std::string_view arch_family_name(ArchFamily a) {
  switch (a) {
    case ArchFamily::kAny: return "any";
    case ArchFamily::kSm80: return "sm_80";
    case ArchFamily::kSm90: return "sm_90";
    case ArchFamily::kSm100: return "sm_100";
    case ArchFamily::kSm120: return "sm_120";
    case ArchFamily::kGfx9: return "gfx9";
    case ArchFamily::kUnknown: return "unknown";
  }
  return "invalid";
}

ArchFamily arch_family_of(int cc_major, int /*cc_minor*/, bool is_hip) {
  if (is_hip) return cc_major == 9 ? ArchFamily::kGfx9 : ArchFamily::kUnknown;
  switch (cc_major) {
    case 8: return ArchFamily::kSm80;
    case 9: return ArchFamily::kSm90;
    case 10: return ArchFamily::kSm100;
    case 12: return ArchFamily::kSm120;
    default: return ArchFamily::kUnknown;
  }
}

ArchFamily current_arch_family() {
  const DeviceInfo& info = device_info(current_device());
  return arch_family_of(info.cc_major, info.cc_minor, platform::kIsHip);
}

std::string_view backend_name(Backend b) {
  switch (b) {
    case Backend::kNative: return "native";
    case Backend::kCudnn: return "cudnn";
  }
  return "invalid";
}

uint64_t Registry::backend_slot(const NormKey& key, Backend backend) {
  // As tuned_slot: bits 57..63 of a packed key are free.
  return pack(key) | (static_cast<uint64_t>(backend) << 57);
}

uint64_t Registry::tuned_slot(const NormKey& key, ArchFamily arch) {
  // Bits 57..63 of a packed key are free: the architecture family goes there.
  return pack(key) | (static_cast<uint64_t>(arch) << 57);
}

void Registry::add_tuned(KernelEntry entry) {
  NORMTUNE_CHECK_ARG(entry.run != nullptr, "entry.run", "a launcher", "nullptr");
  NORMTUNE_CHECK(entry.key == entry.key.entry_key(), "entry '", entry.name, "' for ",
                 to_string(entry.key), ": run-time flags (zero-centered gamma) are not part of an entry's key");
  NORMTUNE_CHECK(!entry.is_general(), "tuned entry '", entry.name, "' for ", to_string(entry.key),
                 ": a tuned entry needs a hidden size (use add_general for any hidden size)");
  NORMTUNE_CHECK(entry.arch != ArchFamily::kAny && entry.arch != ArchFamily::kUnknown,
                 "tuned entry '", entry.name, "' for ", to_string(entry.key),
                 ": expected a concrete architecture family, got ", arch_family_name(entry.arch));
  const uint64_t slot = tuned_slot(entry.key, entry.arch);
  if (auto it = tuned_.find(slot); it != tuned_.end()) {
    NORMTUNE_ERROR("duplicate tuned registration for ", to_string(entry.key), " (",
                   arch_family_name(entry.arch), "): '", it->second.name, "' is already registered, '",
                   entry.name, "' was added again");
  }
  tuned_.emplace(slot, std::move(entry));
}

void Registry::add_general(KernelEntry entry) {
  NORMTUNE_CHECK_ARG(entry.run != nullptr, "entry.run", "a launcher", "nullptr");
  NORMTUNE_CHECK(entry.key == entry.key.entry_key(), "entry '", entry.name, "' for ",
                 to_string(entry.key), ": run-time flags (zero-centered gamma) are not part of an entry's key");
  NORMTUNE_CHECK(entry.is_general(), "general entry '", entry.name, "' for ", to_string(entry.key),
                 ": expected hidden size 'any' (kAnyHiddenSize)");
  entry.arch = ArchFamily::kAny;
  const uint64_t slot = pack(entry.key);
  if (auto it = general_.find(slot); it != general_.end()) {
    NORMTUNE_ERROR("duplicate general registration for ", to_string(entry.key), ": '",
                   it->second.name, "' is already registered, '", entry.name, "' was added again");
  }
  general_.emplace(slot, std::move(entry));
}

void Registry::add_backend(KernelEntry entry) {
  NORMTUNE_CHECK_ARG(entry.run != nullptr, "entry.run", "a launcher", "nullptr");
  NORMTUNE_CHECK(entry.backend != Backend::kNative, "backend entry '", entry.name, "' for ", to_string(entry.key),
                 ": native kernels are added with add_tuned / add_general");
  NORMTUNE_CHECK(entry.key == entry.key.entry_key() && entry.is_general(), "backend entry '", entry.name, "' for ",
                 to_string(entry.key), ": expected hidden size 'any' and no run-time flags");
  entry.arch = ArchFamily::kAny;
  const uint64_t slot = backend_slot(entry.key, entry.backend);
  if (auto it = backends_.find(slot); it != backends_.end()) {
    NORMTUNE_ERROR("duplicate ", backend_name(entry.backend), " registration for ", to_string(entry.key), ": '",
                   it->second.name, "' is already registered, '", entry.name, "' was added again");
  }
  backends_.emplace(slot, std::move(entry));
}

Selection Registry::select_backend(const NormKey& key, Backend backend, const void* args) const {
  Selection sel;
  if (auto it = backends_.find(backend_slot(key.general(), backend)); it != backends_.end()) {
    sel.general_candidate = &it->second;
    sel.general_rejection = it->second.can_implement ? it->second.can_implement(args) : nullptr;
    if (sel.general_rejection == nullptr) sel.entry = sel.general_candidate;
  }
  return sel;
}

std::string Selection::fallback_reason(const NormKey& key, ArchFamily arch) const {
  std::string why =
      tuned_candidate == nullptr
          ? detail::concat("no tuned kernel for ", to_string(key), " (", arch_family_name(arch), ")")
          : detail::concat("tuned kernel ", tuned_candidate->name, " cannot run this call (",
                           tuned_rejection, ") for ", to_string(key), " (",
                           arch_family_name(arch), ")");
  if (general_candidate == nullptr) {
    why += "; no general kernel either";
  } else if (general_rejection != nullptr) {
    why += detail::concat("; general kernel ", general_candidate->name, " cannot run it (",
                          general_rejection, ")");
  }
  return why;
}

Selection Registry::select(const NormKey& key, ArchFamily arch, const void* args) const {
  Selection sel;
  if (auto it = tuned_.find(tuned_slot(key.entry_key(), arch)); it != tuned_.end()) {
    sel.tuned_candidate = &it->second;
    sel.tuned_rejection = it->second.can_implement ? it->second.can_implement(args) : nullptr;
    if (sel.tuned_rejection == nullptr) {
      sel.entry = sel.tuned_candidate;
      sel.tuned = true;
      return sel;
    }
  }
  if (auto it = general_.find(pack(key.general())); it != general_.end()) {
    sel.general_candidate = &it->second;
    sel.general_rejection = it->second.can_implement ? it->second.can_implement(args) : nullptr;
    if (sel.general_rejection == nullptr) sel.entry = sel.general_candidate;
  }
  return sel;
}

const KernelEntry& Registry::get_kernel(const NormKey& key, ArchFamily arch,
                                        const void* args) const {
  const Selection sel = select(key, arch, args);
  if (sel.entry == nullptr) {
    NORMTUNE_ERROR("no kernel for ", to_string(key), " (", arch_family_name(arch),
                   "): ", sel.fallback_reason(key, arch));
  }
  if (!sel.tuned && warned_.first_time(tuned_slot(key, arch)) &&
      !env_flag_is_off("NORMTUNE_WARN_FALLBACK")) {
    print_warning("falling back to the general kernel: " + sel.fallback_reason(key, arch));
  }
  return *sel.entry;
}

std::vector<const KernelEntry*> Registry::entries() const {
  std::vector<const KernelEntry*> out;
  out.reserve(size());
  for (const auto& [slot, e] : tuned_) out.push_back(&e);
  for (const auto& [slot, e] : general_) out.push_back(&e);
  for (const auto& [slot, e] : backends_) out.push_back(&e);
  // Tuned first, then general, then the other backends; then by architecture, norm, stage,
  // types, hidden size (the reading order).
  auto order = [](const KernelEntry* e) {
    const NormKey& k = e->key;
    return std::tuple(e->backend, e->is_general(), e->arch, k.norm, k.stage, k.itype, k.wtype, k.otype,
                      k.ctype, k.scaling, k.flags, k.hidden_size);
  };
  std::sort(out.begin(), out.end(),
            [&](const KernelEntry* a, const KernelEntry* b) { return order(a) < order(b); });
  return out;
}

}  // namespace normtune
