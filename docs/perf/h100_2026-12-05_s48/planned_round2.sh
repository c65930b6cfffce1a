#!/usr/bin/env bash
# Session 48's second device call, prepared and not run (the device was not lent again): from the
# repository root on the GPU machine, after `tools/ab.sh prepare tree`, `tools/ab.sh variant-lines a -
# < exp_a_lines.txt` (and b), `tools/prebuilt.sh pack suite` and `pack-ab` here, with the archives
# staged (`tools/prebuilt.sh carry-plan ab_base ab_var`): the LayerNorm h65536 line's GPU tests and
# compute-sanitizer, then the A/B of variants a and b.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
root=$PWD
tools/prebuilt.sh unpack $root $root/build-gpu suite || { echo "suite not prebuilt"; exit 1; }
T=build-gpu/tests/normtune_test_gpu_forward
F='Registry/TunedPipelinedFwdGpu.*:*h65536*'
$T --gtest_filter="$F" > $OUT/gtest_h65536.txt 2>&1; echo "gtest rc=$?"; tail -4 $OUT/gtest_h65536.txt
S='Registry/TunedFwdGpu.*layernorm_fwd_bf16_bf16_bf16_h65536*:Registry/TunedPipelinedFwdGpu.*layernorm_fwd_bf16_bf16_bf16_h65536*'
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_filter="$S" > $OUT/sanitize_$tool.txt 2>&1; echo "$tool rc=$?"; tail -2 $OUT/sanitize_$tool.txt
done
tools/ab.sh run 2 -- --ops rmsnorm,layernorm,rmsnorm_add,rmsnorm_bwd,layernorm_bwd --out same,fp8 --shapes 16384x128,65536x128,262144x128,2048x65536,4096x65536 2>&1 | tail -40
