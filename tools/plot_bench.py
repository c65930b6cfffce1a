#!/usr/bin/env python3
"""Plot `normtune bench --json` results: achieved TB/s per shape and op (forward ops in one
panel, backward ops in another), with each op's same-shape baseline (copy, 2 reads + 2 writes
for the fused add, 2 reads + 1 write for a backward, 3 + 1 with an added gradient) and the
2 GiB copy bandwidth.

usage: tools/plot_bench.py bench.json out.png     (needs matplotlib)
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FORWARD = ["rmsnorm", "layernorm", "rmsnorm_add"]
BACKWARD = ["rmsnorm_bwd", "layernorm_bwd", "rmsnorm_bwd_add"]


def panel(ax, data, rows, ops, title):
    shapes = []
    for r in rows:
        s = f'{r["rows"]}x{r["hidden"]}'
        if s not in shapes:
            shapes.append(s)
    width = 0.8 / (len(ops) + 1)
    for i, op in enumerate(ops):
        ys, base = [], []
        for s in shapes:
            r = next((r for r in rows if r["op"] == op and f'{r["rows"]}x{r["hidden"]}' == s), None)
            ys.append(r["tbps"] if r else 0)
            base.append(r["tbps"] * r["ratio_to_baseline"] if r else 0)
        xs = [k + i * width for k in range(len(shapes))]
        ax.bar(xs, ys, width, label=f"{op} ({rows[0]['dtype']})")
        ax.scatter(xs, base, marker="_", s=120, color="black", zorder=3,
                   label="the op's bytes at its baseline's speed" if i == 0 else None)
    ax.axhline(data["copy_peak_tbps"], color="gray", linestyle="--",
               label=f'2 GiB copy {data["copy_peak_tbps"]:.2f} TB/s')
    ax.set_xticks([k + width * (len(ops) - 1) / 2 for k in range(len(shapes))])
    ax.set_xticklabels(shapes, rotation=30)
    ax.set_ylabel("TB/s (useful bytes)")
    ax.set_title(title)
    ax.legend(loc="lower left", fontsize=8)


def main(src, dst):
    data = json.load(open(src))
    rows = [r for r in data["results"] if r["rows"] * r["hidden"] >= 1 << 20]
    groups = [(name, [op for op in ops if any(r["op"] == op for r in rows)])
              for name, ops in (("forward", FORWARD), ("backward", BACKWARD))]
    groups = [(name, ops) for name, ops in groups if ops]
    fig, axes = plt.subplots(len(groups), 1, figsize=(13, 5 * len(groups)), squeeze=False)
    for ax, (name, ops) in zip(axes[:, 0], groups):
        panel(ax, data, [r for r in rows if r["op"] in ops], ops, f'normtune {name} on {data["device"]}')
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
