#include <normtune/common/warn_once.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace normtune {

void print_warning(std::string_view message) {
  std::fprintf(stderr, "normtune: %.*s\n", static_cast<int>(message.size()), message.data());
}

bool warn_once(std::string_view id, std::string_view message) {
  static OnceSet<std::string> seen;
  if (!seen.first_time(std::string(id))) return false;
  print_warning(message);
  return true;
}

bool env_flag_is_off(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return false;
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "0" || v == "false" || v == "off" || v == "no";
}

}  // namespace normtune
