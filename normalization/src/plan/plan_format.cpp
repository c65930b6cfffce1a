// Plans as text, all from the field tables in <normtune/tuning.h>: the `.def` config, the
// config string, the kernel-name tags and the whole tuned-table line.
#include <charconv>

#include <normtune/common/error.h>
#include <normtune/tuning.h>

namespace normtune {

namespace {

template <typename Plan>
std::string value_text(const PlanField<Plan>& f, const Plan& plan, bool cpp) {
  const int v = f.get(plan);
  if (f.enum_name != nullptr) return f.enum_name(v, cpp);
  if (f.is_bool) return v != 0 ? "true" : "false";
  return std::to_string(v);
}

template <typename Plan>
std::string def_config_of(const Plan& plan) {
  std::string out = "(";
  for (const PlanField<Plan>& f : plan_fields<Plan>()) {
    if (!f.applies(plan)) continue;
    if (out.size() > 1) out += ", ";
    out += detail::concat(".", f.name, " = ", value_text(f, plan, true));
  }
  return out + ")";
}

template <typename Plan>
std::string config_string_of(const Plan& plan) {
  std::string out;
  for (const PlanField<Plan>& f : plan_fields<Plan>()) {
    if (!f.applies(plan)) continue;
    if (!out.empty()) out += ' ';
    out += detail::concat(f.name, "=", value_text(f, plan, false));
  }
  return out;
}

template <typename Plan>
std::string name_tags_of(const Plan& plan) {
  std::string out;
  for (const PlanField<Plan>& f : plan_fields<Plan>()) {
    if (!f.applies(plan)) continue;
    const int v = f.get(plan);
    if (f.enum_name != nullptr) {
      if (v != 0) out += detail::concat("_", f.enum_name(v, false));  // the default layout is unnamed
    } else if (f.is_bool) {
      if (v != 0) out += detail::concat("_", f.tag);
    } else {
      out += detail::concat("_", f.tag, v);
    }
  }
  return out;
}

// ScalingMode's enumerator without its k, as a scaled table line names it (entries.cuh pastes
// the k back); null for modes a table line cannot have.
const char* scaling_token(ScalingMode m) {
  switch (m) {
    case ScalingMode::kMxfp8_1D: return "Mxfp8_1D";
    case ScalingMode::kBlock1D: return "Block1D";
    case ScalingMode::kNvfp4_1D: return "Nvfp4_1D";
    case ScalingMode::kMxfp4_1D: return "Mxfp4_1D";
    default: return nullptr;
  }
}

template <typename Plan>
std::string tuned_line_of(const NormKey& key, const Plan& plan, const Provenance& pv) {
  const bool scaled = key.scaling != ScalingMode::kNone;
  NORMTUNE_CHECK((!scaled || scaling_token(key.scaling) != nullptr) && key.flags == 0 &&
                     key.hidden_size != kAnyHiddenSize,
                 "tuned_table_line: a table line has an exact hidden size, no flags and no scaling but the 1-D "
                 "block scalings; got ",
                 to_string(key));
  char buf[48];  // fixed, 2 decimals, without the locale (to_chars)
  const std::string time(buf, std::to_chars(buf, buf + sizeof(buf), pv.time_us, std::chars_format::fixed, 2).ptr);
  return detail::concat(scaled ? "NORMTUNE_TUNED_SCALED(" : "NORMTUNE_TUNED(", norm_type_name(key.norm), ", ",
                        stage_name(key.stage), ", ", dtype_name(key.wtype), ", ", dtype_name(key.itype), ", ",
                        dtype_name(key.otype), ", ", dtype_name(key.ctype), ", ",
                        scaled ? detail::concat(scaling_token(key.scaling), ", ") : std::string(),
                        key.hidden_size, ", ", def_config_of(plan), ", (.device = \"", pv.device, "\", .date = \"",
                        pv.date, "\", .time_us = ", time, ", .tool = \"", pv.tool, "\"))");
}

}  // namespace

std::string def_config(const FwdPlan& plan) { return def_config_of(plan); }
std::string def_config(const BwdPlan& plan) { return def_config_of(plan); }
std::string config_string(const FwdPlan& plan) { return config_string_of(plan); }
std::string config_string(const BwdPlan& plan) { return config_string_of(plan); }
std::string name_tags(const FwdPlan& plan) { return name_tags_of(plan); }
std::string name_tags(const BwdPlan& plan) { return name_tags_of(plan); }

std::string tuned_table_line(const NormKey& key, const FwdPlan& plan, const Provenance& provenance) {
  return tuned_line_of(key, plan, provenance);
}
std::string tuned_table_line(const NormKey& key, const BwdPlan& plan, const Provenance& provenance) {
  return tuned_line_of(key, plan, provenance);
}

}  // namespace normtune
