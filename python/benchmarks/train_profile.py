"""Where the training step of train_parity.py's model spends its time, with torch.nn.RMSNorm
and with normtune.nn.RMSNorm, eager and under torch.compile: wall time per step, GPU kernel
time per step (torch.profiler), kernels launched per step, the kernels that touch the norm
(name contains "norm" or "rsqrt") and the top kernels. Wall time well above the GPU time means
the step waits on the host (Python, autograd, launches); more GPU time means slower or extra
kernels. Needs a GPU.

    python python/benchmarks/train_profile.py [--json out.json] [--steps 20] [--trace-dir DIR] [--runs ...]
                                              [--in-process]
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_parity import timing_step  # noqa: E402


def device_time(event):
    for name in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, name):
            return getattr(event, name)
    return 0.0


# CUDA runtime calls (as torch.profiler names them) after which the host waits for the GPU.
# (cudaMemcpy* is listed whole: a copy from pageable host memory waits for the stream.)
_STALLING_CALLS = ("Synchronize", "cudaMemcpy", "cudaMalloc", "cudaFree", "cudaHostAlloc", "aten::item",
                   "aten::_local_scalar_dense")


def gpu_gaps(trace_path, profiled):
    """Where the GPU sat idle between kernels in a chrome trace, per step: the total, and the
    largest contributors, each named by the kernel that ended the gap and the innermost CPU op
    that launched it, with how much of the gap was the host launching late (the launch call
    ended after the previous kernel had finished) rather than the GPU waiting on itself."""
    with open(trace_path) as f:
        events = json.load(f).get("traceEvents", [])
    kernels = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e),
                     key=lambda e: e["ts"])
    launches = {e["args"].get("correlation"): e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "args" in e}
    ops = sorted((e for e in events if e.get("cat") == "cpu_op" and "dur" in e), key=lambda e: e["ts"])
    starts = [e["ts"] for e in ops]

    def launching_op(ts):
        # The innermost CPU op running at ts: the latest-starting op that contains ts.
        import bisect
        i = bisect.bisect_right(starts, ts) - 1
        while i >= 0:
            if ops[i]["ts"] + ops[i]["dur"] >= ts:
                return ops[i]["name"]
            i -= 1
        return "(no op)"

    total, host_late, by_site = 0.0, 0.0, {}
    for prev, cur in zip(kernels, kernels[1:]):
        gap = cur["ts"] - (prev["ts"] + prev["dur"])
        if gap <= 0:
            continue
        launch = launches.get(cur.get("args", {}).get("correlation"))
        late = 0.0
        site = "(launch not found)"
        if launch is not None:
            late = min(gap, max(0.0, launch["ts"] + launch["dur"] - (prev["ts"] + prev["dur"])))
            site = launching_op(launch["ts"])
        total += gap
        host_late += late
        key = (site[:80], cur["name"][:80])
        agg = by_site.setdefault(key, [0.0, 0.0, 0])
        agg[0] += gap
        agg[1] += late
        agg[2] += 1
    top = sorted(by_site.items(), key=lambda kv: -kv[1][0])[:12]
    ms = lambda us: us / profiled / 1e3  # noqa: E731
    return {"idle_ms": ms(total), "host_late_ms": ms(host_late),
            "top": [{"op": k[0], "kernel": k[1], "idle_ms": ms(v[0]), "host_late_ms": ms(v[1]), "count": v[2] / profiled}
                    for k, v in top]}


def profile(norm, compiled, steps, profiled=5, trace_dir=None):
    step = timing_step(norm, compiled)
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - t0) / steps * 1e3

    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(profiled):
            step()
        torch.cuda.synchronize()
    gaps = None
    if trace_dir:
        path = os.path.join(trace_dir, f"trace_{norm}{'_compile' if compiled else ''}.json")
        prof.export_chrome_trace(path)
        gaps = gpu_gaps(path, profiled)
    kernels = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA and device_time(e) > 0]
    per_step = lambda us: us / profiled / 1e3  # noqa: E731  (µs over the profiled steps -> ms per step)
    norm_kernels = [e for e in kernels if "norm" in e.key.lower() or "rsqrt" in e.key.lower()]
    top = sorted(kernels, key=lambda e: -device_time(e))[:15]
    # Host side: the CPU ops and CUDA runtime calls that cost the most per step, and every call
    # that can stall the host on the GPU (a synchronize, a copy through pageable memory, an
    # allocation outside the caching allocator): wall time far above the GPU time with the
    # same kernels points there (measured on the H200 in session 7: normtune eager 12.9 ms/step wall, 7.0 GPU; torch 9.0
    # and 7.1).
    host = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CPU]
    host_top = sorted(host, key=lambda e: -e.self_cpu_time_total)[:20]
    stalls = [e for e in host if any(s in e.key for s in _STALLING_CALLS)]
    torch._dynamo.reset()
    return {
        "host_top": [{"name": e.key[:120], "self_cpu_ms": per_step(e.self_cpu_time_total), "count": e.count / profiled}
                     for e in host_top],
        "host_stalls": [{"name": e.key[:120], "self_cpu_ms": per_step(e.self_cpu_time_total),
                         "count": e.count / profiled} for e in stalls],
        "gpu_idle": gaps,
        "wall_ms": wall_ms,
        "gpu_ms": per_step(sum(device_time(e) for e in kernels)),
        "kernels_per_step": sum(e.count for e in kernels) / profiled,
        "norm_gpu_ms": per_step(sum(device_time(e) for e in norm_kernels)),
        "norm_kernels": [{"name": e.key[:120], "ms": per_step(device_time(e)), "count": e.count / profiled}
                         for e in sorted(norm_kernels, key=lambda e: -device_time(e))],
        "top": [{"name": e.key[:120], "ms": per_step(device_time(e)), "count": e.count / profiled} for e in top],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--json", default="train_profile.json")
    p.add_argument("--trace-dir", default=None,
                   help="write each run's chrome trace here and report where the GPU sat idle between kernels")
    p.add_argument("--runs", default="torch,torch_compile,normtune,normtune_compile",
                   help="comma-separated subset of the four runs")
    p.add_argument("--in-process", action="store_true",
                   help="run every selected run in this process (by default each run is its own process: a run "
                        "after a torch.compile run inherits its compile workers and measured 13.3 ms/step instead "
                        "of 8.8 on the H200 in session 8)")
    args = p.parse_args()
    runs = [r for r in args.runs.split(",") if r]
    out = {}
    if len(runs) > 1 and not args.in_process:
        import subprocess
        import tempfile
        for name in runs:
            with tempfile.TemporaryDirectory() as tmp:
                part = os.path.join(tmp, "run.json")
                cmd = [sys.executable, os.path.abspath(__file__), "--runs", name, "--steps", str(args.steps),
                       "--json", part] + (["--trace-dir", args.trace_dir] if args.trace_dir else [])
                subprocess.run(cmd, check=True)
                with open(part) as f:
                    out.update(json.load(f)["runs"])
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "runs": out}, f, indent=1)
        return
    for norm in ("torch", "normtune"):
        for compiled in (False, True):
            name = f"{norm}{'_compile' if compiled else ''}"
            if name not in runs:
                continue
            r = profile(norm, compiled, args.steps, trace_dir=args.trace_dir)
            out[name] = r
            print(f"{name:18s} wall {r['wall_ms']:.3f} ms/step, GPU {r['gpu_ms']:.3f} ms/step, "
                  f"{r['kernels_per_step']:.0f} kernels/step, norm kernels {r['norm_gpu_ms']:.3f} ms/step", flush=True)
            for k in r["norm_kernels"][:6]:
                print(f"    {k['ms']:.4f} ms x{k['count']:.0f}  {k['name']}", flush=True)
            for k in r["host_stalls"]:
                print(f"    host {k['self_cpu_ms']:.4f} ms x{k['count']:.0f}  {k['name']}", flush=True)
            for k in r["host_top"][:5]:
                print(f"    host top {k['self_cpu_ms']:.4f} ms x{k['count']:.0f}  {k['name']}", flush=True)
            if r["gpu_idle"]:
                g = r["gpu_idle"]
                print(f"    GPU idle {g['idle_ms']:.3f} ms/step between kernels, {g['host_late_ms']:.3f} of it launched late",
                      flush=True)
                for k in g["top"][:8]:
                    print(f"      idle {k['idle_ms']:.4f} (late {k['host_late_ms']:.4f}) ms x{k['count']:.0f} before "
                          f"{k['kernel']}  [launched in {k['op']}]", flush=True)
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "runs": out}, f, indent=1)


if __name__ == "__main__":
    main()
