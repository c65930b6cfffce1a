import sys, torch, ctypes
sys.path.insert(0, ".peers/kit")
import sidebyside as S
import torch.nn.functional as F
ncu = len(sys.argv) > 1
nt = S.NvteRunner("build-gpu/libnormtune.so")
fi = None
try:
    fi = ctypes.CDLL(".peers/kit/libfi_norm.so")
    fi.base_2r2w.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_size_t, ctypes.c_void_p]
except Exception as e:
    print("no fi", e)
shapes = [(8192, 7168), (4096, 8192), (65536, 128), (16384, 4096)] if not ncu else [(8192, 7168), (65536, 128)]
for M, N in shapes:
    torch.manual_seed(0)
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x); w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    z, ro = torch.empty_like(x), torch.empty_like(x)
    rs = torch.empty(M, device="cuda", dtype=torch.float32)
    f_nt = nt.add_fwd(x, r, w, z, ro, rs)
    torch._dynamo.reset()
    g = torch.compile(lambda a, b, gg: (F.rms_norm(a + b, (N,), gg, 1e-6), a + b))
    f_ind = lambda: g(x, r, w)
    y2, y3 = torch.empty_like(x), torch.empty_like(x)
    f_base = (lambda: fi.base_2r2w(x.data_ptr(), r.data_ptr(), y2.data_ptr(), y3.data_ptr(), M * N,
                                   torch.cuda.current_stream().cuda_stream)) if fi else None
    for f in (f_nt, f_ind) + ((f_base,) if f_base else ()):
        f()
    torch.cuda.synchronize()
    zi, ri = f_ind()
    print(M, N, "maxdiff z", (zi.float() - z.float()).abs().max().item(), "ro", (ri.float() - ro.float()).abs().max().item())
    if ncu:
        torch.cuda.cudart().cudaProfilerStart()
        f_nt(); f_ind(); f_base and f_base()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        continue
    for rnd in range(2):
        res = {k: S.bench(f) for k, f in (("nt", f_nt), ("ind", f_ind), ("base", f_base)) if f}
        print(M, N, rnd, {k: round(v, 1) for k, v in res.items()}, flush=True)
