#!/usr/bin/env bash
# One command for the GPU machine: configure, build with every core, run the gpu-labelled
# tests and the benchmark, leave logs and JSON under $OUT (default ./out).
#   GPU_CHECK_STEPS  which steps to run (default "build test bench"); add "sanitize" for
#                    compute-sanitizer memcheck + racecheck (+ synccheck, forward) on a subset
#                    of the GPU tests
#   SANITIZE_SCOPE   subset (default) or all: every gpu test under each of SANITIZE_TOOLS
#                    (default memcheck racecheck initcheck synccheck), gtest shard
#                    SANITIZE_SHARD=i/n of every suite (default 0/1), or with SANITIZE_JOBS=j
#                    all j shards at once (j processes per tool; SANITIZE_TIMEOUT=s each)
#   BENCH_ARGS       extra arguments for normtune bench
#   CTEST_GPU_JOBS   gpu tests run at once (default 2)
# shellcheck source=tools/gpu_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"
steps="${GPU_CHECK_STEPS:-build test bench}"

if [[ " $steps " == *" build "* ]]; then
  step "build"
  start=$(date +%s)
  # A suite built on a machine without a GPU (tools/prebuilt.sh pack, carried as .prebuilt)
  # when it is there, matches this tree and runs here; else the build here (in a fresh folder
  # where an earlier unpacked suite lies: its cache is the other machine's).
  if [[ "$(basename "$build")" == build-gpu ]] && "$root/tools/prebuilt.sh" unpack "$root" "$build" suite; then
    echo "build: prebuilt, unpacked in $(( $(date +%s) - start )) s"
  else
    [[ -f "$build/prebuilt-manifest.json" ]] && rm -rf "$build"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNORMTUNE_CUDA_ARCHS=90 \
      >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
    if ! cmake --build "$build" --parallel "$(nproc)" >"$out/build.log" 2>&1; then
      grep -E "error|Error" "$out/build.log" | head -40
      exit 1
    fi
    echo "build: $(( $(date +%s) - start )) s on $(nproc) cores"
  fi
fi
if [[ " $steps " == *" test "* ]]; then
  step "ctest -L gpu"
  ctest --test-dir "$build" -L gpu --output-on-failure -j "${CTEST_GPU_JOBS:-2}" --timeout 900 >"$out/ctest_gpu.log" 2>&1 || status=1
  tail -15 "$out/ctest_gpu.log"
  step "ctest -L cpu"
  ctest --test-dir "$build" -L cpu -j 8 >"$out/ctest_cpu.log" 2>&1 || status=1
  tail -3 "$out/ctest_cpu.log"
fi
if [[ " $steps " == *" sanitize "* && "${SANITIZE_SCOPE:-subset}" == subset ]]; then
  step "compute-sanitizer (subset)"
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    # The staged kernels (one CTA, clusters, the tuned h4096/h7168 lines) and the FP8/MXFP8
    # outputs included; racecheck is slow on large shared-memory slices, so it takes the
    # one-CTA staged layouts and the per-tensor FP8 test only. The backward's pipelined layout
    # on its small rows: one CTA, a cluster of 2, and a cluster of 16 one-warp CTAs.
    staged='NormFwdGpu.Staged*:NormFwdGpu.Fp8*:NormFwdGpu.Mxfp8*'
    [[ $tool == racecheck ]] && staged='NormFwdGpu.StagedOneCta*:NormFwdGpu.Fp8*'
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tests/normtune_test_gpu_forward" \
      --gtest_filter="NormFwdGpu.FusedAdd*:NormFwdGpu.ZeroRows*:NormFwdGpu.ClusterSplitRows:NormFwdGpu.ZeroCentered*:$staged:Registry/TunedFwdGpu.*h7168*:Registry/TunedFwdGpu.*h4096*" \
      >"$out/sanitize_${tool}_fwd.log" 2>&1 || status=1
    tail -3 "$out/sanitize_${tool}_fwd.log"
    [[ $tool == synccheck ]] && continue
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tests/normtune_test_gpu_backward" \
      --gtest_filter='NormBwdGpu.ZeroRows*:NormBwdGpu.OneRow:NormBwdGpu.MisalignedStorage*:NormBwdGpu.ZeroCentered*:NormBwdGpu.InPlace*:Registry/TunedBwdGpu.*h7168*:Registry/TunedBwdGpu.*h128_*:NormBwdGpu/BwdPipelinedEveryShapeGpu.*h2048_*:NormBwdGpu/BwdPipelinedEveryShapeGpu.*h8192_c16_*' \
      >"$out/sanitize_${tool}_bwd.log" 2>&1 || status=1
    tail -3 "$out/sanitize_${tool}_bwd.log"
  done
