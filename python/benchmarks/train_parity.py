"""Training parity (issue 12): a small LLaMA-style decoder trained with torch.nn.RMSNorm and with
normtune.nn.RMSNorm from one seed; the loss curves must agree within 1% at every logged step,
and two normtune runs must give bitwise-identical losses.

    python python/benchmarks/train_parity.py                        # one GPU: torch, normtune, normtune
    torchrun --nproc_per_node=2 python/benchmarks/train_parity.py   # DDP, the same global batch
    python python/benchmarks/train_parity.py --device cpu --norms torch --steps 3   # the script itself

Model: 4 pre-norm decoder layers (hidden 1024, 8 heads, SwiGLU 2816), vocabulary 4096, sequences
of 256 tokens drawn from a fixed random bigram table (so the loss falls), global batch 16,
AdamW (lr 3e-4), bf16 autocast with fp32 parameters; deterministic algorithms throughout.
Writes the curves as JSON (--json) and a PNG (--png, needs matplotlib).
"""
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F


def make_norm(kind, hidden):
    if kind == "torch":
        return torch.nn.RMSNorm(hidden, eps=1e-6)
    import normtune
    return normtune.nn.RMSNorm(hidden, eps=1e-6)


class Block(torch.nn.Module):
    def __init__(self, norm, hidden=1024, heads=8, ffn=2816):
        super().__init__()
        self.heads = heads
        self.attn_norm, self.mlp_norm = make_norm(norm, hidden), make_norm(norm, hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden, bias=False)
        self.proj = torch.nn.Linear(hidden, hidden, bias=False)
        self.gate_up = torch.nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, self.heads, h // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, h))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(torch.nn.Module):
    def __init__(self, norm, vocab=4096, hidden=1024, layers=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.blocks = torch.nn.ModuleList(Block(norm, hidden) for _ in range(layers))
        self.norm = make_norm(norm, hidden)
        self.head = torch.nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def timing_step(norm, compiled=False, batch=16, seq=256):
    """One bf16-autocast AdamW training step of the model on fixed random tokens, as a closure
    (for the benchmarks: bench_torch.py, train_profile.py)."""
    torch.manual_seed(0)
    model = Decoder(norm).cuda()
    run = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    tokens = torch.randint(0, 4096, (batch, seq + 1), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = run(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def batches(steps, batch, seq, vocab, device, seed=1234):
    """Token sequences from a fixed random bigram table (each token has 8 likely successors)."""
    g = torch.Generator().manual_seed(seed)
    successors = torch.randint(0, vocab, (vocab, 8), generator=g)
    for _ in range(steps):
        tokens = torch.empty(batch, seq + 1, dtype=torch.long)
        tokens[:, 0] = torch.randint(0, vocab, (batch,), generator=g)
        for i in range(seq):
            pick = torch.randint(0, 8, (batch,), generator=g)
            tokens[:, i + 1] = successors[tokens[:, i], pick]
        yield tokens.to(device)


def train(norm, args, device, rank=0, world=1):
    torch.manual_seed(0)  # the same initial weights for every norm (RMSNorm weights start at 1)
    model = Decoder(norm).to(device)
    assert all(p.device == device for p in model.parameters()), "every parameter (the norms' too) on this rank's GPU"
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    losses = []
    per_rank = args.batch // world
    for step, tokens in enumerate(batches(args.steps, args.batch, args.seq, 4096, "cpu")):
        tokens = tokens[rank * per_rank:(rank + 1) * per_rank].to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if world > 1:
            loss = loss.detach().clone()
            torch.distributed.all_reduce(loss)
            loss /= world
        if step % args.log_every == 0 or step == args.steps - 1:
            losses.append((step, loss.item()))
            if rank == 0:
                print(f"{norm:8s} step {step:4d} loss {loss.item():.6f}", flush=True)
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=16, help="global batch (split over DDP ranks)")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--norms", default="torch,normtune,normtune", help="runs, in order")
    p.add_argument("--device", default="cuda")
    p.add_argument("--json", default="train_parity.json")
    p.add_argument("--png", default="")
    p.add_argument("--reference-json", default="", help="another run's JSON (e.g. one GPU): curves within 1%% of it")
    args = p.parse_args()

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.enable_flash_sdp(False)  # the math and efficient kernels are deterministic here
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.distributed.init_process_group("nccl")
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    else:
        device = torch.device(args.device)
        if device.type == "cuda" and device.index is None:
            # (A parameter's device always names its index: "cuda" means the current one.)
            device = torch.device("cuda", torch.cuda.current_device())

    runs = [(norm, train(norm, args, device, rank, world)) for norm in args.norms.split(",")]
    if rank != 0:
        torch.distributed.destroy_process_group()
        return
    result = {"world_size": world, "runs": [{"norm": n, "losses": l} for n, l in runs]}
    ok = True
    base = runs[0][1]
    for norm, losses in runs[1:]:
        worst = max(abs(a - b) / abs(a) for (_, a), (_, b) in zip(base, losses))
        print(f"{norm} vs {runs[0][0]}: largest relative loss difference {worst:.4%} (target < 1%)")
        ok &= worst < 0.01 and all(math.isfinite(v) for _, v in losses)
    repeats = [l for n, l in runs if n == "normtune"]
    if len(repeats) >= 2:
        same = all(r == repeats[0] for r in repeats[1:])
        print(f"normtune runs bitwise identical: {same}")
        ok &= same
        result["normtune_runs_identical"] = same
    if args.reference_json:
        with open(args.reference_json) as f:
            ref = {r["norm"]: r["losses"] for r in json.load(f)["runs"]}
        for norm, losses in runs:
            if norm in ref:
                worst = max(abs(a - b) / abs(b) for (_, a), (_, b) in zip(losses, ref[norm]))
                print(f"{norm}: largest relative difference to {args.reference_json}: {worst:.4%} (target < 1%)")
                ok &= worst < 0.01
                result.setdefault("vs_reference", {})[norm] = worst
    result["within_1_percent"] = ok
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    if args.png:
        try:
            import matplotlib
        except ImportError:
            print("--png: matplotlib is not installed; curves are in", args.json)
            args.png = ""
    if args.png:
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        for i, (norm, losses) in enumerate(runs):
            plt.plot([s for s, _ in losses], [v for _, v in losses], label=f"{norm} (run {i})",
                     linestyle="-" if i == 0 else "--")
        plt.xlabel("step")
        plt.ylabel("loss")
        plt.title(f"RMSNorm parity, {world} GPU(s)")
        plt.legend()
        plt.savefig(args.png, dpi=120)
    if world > 1:
        torch.distributed.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
