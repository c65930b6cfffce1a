#!/usr/bin/env bash
# Registers, spills and machine code (SASS) of kernels, on a machine without a GPU: compiles a
# .cu file that instantiates the kernels you want to look at with the exact flags of a
# configured CUDA build, prints ptxas's resource use per kernel and, per kernel, how many of
# each SASS opcode it holds (static counts: a loop body counts once).
#   tools/sass.sh FILE.cu                 the summary
#   tools/sass.sh FILE.cu --sass          and the whole SASS listing after it
#   tools/sass.sh FILE.cu --max-spill N   ptxas's part only, and exit 1 when a kernel spills
#                                         more than N bytes (CI: tests/sass/register_budgets.cu)
#     ... --max-spill N --smem-align A    and when a kernel's static shared memory, which its
#                                         dynamic shared memory follows, is no multiple of A
#                                         bytes (kDynamicSmemAlign, kernels/vec.cuh)
#   tools/sass.sh FILE.cu --load-stalls   and the global loads a row loop waits for at once
#                                         (moved to a uniform register right after the load:
#                                         tools/sass_load_stalls.py)
#   tools/sass.sh FILE.cu --store-load-chains [--max-rounds N]
#                                         and the global loads a thread issues only after a
#                                         store that waited for an earlier load (one memory
#                                         latency each: tools/sass_store_load_chains.py); with
#                                         --max-rounds, exit 1 when a kernel has more than N
# FILE.cu includes the kernel headers and instantiates kernels explicitly, e.g.
#   #include "kernels/norm_fwd_staged.cuh"
#   namespace normtune {
#   template __global__ void norm_fwd_staged_kernel<
#       FwdTraits<bf16_t, bf16_t, bf16_t, NormType::kLayerNorm, Stage::kForward>,
#       FwdShape<8, 8, 4096, 64, 1>>(const FwdParams);
#   }
#   NORMTUNE_BUILD_DIR  the configured CUDA build whose flags are used (default build; e.g.
#                       ./tools/build.sh makes it)
# cuobjdump and nvdisasm are taken from PATH, else from NVIDIA's PyPI wheels nvidia-cuda-cuobjdump
# and nvidia-cuda-nvdisasm (CUDA 13), downloaded once into ./.tools (the toolkit's compiler
# packages leave them out).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${NORMTUNE_BUILD_DIR:-$root/build}"
src="${1:?usage: tools/sass.sh FILE.cu [--sass | --load-stalls | --store-load-chains [--max-rounds N] | --max-spill N [--smem-align A]]}"
listing=0
load_stalls=0
store_load_chains=0
max_rounds=""
max_spill=-1
smem_align=0
case "${2:-}" in
  "") ;;
  --sass) listing=1 ;;
  --load-stalls) load_stalls=1 ;;
  --store-load-chains)
    store_load_chains=1
    case "${3:-}" in
      "") ;;
      --max-rounds) max_rounds="${4:?--max-rounds: expected a count}" ;;
      *) echo "sass.sh: unknown option '$3' after --store-load-chains (expected --max-rounds N)" >&2; exit 1 ;;
    esac ;;
  --max-spill)
    max_spill="${3:?--max-spill: expected a byte count}"
    case "${4:-}" in
      "") ;;
      --smem-align) smem_align="${5:?--smem-align: expected a byte count}" ;;
      *) echo "sass.sh: unknown option '$4' after --max-spill N (expected --smem-align A)" >&2; exit 1 ;;
    esac ;;
  *) echo "sass.sh: unknown option '$2' (expected --sass, --load-stalls, --store-load-chains or --max-spill N)" >&2; exit 1 ;;
esac
src="$(cd "$(dirname "$src")" && pwd)/$(basename "$src")"
[[ -f "$build/build.ninja" ]] || { echo "sass.sh: no configured build at $build (NORMTUNE_BUILD_DIR)" >&2; exit 1; }

