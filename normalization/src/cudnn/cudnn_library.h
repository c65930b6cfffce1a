// libcudnn, opened at run time: libnormtune.so does not link it, so it loads and runs on a
// machine without cuDNN; only a call routed to the cuDNN backend needs it.
#pragma once

#include <string>

namespace normtune {

// The handle of the cuDNN library (dlopen), opened at the first call and kept for the life
// of the process: NORMTUNE_CUDNN_LIBRARY names the file (a path, or a name for the dynamic
// loader's search), else libcudnn.so.9 from the loader's search path. nullptr when it
// cannot be opened, with *why saying what was tried and the loader's message. Thread-safe.
void* cudnn_library(std::string* why);

}  // namespace normtune
