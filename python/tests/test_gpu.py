"""On a GPU (skipped without one): the ops against an fp64 reference and torch.nn.functional,
gradients against autograd of the reference, opcheck, torch.compile without graph breaks,
CUDA graph capture, a device that is not the current one."""
import pytest
import torch

import normtune

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(7, 1024), (3, 5, 4096), (2, 8192), (33, 1000)]
TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def ref_rms(x, w, eps, zcg=False):
    x64, w64 = x.double(), w.double() + (1.0 if zcg else 0.0)
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w64


def ref_ln(x, w, b, eps):
    x64 = x.double()
    mu = x64.mean(-1, keepdim=True)
    var = (x64 - mu).pow(2).mean(-1, keepdim=True)
    return (x64 - mu) * torch.rsqrt(var + eps) * w.double() + b.double()


def close(got, want, dtype, what):
    tol = TOL[dtype]
    err = (got.double() - want).abs() - tol * want.abs() - 1e-5
    assert torch.isfinite(got).all(), f"{what}: non-finite values"
    assert err.max().item() <= 0, f"{what}: max excess {err.max().item()}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_forward_and_backward(dtype, shape):
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    w = (1 + 0.2 * torch.randn(shape[-1], device="cuda", dtype=dtype)).requires_grad_()
    y = normtune.rms_norm(x, w, 1e-6)
    close(y, ref_rms(x.detach(), w.detach(), 1e-6), dtype, "y")
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, (shape[-1],), w, 1e-6), atol=1e-2, rtol=TOL[dtype])
    dy = torch.randn_like(y)
    y.backward(dy)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref_rms(x64, w64, 1e-6).backward(dy.double())
    torch.testing.assert_close(x.grad.double(), x64.grad, atol=1e-2, rtol=TOL[dtype] * 2)
    torch.testing.assert_close(w.grad.double(), w64.grad, atol=5e-2, rtol=TOL[dtype] * 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_forward_and_backward(dtype, shape):
    torch.manual_seed(1)
    x = (0.5 + torch.randn(shape, device="cuda", dtype=dtype)).requires_grad_()
    w = (1 + 0.2 * torch.randn(shape[-1], device="cuda", dtype=dtype)).requires_grad_()
    b = (0.5 * torch.randn(shape[-1], device="cuda", dtype=dtype)).requires_grad_()
    y = normtune.layer_norm(x, w, b, 1e-5)
    close(y, ref_ln(x.detach(), w.detach(), b.detach(), 1e-5), dtype, "y")
    dy = torch.randn_like(y)
    y.backward(dy)
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref_ln(x64, w64, b64, 1e-5).backward(dy.double())
    torch.testing.assert_close(x.grad.double(), x64.grad, atol=1e-2, rtol=TOL[dtype] * 2)
    torch.testing.assert_close(w.grad.double(), w64.grad, atol=5e-2, rtol=TOL[dtype] * 4)
    torch.testing.assert_close(b.grad.double(), b64.grad, atol=5e-2, rtol=TOL[dtype] * 4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_add_rms_norm(dtype):
    torch.manual_seed(2)
    x = torch.randn(9, 4096, device="cuda", dtype=dtype, requires_grad=True)
    r = torch.randn(9, 4096, device="cuda", dtype=dtype, requires_grad=True)
    w = (1 + 0.2 * torch.randn(4096, device="cuda", dtype=dtype)).requires_grad_()
    y, h = normtune.rms_norm(x, w, 1e-6, residual=r)
    torch.testing.assert_close(h, (x.float() + r.float()).to(dtype), atol=0, rtol=0)
    close(y, ref_rms(h.detach(), w.detach(), 1e-6), dtype, "y")
    dy, dh = torch.randn_like(y), torch.randn_like(h)
    torch.autograd.backward([y, h], [dy, dh])
    h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref_rms(h64, w64, 1e-6).backward(dy.double())
    want_dx = h64.grad + dh.double()
    torch.testing.assert_close(x.grad.double(), want_dx, atol=1e-2, rtol=TOL[dtype] * 2)
    torch.testing.assert_close(r.grad.double(), want_dx, atol=1e-2, rtol=TOL[dtype] * 2)


def test_opcheck_every_op():
    x = torch.randn(6, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    ops = torch.ops.normtune
    torch.library.opcheck(ops.rms_norm.default, (x, w, 1e-6, False))
    torch.library.opcheck(ops.layer_norm.default, (x, w, b, 1e-5, False))
    torch.library.opcheck(ops.fused_add_rms_norm.default, (x, x.detach().clone().requires_grad_(), w, 1e-6, False))
    y, rs = ops.rms_norm_fwd(x.detach(), w.detach(), 1e-6)
    torch.library.opcheck(ops.rms_norm_bwd.default, (torch.randn_like(y), x.detach(), rs, w.detach(), False))


def test_compile_fullgraph_and_cuda_graph():
    torch.manual_seed(3)
    norm = normtune.nn.RMSNorm(2048, eps=1e-6, device="cuda", dtype=torch.bfloat16)
    lin = torch.nn.Linear(2048, 2048, device="cuda", dtype=torch.bfloat16)
    model = lambda t: norm(lin(t))  # noqa: E731
    x = torch.randn(16, 2048, device="cuda", dtype=torch.bfloat16)
    want = model(x)
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), want)
    static_x = x.clone()
    graph = torch.cuda.CUDAGraph()
    model(static_x)  # warm-up outside the capture
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        static_y = model(static_x)
    graph.replay()
    torch.testing.assert_close(static_y, want)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_device_that_is_not_the_current_one():
    torch.cuda.set_device(0)
    x = torch.randn(4, 4096, device="cuda:1", dtype=torch.bfloat16)
    w = torch.ones(4096, device="cuda:1", dtype=torch.bfloat16)
    y = normtune.rms_norm(x, w, 1e-6)
    assert y.device == x.device
    close(y, ref_rms(x, w, 1e-6), torch.bfloat16, "y on cuda:1")


def test_bad_input_names_the_argument():
    x = torch.randn(4, 4096, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="weight must have shape"):
        normtune.rms_norm(x, torch.ones(4095, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="weight is on cpu"):
        normtune.rms_norm(x, torch.ones(4096, dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="normtune.rms_norm"):
        normtune.rms_norm(x, torch.ones(4096, device="cuda", dtype=torch.float16))  # the C API's dtype check
