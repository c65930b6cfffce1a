#!/usr/bin/env bash
# A/B timing of this tree against an earlier revision on one GPU machine, in one call: both
# builds' `normtune bench` on the same arguments, alternating, so that clocks, temperature and
# the machine are the same for both (a change of a few percent is below the spread between
# machines and sessions, not below the spread within one run).
#   tools/ab.sh prepare REV            here (no GPU needed): REV's tree into ./ab_base (ignored
#                                      by git; the device tool needs carry: ["ab_base"])
#   tools/ab.sh prepare tree           the base is this tree itself: `run` builds it once
#                                      (build-gpu) and times it as the base, with no separate
#                                      `new` side: one whole build (about 100 s of device
#                                      time) less when only variants are compared
#   tools/ab.sh run [ROUNDS] -- ARGS   on the GPU machine: configures and builds both CLIs
#                                      (build-gpu for this tree, build-ab-base for ab_base, every
#                                      core), then runs `normtune bench ARGS --json` ROUNDS times
#                                      (default 2) for each build, base first, and prints per
#                                      result the best time of each, the ratio to the baseline
#                                      each time, and new / base (also in $OUT/ab.txt).
#                                      Each round's JSON and text and the build logs end up
#                                      in $OUT/ab_runs.tar.gz (default $OUT: ./out).
#   tools/ab.sh variant NAME PATCH...  here: this tree's tracked files with the PATCHes applied
#                                      in order into ./ab_var/NAME (carry ["ab_base", "ab_var"]);
#                                      `run` then builds and times every variant too
#                                      (build-ab-var-NAME; each a whole build: about 90 s on 16
#                                      cores) in the same rounds, and prints var-NAME / base per
#                                      result: several patches measured in one call.
#   tools/ab.sh variant-lines NAME LINE...|-
#                                      here: the same with table lines instead of patches:
#                                      each NORMTUNE_TUNED line (as `normtune tune` prints it;
#                                      `-`: from stdin) replaces the line of its key in
#                                      registry/tuned/sm90.def or is appended
#                                      (tools/def_lines.py); to make this tree a variant, run
#                                      tools/def_lines.py registry/tuned/sm90.def LINE... here.
#   tools/ab.sh clean-variants         here: removes ./ab_var.
# Device time: `tools/prebuilt.sh pack-ab` here builds every side's CLI beforehand; with
# carry [".prebuilt", "ab_base", "ab_var"], `run` unpacks them instead of building (a side whose
# sources changed since is built there as before). More archives than one call's 64 MiB holds
# (about two, with the tree): `tools/prebuilt.sh carry-plan ab_base ab_var` prints which travel
# in which of several consecutive calls (staging calls run `tools/prebuilt.sh stage`; `run`
# finds the staged ones).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmd="${1:-}"
# variant, variant-lines: checks NAME and that something follows it, then copies this tree's
# tracked files into $dir = ./ab_var/NAME (sets name and dir).
new_variant_dir() {
  local usage="$1"
  name="${2:-}"
  [[ -n "$name" && -n "${3:-}" ]] || { echo "usage: tools/ab.sh $usage" >&2; exit 1; }
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "ab.sh: variant names are letters, digits, _ . -" >&2; exit 1; }
  dir="$root/ab_var/$name"
  rm -rf "$dir" && mkdir -p "$dir"
  # (docs/ left out: no build reads it, and it is most of the bytes the device tool carries.)
  # (-m: the copies' files dated now, so that a build folder reused for NAME rebuilds them.)
  git -C "$root" ls-files -z -- . ':!docs' | (cd "$root" && xargs -0 tar -c) | tar -x -m -C "$dir"
}
case "$cmd" in
  prepare)
    rev="${2:?usage: tools/ab.sh prepare REV|tree}"
    if [[ "$rev" == tree ]]; then
      rm -rf "$root/ab_base" && mkdir -p "$root/ab_base"
      echo "this tree" > "$root/ab_base/.ab_rev"
      touch "$root/ab_base/.ab_is_tree"
      echo "ab_base: this tree (built once, timed as the base); on the device: carry [\"ab_base\"]"
      exit 0
    fi
    git -C "$root" rev-parse --verify --quiet "$rev^{commit}" >/dev/null || { echo "ab.sh: no commit '$rev'" >&2; exit 1; }
    rm -rf "$root/ab_base" && mkdir -p "$root/ab_base"
    git -C "$root" archive "$rev" -- . ':!docs' | tar -x -m -C "$root/ab_base"  # (as variant's copies)
    git -C "$root" rev-parse "$rev" > "$root/ab_base/.ab_rev"
    echo "ab_base: $(cat "$root/ab_base/.ab_rev"); on the device: carry [\"ab_base\"] (and the usual paths)"
    ;;
  variant)
    new_variant_dir "$cmd NAME PATCH..." "${@:2}"
    # (From the root with --directory: run inside ab_var/NAME, which lies in this repository,
    # git apply would skip every path outside that folder, silently.)
    for patch in "${@:3}"; do
      if ! git -C "$root" apply --directory="ab_var/$name" "$(realpath "$patch")"; then
        rm -rf "$dir"
        echo "ab.sh: $patch does not apply to this tree (with the patches before it)" >&2
        exit 1
      fi
    done
    echo "ab_var/$name: this tree + ${*:3}; on the device: carry [\"ab_base\", \"ab_var\"]"
    ;;
  variant-lines)
    new_variant_dir "$cmd NAME LINE...|-" "${@:2}"
    if ! python3 "$root/tools/def_lines.py" "$dir/registry/tuned/sm90.def" "${@:3}"; then
      rm -rf "$dir"
      exit 1
    fi
    echo "ab_var/$name: this tree with those lines; on the device: carry [\"ab_base\", \"ab_var\"]"
    ;;
  clean-variants)
    rm -rf "$root/ab_var"
    ;;
  run)
    shift
    rounds=2
    if [[ "${1:-}" =~ ^[0-9]+$ ]]; then rounds="$1"; shift; fi
    [[ "${1:-}" == "--" ]] && shift
    [[ -d "$root/ab_base" ]] || { echo "ab.sh: no ./ab_base (tools/ab.sh prepare REV, then carry it)" >&2; exit 1; }
    out="${OUT:-$root/out}"
    mkdir -p "$out"
    export PATH="/usr/local/cuda/bin:$PATH"
    build() {  # source dir, build dir, log (or its CLI from tools/prebuilt.sh pack-ab, carried)
      if "$root/tools/prebuilt.sh" unpack "$1" "$2" cli >"$3" 2>&1; then
        echo "ab.sh: $(basename "$2") prebuilt"
        return
      fi
      # (A folder an earlier unpack left holds the other machine's cache: build afresh.)
      [[ -f "$2/prebuilt-manifest.json" ]] && rm -rf "$2"
      if ! { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNORMTUNE_CUDA_ARCHS=90 >>"$3" 2>&1 &&
             cmake --build "$2" --parallel "$(nproc)" --target normtune_cli >>"$3" 2>&1; }; then
        grep -E "error" "$3" | head -20
        exit 1
      fi
    }
    start=$(date +%s)
    build "$root" "$root/build-gpu" "$out/ab_build_new.log"
    if [[ -f "$root/ab_base/.ab_is_tree" ]]; then  # (prepare tree)
      sides=(base)
      declare -A bins=([base]="$root/build-gpu/tools/normtune")
    else
      build "$root/ab_base" "$root/build-ab-base" "$out/ab_build_base.log"
      sides=(base new)
      declare -A bins=([base]="$root/build-ab-base/tools/normtune" [new]="$root/build-gpu/tools/normtune")
    fi
    for dir in "$root"/ab_var/*/; do
      [[ -d "$dir" ]] || continue
      name="$(basename "$dir")"
      build "$dir" "$root/build-ab-var-$name" "$out/ab_build_var_$name.log"
      sides+=("var-$name")
      bins["var-$name"]="$root/build-ab-var-$name/tools/normtune"
    done
    echo "ab.sh: ${#sides[@]} CLIs built in $(( $(date +%s) - start )) s"
    for (( r = 1; r <= rounds; ++r )); do
      for side in "${sides[@]}"; do
        "${bins[$side]}" bench "$@" --json "$out/ab_${side}_$r.json" >"$out/ab_${side}_$r.txt" 2>&1 ||
          { tail -5 "$out/ab_${side}_$r.txt"; exit 1; }
      done
    done
    # The summary also goes to $OUT/ab.txt, first of the files by name (the device tool returns
    # a limited number of files).
    python3 "$root/tools/ab_summary.py" "$out" "$rounds" "$(cat "$root/ab_base/.ab_rev" 2>/dev/null || echo base)" \
      "${sides[@]}" | tee "$out/ab.txt"
    # The rounds' files and the build logs then go into one archive, $OUT/ab_runs.tar.gz: the
    # device tool returns at most 8 files, and what the caller runs after this needs the room.
    (cd "$out" && shopt -s nullglob && files=(ab_build_*.log ab_*_[0-9]*.json ab_*_[0-9]*.txt) &&
      tar -czf ab_runs.tar.gz "${files[@]}" && rm -f "${files[@]}") ||
      echo "ab.sh: the rounds' files stay unpacked in $out" >&2
    ;;
  *)
    echo "usage: tools/ab.sh prepare REV|tree | variant NAME PATCH... | variant-lines NAME LINE...|- | clean-variants | run [ROUNDS] -- BENCH ARGS" >&2
    exit 1
    ;;
esac
