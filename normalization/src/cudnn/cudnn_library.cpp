#include "cudnn/cudnn_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include <normtune/common/error.h>

namespace normtune {

void* cudnn_library(std::string* why) {
  static std::once_flag once;
  static void* handle = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    const char* named = std::getenv("NORMTUNE_CUDNN_LIBRARY");
    const char* file = named != nullptr && *named != '\0' ? named : "libcudnn.so.9";
    dlerror();
    handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      failure = detail::concat("could not open the cuDNN library '", file, "'",
                               named != nullptr && *named != '\0' ? " (NORMTUNE_CUDNN_LIBRARY)" : "", ": ",
                               err != nullptr ? err : "unknown error",
                               "; install cuDNN 9 (e.g. pip install nvidia-cudnn-cu13) or point "
                               "NORMTUNE_CUDNN_LIBRARY at libcudnn.so.9");
    }
  });
  if (handle == nullptr && why != nullptr) *why = failure;
  return handle;
}

}  // namespace normtune