# The compile command of one of the library's CUDA sources, pointed at FILE.cu.
cmd="$(cd "$build" && ninja -t commands | grep -m1 -E 'nvcc .* -c [^ ]*generated/tuned_[^ ]*\.cu' || true)"
[[ -n "$cmd" ]] || { echo "sass.sh: $build is not a CUDA build (no nvcc command for a tuned source)" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cmd="$(sed -E "s#^[^ ]*ccache ##; s# -MD -MT [^ ]+ -MF [^ ]+##; s# -o [^ ]+# -o $out/k.o#; s# -c [^ ]+\.cu# -c $src#" <<<"$cmd")"
(cd "$build" && eval "$cmd -Xptxas -v") >"$out/ptxas.log" 2>&1 || { cat "$out/ptxas.log" >&2; exit 1; }

# Kernel names demangled where c++filt is at hand.
demangle() { if command -v c++filt >/dev/null; then c++filt; else cat; fi; }

# ptxas: one block per kernel (the entry's name, then its resource lines).
awk '/Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
     /bytes stack frame/ { gsub(/^ +/, ""); frame = $0 }
     /Used [0-9]+ registers/ { sub(/.*Used/, "Used"); print name; print "    " $0; print "    " frame }' "$out/ptxas.log" |
  demangle

if (( max_spill >= 0 )); then
  worst=$(awk '/bytes spill stores/ { n = $5 + 0; if (n > m) m = n } END { print m + 0 }' "$out/ptxas.log")
  kernels=$(grep -c "Used [0-9]* registers" "$out/ptxas.log" || true)
  if (( worst > max_spill )); then
    echo "sass.sh: kernels spilling more than $max_spill bytes:" >&2
    awk -v max="$max_spill" '/Compiling entry function/ { name = $0; sub(/.*function '"'"'/, "", name); sub(/'"'"'.*/, "", name) }
         /bytes spill stores/ { if ($5 + 0 > max) print "  " name ": " $5 " bytes" }' "$out/ptxas.log" | demangle >&2
    exit 1
  fi
  aligned=""
  if (( smem_align > 0 )); then
    # ptxas: "Used R registers, used B barriers, S bytes smem, ..." (no smem: 0).
    misaligned=$(awk -v a="$smem_align" '/Compiling entry function/ { name = $0; sub(/.*function '"'"'/, "", name); sub(/'"'"'.*/, "", name) }
         /Used [0-9]+ registers/ { n = 0; if (match($0, /[0-9]+ bytes smem/)) n = substr($0, RSTART, RLENGTH) + 0
                                   if (n % a != 0) print "  " name ": " n " bytes" }' "$out/ptxas.log" | demangle)
    if [[ -n "$misaligned" ]]; then
      echo "sass.sh: kernels whose static shared memory is no multiple of $smem_align bytes:" >&2
      echo "$misaligned" >&2
      exit 1
    fi
    aligned=", static shared memory a multiple of $smem_align bytes"
  fi
  echo "sass.sh: $kernels kernels, at most $worst bytes of spill stores (limit $max_spill)$aligned"
  exit 0
fi

objdump="$(command -v cuobjdump || true)"
if [[ -z "$objdump" ]] || ! command -v nvdisasm >/dev/null; then
  tools="$root/.tools"
  objdump="$tools/nvidia/cu13/bin/cuobjdump"
  if [[ ! -x "$objdump" || ! -x "$tools/nvidia/cu13/bin/nvdisasm" ]]; then
    mkdir -p "$tools/wheel"
    python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      -d "$tools/wheel" "nvidia-cuda-cuobjdump==13.*" "nvidia-cuda-nvdisasm==13.*" >&2
    for w in "$tools"/wheel/*.whl; do python3 -m zipfile -e "$w" "$tools"; done
    rm -rf "$tools/wheel"
    chmod +x "$tools"/nvidia/cu13/bin/*
  fi
  export PATH="$tools/nvidia/cu13/bin:$PATH"  # (cuobjdump runs nvdisasm)
fi
"$objdump" -sass "$out/k.o" >"$out/k.sass"
echo
echo "SASS opcodes per kernel (static counts, predicated ones included):"
# One "kernel opcode count" line per pair, then per kernel its opcodes by count, ten a line.
awk '/Function : / { name = $NF; next }
     /^ +\/\*[0-9a-f]+\*\/ / { op = $2; if (op ~ /^@/) op = $3; sub(/\..*/, "", op); sub(/;$/, "", op); n[name " " op]++ }
     END { for (k in n) print k, n[k] }' "$out/k.sass" |
  sort -k1,1 -k3,3nr -k2,2 |
  awk '$1 != name { if (name) printf "\n"; name = $1; printf "%s\n", name; i = 0 }
       { printf "%s%s %d", (i % 10 == 0 ? (i ? "\n  " : "  ") : " "), $2, $3; ++i }
       END { if (name) printf "\n" }' | demangle
if (( load_stalls )); then
  echo
  python3 "$root/tools/sass_load_stalls.py" "$out/k.sass"
fi
if (( store_load_chains )); then
  echo
  python3 "$root/tools/sass_store_load_chains.py" "$out/k.sass" ${max_rounds:+--max-rounds "$max_rounds"}
fi
if (( listing )); then
  echo
  cat "$out/k.sass"
fi
