#include <normtune/common/error.h>

namespace normtune::detail {

void throw_error(const std::string& what, const char* func, const char* file, int line) {
  throw Error(concat("normtune: ", what, " (", func, " at ", basename_of(file), ":", line, ")"));
}

void throw_runtime_error(int code, const char* name, const char* text, const char* statement,
                         const char* func, const char* file, int line) {
  throw Error(concat("normtune: ", NORMTUNE_PLATFORM_NAME, " error ", code, " (", name, ": ",
                     text, ") in `", statement, "` (", func, " at ", basename_of(file), ":",
                     line, ")"));
}

}  // namespace normtune::detail
