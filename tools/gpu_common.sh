# Sourced by tools/gpu_check.sh and tools/torch_check.sh: the repository root, the output
# folder ($OUT, default ./out), the GPU build folder ($NORMTUNE_BUILD_DIR, default
# build-gpu), the exit status, and a timestamped step banner.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/out}"
mkdir -p "$out"
build="${NORMTUNE_BUILD_DIR:-$root/build-gpu}"
export PATH="/usr/local/cuda/bin:$PATH"
status=0
step() { echo "== $(date +%T) $*"; }