fi
if [[ " $steps " == *" sanitize "* && "${SANITIZE_SCOPE:-subset}" == all ]]; then
  # Every gpu test under each tool. The work is cut into gtest shards: SANITIZE_SHARD=i/n runs
  # shard i of n of every suite (default 0/1: all of it), so the label can be split over
  # several runs; SANITIZE_JOBS=j (default 1) runs shards 0..j-1 of j of every (tool, suite),
  # all of those processes at once on the one GPU, each under SANITIZE_TIMEOUT seconds if set
  # (a timed-out run still shows how many tests it finished, and any finding so far). The tensors beyond 2^31 elements are left out (tens of GB
  # under a sanitizer).
  jobs="${SANITIZE_JOBS:-1}"
  if (( jobs > 1 )); then
    list=()
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
      for suite in platform forward backward reliability; do
        for (( i = 0; i < jobs; ++i )); do list+=("$tool $suite $i $jobs"); done
      done
    done
  else
    shard="${SANITIZE_SHARD:-0/1}"
    list=()
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
      for suite in platform forward backward reliability; do list+=("$tool $suite ${shard%/*} ${shard#*/}"); done
    done
  fi
  at_once=$(( jobs > 1 ? ${#list[@]} : 1 ))
  step "compute-sanitizer (every gpu test: ${#list[@]} runs, $at_once at once)"
  export build out
  printf '%s\n' "${list[@]}" | xargs -P "$at_once" -L 1 bash -c '
    tool=$0 suite=$1 i=$2 n=$3
    log="$out/sanitize_${tool}_${suite}_${i}of${n}.log"
    GTEST_SHARD_INDEX=$i GTEST_TOTAL_SHARDS=$n timeout "${SANITIZE_TIMEOUT:-0}" \
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tests/normtune_test_gpu_$suite" \
      --gtest_filter="-ReliabilityGpu.TensorsBeyond*" >"$log" 2>&1
    echo "rc $?" >>"$log"'
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
    for log in "$out"/sanitize_"${tool}"_*.log; do
      name=${log##*/sanitize_}
      echo "${name%.log}: $(grep -oE 'Running [0-9]+ tests?' "$log" | head -1 | cut -d' ' -f2) tests, $(grep -cE '^\[       OK \]' "$log") ok, $(grep -cE '^\[  FAILED  \] [A-Za-z]' "$log") failed;" \
        "$(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]' "$log" | head -1 | tr -s ' ') |" \
        "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1 | sed 's/=* *//') | $(tail -1 "$log")"
      # (A shard with no test exits 255 under compute-sanitizer: nothing ran, nothing to find.)
      grep -q '^rc 0$' "$log" || grep -q 'Running 0 tests' "$log" || status=1
    done
  done
fi
if [[ " $steps " == *" bench "* ]]; then
  step "bench"
  # shellcheck disable=SC2086
  "$build/tools/normtune" bench --verify --json "$out/bench.json" --csv "$out/bench.csv" ${BENCH_ARGS:-} \
    2>&1 | tee "$out/bench.log" || status=1
fi
exit $status
