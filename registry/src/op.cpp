#include <normtune/registry/op.h>

#include <string>

namespace normtune {

std::string op_names(bool forward, bool backward) {
  std::string out;
  for (const OpInfo& op : kOps) {
    if (is_backward(op.stage) ? !backward : !forward) continue;
    if (!out.empty()) out += ", ";
    out += op.name;
  }
  return out;
}

}  // namespace normtune
