"""Per op and shape: forward, and forward + backward through autograd, of normtune's PyTorch ops
against torch.nn.functional eager and torch.compile (and Liger / QuACK when importable), bf16,
CUDA-event timing with the L2 flushed, median of --reps. The GPU time of the op alone: a
sleep kernel ahead of each timed call lets the host run ahead, so eager Python overhead does
not count here (it is measured separately). Then:
  - the host time per eager call at 1 x 4096 (the per-call overhead target: ≤ torch + 2 µs),
    best of 3 loops of 10k calls;
  - the training step time of train_parity.py's model with each norm, eager and compiled.
Needs a GPU.

    python python/benchmarks/bench_torch.py [--json out.json] [--png out.png] [--no-train]
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

import normtune

SHAPES = [(4096, 4096), (4096, 8192), (8192, 7168), (16384, 4096), (32768, 8192), (16384, 1536), (65536, 128),
          (8192, 32768), (4096, 65536), (1024, 262144)]
OPS = ("rms", "ln", "add_rms")
ADD_SHAPES = [(4096, 4096), (8192, 7168), (16384, 1536), (65536, 128), (8192, 32768)]


def timed(fn, reps, flush):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    out = []
    for _ in range(reps):
        flush.zero_()
        torch.cuda._sleep(2_000_000)  # ~1 ms of GPU time: the host enqueues fn (compiled fwd+bwd too) meanwhile
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        out.append(start.elapsed_time(stop) * 1e3)
    return sorted(out)[len(out) // 2]


def reference(op):
    """The same math in torch.nn.functional: (x, r, w, b) -> output(s)."""
    if op == "rms":
        return lambda x, r, w, b: F.rms_norm(x, (x.shape[-1],), w, 1e-6)
    if op == "ln":
        return lambda x, r, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)

    def add_rms(x, r, w, b):
        h = x + r
        return F.rms_norm(h, (h.shape[-1],), w, 1e-6), h
    return add_rms


def contenders(op):
    ours = {"rms": lambda x, r, w, b: normtune.rms_norm(x, w, 1e-6),
            "ln": lambda x, r, w, b: normtune.layer_norm(x, w, b, 1e-5),
            "add_rms": lambda x, r, w, b: normtune.rms_norm(x, w, 1e-6, residual=r)}[op]
    eager = reference(op)
    # A fresh compiled function per shape and mode (no recompilation limit in the way).
    out = {"normtune": lambda: ours, "eager": lambda: eager,
           "compile": lambda: torch.compile(reference(op), dynamic=False)}
    if op == "rms":
        try:
            from liger_kernel.transformers.functional import liger_rms_norm
            out["liger"] = lambda: (lambda x, r, w, b: liger_rms_norm(x, w, 1e-6))
        except ImportError:
            pass
        try:
            from quack import rmsnorm as quack_rmsnorm
            out["quack"] = lambda: (lambda x, r, w, b: quack_rmsnorm(x, w, eps=1e-6))
        except ImportError:
            pass
    return out


def bench_ops(args, flush):
    rows = []
    for op in OPS:
        for m, n in ADD_SHAPES if op == "add_rms" else SHAPES:
            x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            r = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            w = (1 + 0.1 * torch.randn(n, device="cuda", dtype=torch.bfloat16)).requires_grad_()
            b = (0.1 * torch.randn(n, device="cuda", dtype=torch.bfloat16)).requires_grad_()
            dy = torch.randn_like(x)
            inputs = (x, w, b) if op == "ln" else (x, r, w) if op == "add_rms" else (x, w)
            row = {"op": op, "M": m, "N": n}
            for name, make in contenders(op).items():
                try:
                    fwd = make()
                    with torch.no_grad():
                        row[f"fwd_{name}"] = timed(lambda: fwd(x, r, w, b), args.reps, flush)
                    both = make()

                    def step():
                        out = both(x, r, w, b)
                        outs = out if isinstance(out, tuple) else (out,)
                        torch.autograd.grad(outs, inputs, [dy] * len(outs))
                    row[f"fwdbwd_{name}"] = timed(step, args.reps, flush)
                except Exception as e:  # a contender that cannot run this shape
                    row[f"error_{name}"] = str(e)[:200]
            torch._dynamo.reset()
            rows.append(row)
            print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()
                              if not k.startswith("error")}), flush=True)
    return rows


def host_overhead():
    """Host µs per eager call at 1 x 4096, bf16 (best of 4 loops of 10k calls): the forward
    without grad, and forward + backward through autograd (x and weight require grad)."""
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    dy = torch.randn_like(x)
    calls = {"normtune": lambda a, b: normtune.rms_norm(a, b, 1e-6),
             "torch": lambda a, b: F.rms_norm(a, (4096,), b, 1e-6)}
    out = {}
    for name, fn in calls.items():
        for mode in ("fwd_nograd", "fwdbwd"):
            if mode == "fwd_nograd":
                def body():
                    with torch.no_grad():
                        fn(x, w)
            else:
                def body():
                    torch.autograd.grad(fn(xg, wg), (xg, wg), dy)
            best = float("inf")
            for _ in range(4):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(10000 if mode == "fwd_nograd" else 2000):
                    body()
                best = min(best, (time.perf_counter() - t0) / (10000 if mode == "fwd_nograd" else 2000) * 1e6)
            torch.cuda.synchronize()
            out[f"{name}_{mode}"] = best
    print("host us per eager call at 1x4096:", {k: round(v, 2) for k, v in out.items()}, flush=True)
    return out


TRAIN_RUNS = ("torch", "torch_compile", "normtune", "normtune_compile")


def train_step_ms(name, steps=50):
    """ms per training step of train_parity.py's model (bf16 autocast, AdamW) for one run, in
    this process."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_parity import timing_step
    step = timing_step(name.split("_")[0], name.endswith("_compile"))
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps * 1e3


