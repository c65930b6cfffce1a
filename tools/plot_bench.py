#!/usr/bin/env python3
"""Plot `normtune bench --json` results: achieved TB/s per shape and op, with the same-shape
baseline (copy, or 2 reads + 2 writes for the fused add) and the 2 GiB copy bandwidth.

usage: tools/plot_bench.py bench.json out.png     (needs matplotlib)
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    data = json.load(open(src))
    rows = [r for r in data["results"] if r["rows"] * r["hidden"] >= 1 << 20]
    shapes = []
    for r in rows:
        s = f'{r["rows"]}x{r["hidden"]}'
        if s not in shapes:
            shapes.append(s)
    ops = sorted({r["op"] for r in rows}, key=["rmsnorm", "layernorm", "rmsnorm_add"].index)
    width = 0.8 / (len(ops) + 1)
    fig, ax = plt.subplots(figsize=(13, 5))
    for i, op in enumerate(ops):
        ys, base = [], []
        for s in shapes:
            r = next((r for r in rows if r["op"] == op and f'{r["rows"]}x{r["hidden"]}' == s), None)
            ys.append(r["tbps"] if r else 0)
            base.append(r["tbps"] * r["ratio_to_baseline"] if r else 0)
        xs = [k + i * width for k in range(len(shapes))]
        ax.bar(xs, ys, width, label=f"{op} ({rows[0]['dtype']})")
        ax.scatter(xs, base, marker="_", s=120, color="black", zorder=3,
                   label="same-shape baseline (copy / 2r2w)" if i == 0 else None)
    ax.axhline(data["copy_peak_tbps"], color="gray", linestyle="--",
               label=f'2 GiB copy {data["copy_peak_tbps"]:.2f} TB/s')
    ax.set_xticks([k + width * (len(ops) - 1) / 2 for k in range(len(shapes))])
    ax.set_xticklabels(shapes, rotation=30)
    ax.set_ylabel("TB/s (useful bytes)")
    ax.set_title(f'normtune forward on {data["device"]}')
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
