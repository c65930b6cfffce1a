#!/usr/bin/env bash
# Build normtune with its tests, then run them: ./tools/test.sh [ctest options, e.g. -L cpu]
# GPU tests (label gpu) skip with a message when no GPU is visible.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tools/build.sh"
ctest --test-dir "${NORMTUNE_BUILD_DIR:-$root/build}" --output-on-failure --timeout 600 "$@"
