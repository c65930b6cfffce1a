#!/usr/bin/env bash
# compute-sanitizer synccheck and the pipelined forward kernel (kernels/norm_fwd_pipelined.cuh),
# outside the library and its tests: the kernel launched alone in the configurations of
# pipelined_synccheck.cu, each plain and under synccheck (and some under memcheck and
# racecheck). On the H200 (CUDA 13.0, session 8) every case is clean except clusters of 16
# CTAs on grids of several clusters (cases 15 and 17): CUDA error 700 under synccheck only,
# with 0 synccheck findings, while the same launches are correct plain and clean under memcheck
# and racecheck; one cluster of 16 (case 19) and several clusters of 8 or 2 (16, 18) are clean.
#   tools/sanitizer_repro/run.sh            (on the GPU machine, from the repository root)
#   CASES="15 19" MCASES="15" tools/sanitizer_repro/run.sh
set -x
cd "$(dirname "${BASH_SOURCE[0]}")" || exit 1
export PATH=$PATH:/usr/local/cuda/bin
out="${OUT:-/tmp}"
nvidia-smi --query-gpu=name,driver_version --format=csv
compute-sanitizer --version | tail -2
INC="-I../../normalization/src -I../../normalization/include -I../../common/include -I../../registry/include"
F="-std=c++20 -O3 -gencode arch=compute_90,code=sm_90 -lineinfo --expt-relaxed-constexpr $INC"
nvcc $F pipelined_synccheck.cu -o "$out/pipelined_synccheck" || exit 1
for c in ${CASES:-0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19}; do
  echo "=== case $c plain"; timeout 30 "$out/pipelined_synccheck" "$c"
  echo "=== case $c synccheck"; timeout 90 compute-sanitizer --tool synccheck --print-limit 5 "$out/pipelined_synccheck" "$c" 2>&1 | tail -8
done
for c in ${MCASES:-4 7 10 15}; do
  echo "=== case $c memcheck"; timeout 90 compute-sanitizer --tool memcheck --print-limit 5 "$out/pipelined_synccheck" "$c" 2>&1 | tail -6
  echo "=== case $c racecheck"; timeout 120 compute-sanitizer --tool racecheck --print-limit 5 "$out/pipelined_synccheck" "$c" 2>&1 | tail -8
done
