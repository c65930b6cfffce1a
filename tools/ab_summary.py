#!/usr/bin/env python3
"""The table tools/ab.sh prints after its rounds: per bench result, the best time of the base
build, of this tree (new) and of each variant, their ratios to the same-run memory operation
each round, and each side's time over the base's.

    ab_summary.py OUT ROUNDS BASE_REV SIDE...   (SIDEs: base new var-NAME ...; reads
                                                 OUT/ab_SIDE_R.json, R = 1..ROUNDS)
"""
import json
import sys


def load(out, side, r):
    with open(f"{out}/ab_{side}_{r}.json") as f:
        d = json.load(f)
    return {(x["op"], x["dtype"], x["out"], x["rows"], x["hidden"], x["backend"]): x for x in d["results"]}


def main(argv):
    out, rounds, base_rev, sides = argv[1], int(argv[2]), argv[3], argv[4:]
    runs = {s: [load(out, s, r) for r in range(1, rounds + 1)] for s in sides}
    others = [s for s in sides if s != "base"]
    print(f"A/B: base {base_rev[:10]}" + (" vs this tree (new)" if "new" in sides else "")
          + "".join(f", {s}" for s in others if s != "new")
          + f"; best of {rounds} (us; ratio to the same-run baseline each round)")
    head = f"{'op':<16}{'dtype>z':<14}{'shape':>14}  {'base us':>9} {'ratios':<16}"
    for s in others:
        head += f"{s + ' us':>9} {'ratios':<16}{s + '/base':>{max(9, len(s) + 6)}}  "
    print(head + "graph us " + " -> ".join(sides))
    for k in runs["base"][0]:
        if not all(k in run for s in sides for run in runs[s]):
            continue
        best = {s: min(run[k]["us"] for run in runs[s]) for s in sides}
        rat = {s: " ".join("%.3f" % run[k]["ratio_to_baseline"] for run in runs[s]) for s in sides}
        g = {s: [run[k]["graph_us_per_call"] for run in runs[s] if run[k]["graph_us_per_call"] > 0] for s in sides}
        graph = " -> ".join(f"{min(g[s]):.2f}" for s in sides) if all(g[s] for s in sides) else ""
        op, dt, z, rows, hidden, _ = k
        line = f"{op:<16}{dt + '>' + z:<14}{f'{rows}x{hidden}':>14}  {best['base']:9.2f} {rat['base']:<16}"
        for s in others:
            line += f"{best[s]:9.2f} {rat[s]:<16}{best[s] / best['base']:>{max(9, len(s) + 6)}.3f}  "
        print(line + graph)


if __name__ == "__main__":
    main(sys.argv)
