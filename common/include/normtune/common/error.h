// Errors: one exception type and the check macros that raise it.
//
// Every message names what was checked, what was expected and what was found, and ends
// with the source location, e.g.
//   normtune: argument 'gamma': expected dtype bf16, got fp16 (nvte_rmsnorm_fwd at rmsnorm_api.cpp:88)
// The C API raises these exceptions like TransformerEngine does (its nvte_* functions throw
// std::runtime_error); normtune::Error derives from std::runtime_error.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <normtune/common/platform.h>

namespace normtune {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// An unsigned value printed as 0x... (for packed keys and masks).
struct Hex {
  uint64_t value;
};
constexpr Hex hex(uint64_t value) { return {value}; }

// The text of one message part. No iostreams: they read the process-wide C++ locale, which a
// library loaded into the caller's process (an ML framework's) may have set from another
// copy of the C++ runtime; names built on a call's path must not depend on it.
inline void append_text(std::string& out, std::string_view v) { out.append(v); }
inline void append_text(std::string& out, const char* v) { out.append(v != nullptr ? v : "(null)"); }
inline void append_text(std::string& out, char c) { out.push_back(c); }
inline void append_text(std::string& out, bool b) { out.push_back(b ? '1' : '0'); }
inline void append_text(std::string& out, Hex h) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(h.value));
  out.append(buf);
}
template <typename T>
  requires(std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, char>)
void append_text(std::string& out, T v) {
  out.append(std::to_string(v));
}
// Floats as %g would print them, but with to_chars: no locale (a caller's setlocale must not
// turn 0.5 into "0,5" in a message or a tuned-table line).
template <std::floating_point T>
void append_text(std::string& out, T v) {
  char buf[48];
  const auto r = std::to_chars(buf, buf + sizeof(buf), static_cast<double>(v), std::chars_format::general, 6);
  out.append(buf, r.ptr);
}
template <typename T>
  requires(!std::same_as<std::remove_cv_t<T>, char>)
void append_text(std::string& out, T* p) {
  append_text(out, Hex{reinterpret_cast<uintptr_t>(p)});
}

template <typename... Args>
std::string concat(Args&&... args) {
  std::string out;
  (append_text(out, std::forward<Args>(args)), ...);
  return out;
}

// File name without its directories: messages stay short and reproducible across builds.
constexpr const char* basename_of(const char* path) {
  const char* base = path;
  for (const char* p = path; *p != '\0'; ++p) {
    if (*p == '/' || *p == '\\') base = p + 1;
  }
  return base;
}

[[noreturn]] void throw_error(const std::string& what, const char* func, const char* file,
                              int line);

[[noreturn]] void throw_runtime_error(int code, const char* name, const char* text,
                                      const char* statement, const char* func, const char* file,
                                      int line);

}  // namespace detail
}  // namespace normtune

// Raise an error whose message is the concatenation of the arguments.
#define NORMTUNE_ERROR(...)                                                                \
  ::normtune::detail::throw_error(::normtune::detail::concat(__VA_ARGS__), __func__, \
                                  __FILE__, __LINE__)

// Check a condition; on failure raise an error with the given message parts.
#define NORMTUNE_CHECK(cond, ...)     \
  do {                                \
    if (!(cond)) NORMTUNE_ERROR(__VA_ARGS__); \
  } while (0)

// Check a property of a named argument: "argument 'NAME': expected EXPECTED, got ACTUAL".
#define NORMTUNE_CHECK_ARG(cond, name, expected, actual)                                  \
  do {                                                                                    \
    if (!(cond))                                                                          \
      NORMTUNE_ERROR("argument '", name, "': expected ", expected, ", got ", actual);     \
  } while (0)

// Check a CUDA/HIP runtime call; the message names the statement that failed.
#define NORMTUNE_CUDA_CHECK(stmt)                                                          \
  do {                                                                                     \
    const cudaError_t normtune_status_ = (stmt);                                           \
    if (normtune_status_ != cudaSuccess) {                                                 \
      (void)cudaGetLastError(); /* a refused call does not fail the next check */          \
      ::normtune::detail::throw_runtime_error(                                             \
          static_cast<int>(normtune_status_), cudaGetErrorName(normtune_status_),          \
          cudaGetErrorString(normtune_status_), #stmt, __func__, __FILE__, __LINE__);      \
    }                                                                                      \
  } while (0)

// After a kernel launch: report a bad configuration at the launch site, not later.
#define NORMTUNE_CHECK_LAUNCH() NORMTUNE_CUDA_CHECK(cudaPeekAtLastError())
