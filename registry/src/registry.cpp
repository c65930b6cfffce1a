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
  // As tuned_slot: the bits above a packed key's fields are free.
  return pack(key) | (static_cast<uint64_t>(backend) << kFirstFreeKeyBit);
}

uint64_t Registry::tuned_slot(const NormKey& key, ArchFamily arch) {
  // The bits above a packed key's fields are free: the architecture family goes there.
  return pack(key) | (static_cast<uint64_t>(arch) << kFirstFreeKeyBit);
}
static_assert(static_cast<unsigned>(ArchFamily::kUnknown) < (1u << (64 - kFirstFreeKeyBit)),
              "the architecture family does not fit above the key's fields");

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
  NORMTUNE_CHECK(entry.is_general() && entry.key.rows == RowClass::kAny, "general entry '", entry.name, "' for ",
                 to_string(entry.key), ": expected hidden size 'any' (kAnyHiddenSize) and any row count");
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
  NORMTUNE_CHECK(entry.key == entry.key.general(), "backend entry '", entry.name, "' for ", to_string(entry.key),
                 ": expected hidden size 'any', any row count and no run-time flags");
  entry.arch = ArchFamily::kAny;
  const uint64_t slot = backend_slot(entry.key, entry.backend);
  if (auto it = backends_.find(slot); it != backends_.end()) {
    NORMTUNE_ERROR("duplicate ", backend_name(entry.backend), " registration for ", to_string(entry.key), ": '",
                   it->second.name, "' is already registered, '", entry.name, "' was added again");
  }
  backends_.emplace(slot, std::move(entry));
}

void Registry::add_tuned_backend(TunedBackendLine line) {
  NORMTUNE_CHECK(line.backend != Backend::kNative, "tuned backend line '", line.name, "' for ", to_string(line.key),
                 ": native kernels are added with add_tuned");
  NORMTUNE_CHECK(line.key == line.key.entry_key() && line.key.hidden_size != kAnyHiddenSize, "tuned backend line '",
                 line.name, "' for ", to_string(line.key), ": expected an exact hidden size and no run-time flags");
  NORMTUNE_CHECK(line.arch != ArchFamily::kAny && line.arch != ArchFamily::kUnknown, "tuned backend line '",
                 line.name, "' for ", to_string(line.key), ": expected a concrete architecture family, got ",
                 arch_family_name(line.arch));
  const uint64_t slot = tuned_slot(line.key, line.arch);
  if (auto it = tuned_backends_.find(slot); it != tuned_backends_.end()) {
    NORMTUNE_ERROR("duplicate tuned backend line for ", to_string(line.key), " (", arch_family_name(line.arch),
                   "): '", it->second.name, "' is already registered, '", line.name, "' was added again");
  }
  tuned_backends_.emplace(slot, std::move(line));
}

const TunedBackendLine* Registry::tuned_backend(const NormKey& key, ArchFamily arch) const {
  if (tuned_backends_.empty()) return nullptr;
  const NormKey k = key.entry_key();
  if (auto it = tuned_backends_.find(tuned_slot(k, arch)); it != tuned_backends_.end()) return &it->second;
  // A decode call without a decode line naming a backend: the line for any rows, unless the
  // table has a native decode line for the key (the decode race's winner, which the line for
  // any rows, timed on thousands of rows, does not overrule).
  if (k.rows != RowClass::kAny && tuned_.find(tuned_slot(k, arch)) == tuned_.end()) {
    if (auto it = tuned_backends_.find(tuned_slot(k.any_rows(), arch)); it != tuned_backends_.end()) {
      return &it->second;
    }
  }
  return nullptr;
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
  // The call's row class, then (a decode call without a decode line, or whose decode line
  // cannot run it) the line for any row count.
  const NormKey k = key.entry_key();
  const NormKey tries[2] = {k, k.any_rows()};
  for (int i = 0; i < (k.rows == RowClass::kAny ? 1 : 2); ++i) {
    auto it = tuned_.find(tuned_slot(tries[i], arch));
    if (it == tuned_.end()) continue;
    const char* rejection = it->second.can_implement ? it->second.can_implement(args) : nullptr;
    if (rejection == nullptr) {
      sel.tuned_candidate = &it->second;
      sel.tuned_rejection = nullptr;
      sel.entry = sel.tuned_candidate;
      sel.tuned = true;
      return sel;
    }
    if (sel.tuned_candidate == nullptr) {  // the first that declined is the one reported
      sel.tuned_candidate = &it->second;
      sel.tuned_rejection = rejection;
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
  // Once per key whatever the row class (a model's decode and prefill calls share a hidden
  // size: one message says it).
  if (!sel.tuned && warned_.first_time(tuned_slot(key.any_rows(), arch)) &&
      !env_flag_is_off("NORMTUNE_WARN_FALLBACK")) {
    print_warning("falling back to the general kernel: " + sel.fallback_reason(key.any_rows(), arch));
  }
  return *sel.entry;
}

std::vector<const TunedBackendLine*> Registry::tuned_backend_lines() const {
  std::vector<const TunedBackendLine*> out;
  out.reserve(tuned_backends_.size());
  for (const auto& [slot, line] : tuned_backends_) out.push_back(&line);
  auto order = [](const TunedBackendLine* l) {
    const NormKey& k = l->key;
    return std::tuple(l->backend, l->arch, k.norm, k.stage, k.itype, k.wtype, k.otype, k.ctype, k.scaling,
                      k.hidden_size, k.rows);
  };
  std::sort(out.begin(), out.end(),
            [&](const TunedBackendLine* a, const TunedBackendLine* b) { return order(a) < order(b); });
  return out;
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
                      k.ctype, k.scaling, k.flags, k.hidden_size, k.rows);
  };
  std::sort(out.begin(), out.end(),
            [&](const KernelEntry* a, const KernelEntry* b) { return order(a) < order(b); });
  return out;
}

}  // namespace normtune
