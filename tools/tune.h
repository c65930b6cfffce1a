// `normtune tune`: searches forward layouts per hidden size and prints tuned-table lines.
#pragma once

#include <string_view>
#include <vector>

namespace normtune::tune {

int run(const std::vector<std::string_view>& args);
extern const char* const kHelp;

}  // namespace normtune::tune
