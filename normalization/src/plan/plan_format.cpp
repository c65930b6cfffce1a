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

// ", (.device = "...", .date = "...", .time_us = 12.34, .tool = "..."))": a line's provenance
// and its closing parenthesis (the time fixed, 2 decimals, without the locale).
std::string provenance_tail(const Provenance& pv) {
  char buf[48];
  const std::string time(buf, std::to_chars(buf, buf + sizeof(buf), pv.time_us, std::chars_format::fixed, 2).ptr);
  return detail::concat(", (.device = \"", pv.device, "\", .date = \"", pv.date, "\", .time_us = ", time,
                        ", .tool = \"", pv.tool, "\"))");
}

// "RMSNorm, Forward, bf16, bf16, bf16, fp32, ": the key's leading fields of a line.
std::string key_head(const NormKey& key) {
  return detail::concat(norm_type_name(key.norm), ", ", stage_name(key.stage), ", ", dtype_name(key.wtype), ", ",
                        dtype_name(key.itype), ", ", dtype_name(key.otype), ", ", dtype_name(key.ctype), ", ");
}

template <typename Plan>
std::string tuned_line_of(const NormKey& key, const Plan& plan, const Provenance& pv) {
  const bool scaled = key.scaling != ScalingMode::kNone;
  const bool decode = key.rows == RowClass::kDecode;
  NORMTUNE_CHECK((!scaled || scaling_token(key.scaling) != nullptr) && !(scaled && decode) && key.flags == 0 &&
                     key.hidden_size != kAnyHiddenSize,
                 "tuned_table_line: a table line has an exact hidden size, no flags and no scaling but the 1-D "
                 "block scalings (and a decode line none); got ",
                 to_string(key));
  const char* macro = scaled ? "NORMTUNE_TUNED_SCALED(" : decode ? "NORMTUNE_TUNED_DECODE(" : "NORMTUNE_TUNED(";
  return detail::concat(macro, key_head(key), scaled ? detail::concat(scaling_token(key.scaling), ", ") : std::string(),
                        key.hidden_size, ", ", def_config_of(plan), provenance_tail(pv));
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

std::string_view row_class_tag(RowClass rows) { return rows == RowClass::kDecode ? "_decode" : ""; }

std::string tuned_backend_table_line(const NormKey& key, Backend backend, const Provenance& provenance) {
  NORMTUNE_CHECK(backend == Backend::kCudnn && key.scaling == ScalingMode::kNone && key.flags == 0 &&
                     key.hidden_size != kAnyHiddenSize,
                 "tuned_backend_table_line: a line names cuDNN for a key with an exact hidden size, unscaled z "
                 "and no flags; got ",
                 backend_name(backend), " for ", to_string(key));
  return detail::concat("NORMTUNE_TUNED_CUDNN(", key_head(key), key.rows == RowClass::kDecode ? "Decode" : "Any", ", ",
                        key.hidden_size, provenance_tail(provenance));
}

}  // namespace normtune
