"""Where the training step of train_parity.py's model spends its time, with torch.nn.RMSNorm
and with normtune.nn.RMSNorm, eager and under torch.compile: wall time per step, GPU kernel
time per step (torch.profiler), kernels launched per step, the kernels that touch the norm
(name contains "norm" or "rsqrt") and the top kernels. Wall time well above the GPU time means
the step waits on the host (Python, autograd, launches); more GPU time means slower or extra
kernels. Needs a GPU.

    python python/benchmarks/train_profile.py [--json out.json] [--steps 20]
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


def profile(norm, compiled, steps, profiled=5):
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
    args = p.parse_args()
    out = {}
    for norm in ("torch", "normtune"):
        for compiled in (False, True):
            name = f"{norm}{'_compile' if compiled else ''}"
            r = profile(norm, compiled, args.steps)
            out[name] = r
            print(f"{name:18s} wall {r['wall_ms']:.3f} ms/step, GPU {r['gpu_ms']:.3f} ms/step, "
                  f"{r['kernels_per_step']:.0f} kernels/step, norm kernels {r['norm_gpu_ms']:.3f} ms/step", flush=True)
            for k in r["norm_kernels"][:6]:
                print(f"    {k['ms']:.4f} ms x{k['count']:.0f}  {k['name']}", flush=True)
            for k in r["host_stalls"]:
                print(f"    host {k['self_cpu_ms']:.4f} ms x{k['count']:.0f}  {k['name']}", flush=True)
            for k in r["host_top"][:5]:
                print(f"    host top {k['self_cpu_ms']:.4f} ms x{k['count']:.0f}  {k['name']}", flush=True)
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "runs": out}, f, indent=1)


if __name__ == "__main__":
    main()
