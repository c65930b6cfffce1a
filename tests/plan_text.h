// Test helper shared by the CPU and GPU suites: a tuned line's config string ("layout=...
// threads_per_row=... ctas_per_row=...") read back into its plan, through the field table
// that printed it (<normtune/tuning.h>), so that a test never searches the text itself.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

#include <normtune/tuning.h>

namespace normtune::test {

// A config string back into a plan, through the same field table that printed it.
template <typename Plan>
::testing::AssertionResult parse_config(const std::string& text, Plan* plan) {
  *plan = Plan{};
  std::istringstream in(text);
  std::string token;
  std::set<std::string> seen;
  while (in >> token) {
    const size_t eq = token.find('=');
    if (eq == std::string::npos) return ::testing::AssertionFailure() << "'" << token << "' is not name=value in '" << text << "'";
    const std::string name = token.substr(0, eq), value = token.substr(eq + 1);
    if (!seen.insert(name).second) return ::testing::AssertionFailure() << "field '" << name << "' twice in '" << text << "'";
    const PlanField<Plan>* field = nullptr;
    for (const PlanField<Plan>& f : plan_fields<Plan>()) {
      if (name == f.name) field = &f;
    }
    if (field == nullptr) return ::testing::AssertionFailure() << "no field '" << name << "' in '" << text << "'";
    int v = -1;
    if (field->enum_name != nullptr) {
      for (int e = 0; e < 8 && v < 0; ++e) {
        if (value == field->enum_name(e, false)) v = e;
      }
    } else if (field->is_bool) {
      v = value == "true" ? 1 : value == "false" ? 0 : -1;
    } else if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
      v = std::atoi(value.c_str());
    }
    if (v < 0) return ::testing::AssertionFailure() << "bad value '" << value << "' of '" << name << "' in '" << text << "'";
    field->set(*plan, v);
  }
  return ::testing::AssertionSuccess();
}

}  // namespace normtune::test
