#!/usr/bin/env bash
# The PyTorch package on a GPU machine, after tools/gpu_check.sh has built build-gpu: install
# that build, build the extension against it (pip, --no-build-isolation, the machine's torch),
# then run the package's tests, the training-parity script (one GPU; and torchrun on two
# when there are two), the torch-level benchmark and the training-step profile. Logs, JSON
# and PNGs under $OUT.
#   TORCH_CHECK_STEPS  which steps (default "install test parity ddp bench profile"; on the
#                      H200 install + test took 1.5 minutes; install + parity + bench +
#                      profile (four runs, two under torch.compile) did not finish in 400 s:
#                      give profile a call of its own)
#   NORMTUNE_BUILD_DIR the CMake build to install (default build-gpu)
# shellcheck source=tools/gpu_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"
steps="${TORCH_CHECK_STEPS:-install test parity ddp bench profile}"
prefix="${NORMTUNE_TORCH_PREFIX:-/tmp/normtune-install}"
cd "$root"

if [[ " $steps " == *" install "* ]]; then
  step "install $build -> $prefix, pip install the package against it"
  cmake --install "$build" --prefix "$prefix" >/dev/null || exit 1
  python3 -m pip install -q --no-deps --no-build-isolation --disable-pip-version-check \
    -C cmake.define.NORMTUNE_PREFIX="$prefix" . >"$out/pip_install.log" 2>&1 || { tail -40 "$out/pip_install.log"; exit 1; }
fi
# Run from outside the repository so `import normtune` finds the installed package.
cd /tmp
if [[ " $steps " == *" test "* ]]; then
  step "pytest python/tests"
  # One process per file, so that a crash in one does not hide the other's results.
  for f in test_gpu test_cpu; do
    python3 -m pytest -v -p no:cacheprovider "$root/python/tests/$f.py" >"$out/pytest_$f.log" 2>&1 || status=1
    grep -E "FAILED|ERROR|Fatal Python error|^  File .*normtune|passed|failed" "$out/pytest_$f.log" | head -20
  done
fi
if [[ " $steps " == *" parity "* ]]; then
  step "training parity, one GPU"
  python3 "$root/python/benchmarks/train_parity.py" --json "$out/train_parity_1gpu.json" \
    --png "$out/train_parity_1gpu.png" 2>&1 | grep -v " step " || status=1
fi
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [[ " $steps " == *" ddp "* && $gpus -ge 2 ]]; then
  step "training parity, DDP on 2 GPUs"
  torchrun --standalone --nproc_per_node=2 "$root/python/benchmarks/train_parity.py" \
    --json "$out/train_parity_2gpu.json" --png "$out/train_parity_2gpu.png" \
    --reference-json "$out/train_parity_1gpu.json" 2>&1 | grep -v " step " || status=1
fi
if [[ " $steps " == *" bench "* ]]; then
  step "bench_torch"
  python3 "$root/python/benchmarks/bench_torch.py" --json "$out/bench_torch.json" --png "$out/bench_torch.png" \
    ${BENCH_TORCH_ARGS:-} 2>&1 | tail -40 || status=1
fi
if [[ " $steps " == *" profile "* ]]; then
  step "train_profile (where the training step's time goes, per norm)"
  python3 "$root/python/benchmarks/train_profile.py" --json "$out/train_profile.json" 2>&1 | tail -40 || status=1
fi
step "done (status $status)"
exit $status