def train_steps(rounds=3):
    """ms per training step for each norm, eager and compiled: every run in a fresh process
    (a run after a torch.compile run shares its compile workers and host caches), the four
    runs interleaved over `rounds` rounds, the median of each."""
    import subprocess
    times = {name: [] for name in TRAIN_RUNS}
    for _ in range(rounds):
        for name in TRAIN_RUNS:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--train-step-only", name],
                               check=True, capture_output=True, text=True)
            times[name].append(float(r.stdout.strip().splitlines()[-1]))
    out = {}
    for name, ts in times.items():
        out[name] = sorted(ts)[len(ts) // 2]
        print(f"train step {name}: {out[name]:.3f} ms (median of {', '.join(f'{t:.3f}' for t in ts)})", flush=True)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--json", default="bench_torch.json")
    p.add_argument("--png", default="")
    p.add_argument("--no-train", action="store_true", help="skip the training-step timing")
    p.add_argument("--train-step-only", choices=TRAIN_RUNS, help=argparse.SUPPRESS)  # one run, for train_steps()
    args = p.parse_args()
    if args.train_step_only:
        print(f"{train_step_ms(args.train_step_only):.4f}")
        return
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    rows = bench_ops(args, flush)
    overhead = host_overhead()
    train = {} if args.no_train else train_steps()
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "host_us_per_call": overhead,
                   "train_step_ms": train}, f, indent=1)
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(2, len(OPS), figsize=(7 * len(OPS), 9))
        for col, op in enumerate(OPS):
            sel = [r for r in rows if r["op"] == op]
            labels = [f"{r['M']}x{r['N']}" for r in sel]
            for row_i, mode in enumerate(("fwd", "fwdbwd")):
                ax = axes[row_i][col]
                names = sorted({k[len(mode) + 1:] for r in sel for k in r if k.startswith(mode + "_")})
                for i, name in enumerate(names):
                    # time relative to torch.compile (lower is faster)
                    ax.bar([j + i * 0.8 / len(names) for j in range(len(sel))],
                           [r.get(f"{mode}_{name}", 0) / r[f"{mode}_compile"] if f"{mode}_compile" in r else 0
                            for r in sel], width=0.8 / len(names), label=name)
                ax.axhline(1.0, color="k", linewidth=0.5)
                ax.set_xticks(range(len(sel)), labels, rotation=45)
                ax.set_ylabel(f"{mode} time / torch.compile's")
                ax.set_title(f"{op} {mode} (bf16, H200)")
                ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
