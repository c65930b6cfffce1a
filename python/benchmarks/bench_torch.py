"""Per op and shape: forward, and forward + backward through autograd, of normtune's PyTorch ops
against torch.nn.functional eager and torch.compile (and Liger / QuACK when importable), bf16,
CUDA-event timing with the L2 flushed, median of --reps. Also the host time per eager call at
1 x 4096 (the per-call overhead target). Needs a GPU.

    python python/benchmarks/bench_torch.py [--json out.json] [--png out.png]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import normtune

SHAPES = [(4096, 4096), (4096, 8192), (8192, 7168), (16384, 4096), (32768, 8192), (16384, 1536), (65536, 128),
          (8192, 32768), (4096, 65536), (1024, 262144)]


def timed(fn, reps, flush):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        fn()
    out = []
    for _ in range(reps):
        flush.zero_()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        out.append(start.elapsed_time(stop) * 1e3)
    return sorted(out)[len(out) // 2]


def contenders(op):
    eager = {"rms": lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w, 1e-6),
             "ln": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)}[op]
    ours = {"rms": lambda x, w, b: normtune.rms_norm(x, w, 1e-6),
            "ln": lambda x, w, b: normtune.layer_norm(x, w, b, 1e-5)}[op]
    out = {"normtune": ours, "eager": eager, "compile": torch.compile(eager, dynamic=False)}
    if op == "rms":
        try:
            from liger_kernel.transformers.functional import liger_rms_norm
            out["liger"] = lambda x, w, b: liger_rms_norm(x, w, 1e-6)
        except ImportError:
            pass
        try:
            from quack import rmsnorm as quack_rmsnorm
            out["quack"] = lambda x, w, b: quack_rmsnorm(x, w, eps=1e-6)
        except ImportError:
            pass
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--json", default="bench_torch.json")
    p.add_argument("--png", default="")
    args = p.parse_args()
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for op in ("rms", "ln"):
        fns = contenders(op)
        for m, n in SHAPES:
            x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            w = torch.ones(n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            b = torch.zeros(n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            dy = torch.randn_like(x)
            row = {"op": op, "M": m, "N": n}
            for name, fn in fns.items():
                try:
                    with torch.no_grad():
                        row[f"fwd_{name}"] = timed(lambda: fn(x, w, b), args.reps, flush)
                    row[f"fwdbwd_{name}"] = timed(lambda: torch.autograd.backward(fn(x, w, b), dy), args.reps, flush)
                except Exception as e:  # a contender that cannot run this shape
                    row[f"error_{name}"] = str(e)[:200]
            rows.append(row)
            print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()
                              if not k.startswith("error")}), flush=True)
    # Host time per eager call at 1 x 4096 (the GPU is not waited for in the loop).
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
    overhead = {}
    for name, fn in (("normtune", lambda: normtune.rms_norm(x, w, 1e-6)),
                     ("torch", lambda: F.rms_norm(x, (4096,), w, 1e-6))):
        with torch.no_grad():
            for _ in range(100):
                fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(10000):
                fn()
            overhead[name] = (time.perf_counter() - t0) / 10000 * 1e6
            torch.cuda.synchronize()
    print("host us per eager call at 1x4096:", {k: round(v, 2) for k, v in overhead.items()})
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "host_us_per_call": overhead}, f, indent=1)
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(14, 5))
        for ax, op in zip(axes, ("rms", "ln")):
            sel = [r for r in rows if r["op"] == op]
            labels = [f"{r['M']}x{r['N']}" for r in sel]
            names = sorted({k[len("fwdbwd_"):] for r in sel for k in r if k.startswith("fwdbwd_")})
            for i, name in enumerate(names):
                ax.bar([j + i * 0.8 / len(names) for j in range(len(sel))],
                       [r.get(f"fwdbwd_{name}", 0) for r in sel], width=0.8 / len(names), label=name)
            ax.set_xticks(range(len(sel)), labels, rotation=45)
            ax.set_ylabel("fwd+bwd µs")
            ax.set_title(op)
            ax.legend()
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)


if __name__ == "__main__":
    main()
