#!/usr/bin/env bash
# A/B timing of this tree against an earlier revision on one GPU machine, in one call: both
# builds' `normtune bench` on the same arguments, alternating, so that clocks, temperature and
# the machine are the same for both (a change of a few percent is below the spread between
# machines and sessions, not below the spread within one run).
#   tools/ab.sh prepare REV            here (no GPU needed): REV's tree into ./ab_base (ignored
#                                      by git; the device tool needs carry: ["ab_base"])
#   tools/ab.sh run [ROUNDS] -- ARGS   on the GPU machine: configures and builds both CLIs
#                                      (build-gpu for this tree, build-ab-base for ab_base, every
#                                      core), then runs `normtune bench ARGS --json` ROUNDS times
#                                      (default 2) for each build, base first, and prints per
#                                      result the best time of each, the ratio to the baseline
#                                      each time, and new / base (also in $OUT/ab.txt).
#                                      JSON and text under $OUT (default ./out).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmd="${1:-}"
case "$cmd" in
  prepare)
    rev="${2:?usage: tools/ab.sh prepare REV}"
    git -C "$root" rev-parse --verify --quiet "$rev^{commit}" >/dev/null || { echo "ab.sh: no commit '$rev'" >&2; exit 1; }
    rm -rf "$root/ab_base" && mkdir -p "$root/ab_base"
    git -C "$root" archive "$rev" | tar -x -C "$root/ab_base"
    git -C "$root" rev-parse "$rev" > "$root/ab_base/.ab_rev"
    echo "ab_base: $(cat "$root/ab_base/.ab_rev"); on the device: carry [\"ab_base\"] (and the usual paths)"
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
    build() {  # source dir, build dir, log
      if ! { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNORMTUNE_CUDA_ARCHS=90 >"$3" 2>&1 &&
             cmake --build "$2" --parallel "$(nproc)" --target normtune_cli >>"$3" 2>&1; }; then
        grep -E "error" "$3" | head -20
        exit 1
      fi
    }
    start=$(date +%s)
    build "$root" "$root/build-gpu" "$out/ab_build_new.log"
    build "$root/ab_base" "$root/build-ab-base" "$out/ab_build_base.log"
    echo "ab.sh: both CLIs built in $(( $(date +%s) - start )) s"
    for (( r = 1; r <= rounds; ++r )); do
      for side in base new; do
        bin="$root/build-gpu/tools/normtune"
        [[ $side == base ]] && bin="$root/build-ab-base/tools/normtune"
        "$bin" bench "$@" --json "$out/ab_${side}_$r.json" >"$out/ab_${side}_$r.txt" 2>&1 ||
          { tail -5 "$out/ab_${side}_$r.txt"; exit 1; }
      done
    done
    # The summary also goes to $OUT/ab.txt, first of the files by name (the device tool returns
    # a limited number of files).
    python3 - "$out" "$rounds" "$(cat "$root/ab_base/.ab_rev" 2>/dev/null || echo base)" <<'PY' | tee "$out/ab.txt"
import json, sys
out, rounds, base_rev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(side, r):
    d = json.load(open(f"{out}/ab_{side}_{r}.json"))
    return {(x["op"], x["dtype"], x["out"], x["rows"], x["hidden"], x["backend"]): x for x in d["results"]}
runs = {s: [load(s, r) for r in range(1, rounds + 1)] for s in ("base", "new")}
print(f"A/B: base {base_rev[:10]} vs this tree, best of {rounds} (us; ratio to the same-run baseline each round)")
print(f"{'op':<16}{'dtype>z':<14}{'shape':>14}  {'base us':>9} {'ratios':<16}{'new us':>9} {'ratios':<16}{'new/base':>8}  graph us base -> new")
for k in runs["base"][0]:
    if not all(k in run for side in runs for run in runs[side]):
        continue
    best = {s: min(run[k]["us"] for run in runs[s]) for s in runs}
    rat = {s: " ".join("%.3f" % run[k]["ratio_to_baseline"] for run in runs[s]) for s in runs}
    g = {s: [run[k]["graph_us_per_call"] for run in runs[s] if run[k]["graph_us_per_call"] > 0] for s in runs}
    graph = f"{min(g['base']):.2f} -> {min(g['new']):.2f}" if g["base"] and g["new"] else ""
    op, dt, z, rows, hidden, _ = k
    print(f"{op:<16}{dt + '>' + z:<14}{f'{rows}x{hidden}':>14}  {best['base']:9.2f} {rat['base']:<16}{best['new']:9.2f} "
          f"{rat['new']:<16}{best['new'] / best['base']:8.3f}  {graph}")
PY
    ;;
  *)
    echo "usage: tools/ab.sh prepare REV | tools/ab.sh run [ROUNDS] -- BENCH ARGS" >&2
    exit 1
    ;;
esac
