#!/usr/bin/env bash
# Fuzz the C API's argument handling with libFuzzer, AddressSanitizer and UBSan (CPU only):
#   tools/fuzz.sh [seconds, default 60]
# The host sources (common, registry, normalization's api/plan/reference/register_all) are
# compiled with clang-14 and coverage instrumentation; the GPU translation units come from the
# regular build (./build, made first if needed) and are linked as they are. Findings (crash
# inputs) land in build-fuzz/; the run fails on any finding.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
# Argument handling only: with a GPU visible, a well-formed call would launch on fake pointers.
export CUDA_VISIBLE_DEVICES=
"$root/tools/build.sh" >/dev/null
# The shard count the CUDA objects were built with (register_all.cpp must agree).
shards=$(sed -n 's/^NORMTUNE_TUNED_SHARDS:[A-Z]*=//p' "${NORMTUNE_BUILD_DIR:-$root/build}/CMakeCache.txt")
out="$root/build-fuzz"
mkdir -p "$out/obj" "$out/corpus"
cuda="${CUDA_HOME:-/usr/local/cuda}"
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -I"$root/common/include" -I"$root/common/internal" -I"$root/registry/include"
       -I"$root/normalization/include" -I"$root/normalization/src" -I"$root/registry/tuned" -I"$cuda/include"
       -DNORMTUNE_TUNED_SHARDS="${shards:-6}" -DNORMTUNE_VERSION_STRING=\"fuzz\")
sources=("$root"/common/src/*.cpp "$root"/common/src/tensor/*.cpp "$root"/registry/src/*.cpp
         "$root"/normalization/src/api/*.cpp "$root"/normalization/src/plan/*.cpp
         "$root"/normalization/src/reference/*.cpp "$root"/normalization/src/register/register_all.cpp
         "$root"/normalization/src/cudnn/backend_choice.cpp "$root"/normalization/src/cudnn/cudnn_library.cpp)
objects=()
for src in "${sources[@]}"; do
  obj="$out/obj/$(echo "${src#"$root"/}" | tr / _).o"
  clang++-14 "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  objects+=("$obj")
done
mapfile -t gpu_objects < <(find "${NORMTUNE_BUILD_DIR:-$root/build}/normalization" -name '*.cu.o' | sort)
clang++-14 "${flags[@]}" -fsanitize=fuzzer "$root/tests/fuzz/fuzz_c_api.cpp" "${objects[@]}" "${gpu_objects[@]}" \
  -L"$cuda/lib64" -lcudart -Wl,-rpath,"$cuda/lib64" -o "$out/fuzz_c_api"
cd "$out"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ./fuzz_c_api -max_total_time="$seconds" -max_len=256 -print_final_stats=1 corpus
