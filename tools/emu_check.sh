#!/usr/bin/env bash
# Builds normtune for the CPU emulator (common/emu; no GPU needed) into build-emu and runs the
# GPU test suites there (and the emulator's own, label emu): the library's kernels, unchanged, run on the CPU and are checked
# against the fp64 reference (README: "The CPU emulator"). Correctness only: an emulated
# kernel's time means nothing.
#
#   tools/emu_check.sh [--quick] [--sanitize] [-- CTEST ARGS...]
#
#   --quick      what CI runs: the gpu label less the tests listed in tools/emu_slow_tests.txt
#                (each over 20 s here; they run without --quick)
#   --sanitize   AddressSanitizer and UBSan over library, kernels and tests (build-emu-asan):
#                a kernel's access outside an allocation is reported, compute-sanitizer
#                memcheck's job (about 2x the time, and an 8-minute build on 2 cores)
#   NORMTUNE_EMU_BUILD_DIR   build folder (default build-emu, or build-emu-asan)
#   NORMTUNE_EMU_SCHEDULE    forward (default), reverse or random: the order of a CTA's threads
#                            within each round, to expose a missing barrier (emu_runtime.cpp)
#   NORMTUNE_EMU_SM_COUNT    SMs of the emulated sm_90 (default 132, as an H200)
#   NORMTUNE_CMAKE_ARGS      extra CMake arguments (CI passes -DNORMTUNE_WARNINGS_AS_ERRORS=ON)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

quick=0
sanitize=OFF
ctest_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --sanitize) sanitize=ON ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "emu_check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

default_build=build-emu
[[ $sanitize == ON ]] && default_build=build-emu-asan
build=${NORMTUNE_EMU_BUILD_DIR:-$default_build}
# shellcheck disable=SC2086
# -O1: the kernels compile in half of -O3's time, and a test's time here goes to its CPU
# reference and random inputs more than to the emulated kernels.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DNORMTUNE_ENABLE_EMU=ON -DNORMTUNE_EMU_SANITIZE=$sanitize ${NORMTUNE_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" --parallel "$(nproc)"

exclude=()
if [[ $quick == 1 ]]; then
  # One regular expression of the slow tests' full names (ctest -E).
  pattern=$(grep -v -e '^#' -e '^\s*$' tools/emu_slow_tests.txt | sed 's/[][\.*^$/]/\\&/g' | paste -sd'|')
  [[ -n "$pattern" ]] && exclude=(-E "$pattern")
fi
ctest --test-dir "$build" -L 'gpu|emu' -j "$(nproc)" --timeout 900 --output-on-failure "${exclude[@]}" "${ctest_args[@]}"
