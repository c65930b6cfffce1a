// `normtune bench`: times the forward kernels against same-shape memory operations.
#pragma once

#include <string_view>
#include <vector>

namespace normtune::bench {

int run(const std::vector<std::string_view>& args);
extern const char* const kHelp;

}  // namespace normtune::bench
