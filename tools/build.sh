#!/usr/bin/env bash
# Configure (once) and build normtune into ./build with every core.
#   NORMTUNE_BUILD_DIR   build folder (default: build)
#   NORMTUNE_CMAKE_ARGS  extra CMake arguments, e.g. "-DNORMTUNE_CUDA_ARCHS=80;90;100"
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${NORMTUNE_BUILD_DIR:-$root/build}"
export PATH="/usr/local/cuda/bin:$PATH"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${NORMTUNE_CMAKE_ARGS:-}
fi
cmake --build "$build" --parallel "$(nproc)"
