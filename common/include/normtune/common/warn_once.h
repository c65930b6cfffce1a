// A thread-safe "have we said this already?" set, for warnings printed once per process.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace normtune {

template <typename Id>
class OnceSet {
 public:
  // True exactly once per distinct id over the lifetime of the set, whatever the threads.
  bool first_time(const Id& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_.insert(id).second;
  }
  // Whether first_time(id) was called.
  bool contains(const Id& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_.count(id) != 0;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    seen_.clear();
  }

 private:
  std::mutex mutex_;
  std::unordered_set<Id> seen_;
};

// Print "normtune: <message>" to stderr as one write (lines of concurrent warnings do not
// interleave).
void print_warning(std::string_view message);

// Print the warning the first time `id` is seen in this process. Returns whether it printed.
bool warn_once(std::string_view id, std::string_view message);

// Whether an environment variable is set to a false-like value ("0", "false", "off", "no").
bool env_flag_is_off(const char* name);

}  // namespace normtune
