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
    # The kernel ops (no autograd of their own: called with tensors that do not require grad).
    xd, wd, bd = x.detach(), w.detach(), b.detach()
    dy = torch.randn_like(xd)
    torch.library.opcheck(ops.rms_norm_fwd.default, (xd, wd, 1e-6, True))
    torch.library.opcheck(ops.fused_add_rms_norm_fwd.default, (xd, dy, wd, 1e-6, False))
    _, mu, rs_ln = ops.layer_norm_fwd(xd, wd, bd, 1e-5)
    torch.library.opcheck(ops.layer_norm_fwd.default, (xd, wd, bd, 1e-5, False))
    torch.library.opcheck(ops.rms_norm_bwd_add.default, (dy, xd, torch.randn_like(xd), rs, wd, False))
    torch.library.opcheck(ops.layer_norm_bwd.default, (dy, xd, mu, rs_ln, wd, False))


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
    """cuda:1 while cuda:0 is current, interleaved with cuda:0: each device's results are its
    own (the library's per-device caches), bitwise equal to the same call on the other H200."""
    torch.cuda.set_device(0)
    torch.manual_seed(4)
    results = {}
    for rows in (4, 4096, 4):  # 4096 rows: the backward's partial rows, sized from the device's SMs
        for dev in ("cuda:1", "cuda:0", "cuda:1"):
            x = torch.randn(rows, 4096, generator=torch.Generator().manual_seed(rows), dtype=torch.bfloat16)
            x = x.to(dev).requires_grad_()
            w = torch.linspace(0.5, 1.5, 4096, dtype=torch.bfloat16).to(dev).requires_grad_()
            y = normtune.rms_norm(x, w, 1e-6)
            assert y.device == x.device
            close(y, ref_rms(x.detach(), w.detach(), 1e-6), torch.bfloat16, f"y on {dev}")
            dx, dw = torch.autograd.grad(y, (x, w), torch.full_like(y, 0.25))
            assert dx.device == x.device and dw.device == x.device
            got = (y.cpu(), dx.cpu(), dw.cpu())
            if rows in results:
                for a, b in zip(got, results[rows]):
                    assert torch.equal(a, b), f"{rows} rows on {dev} differ from the first device's result"
            results[rows] = got
    assert torch.cuda.current_device() == 0


def test_non_contiguous_input_is_copied():
    torch.manual_seed(5)
    base = torch.randn(4096, 64, device="cuda", dtype=torch.bfloat16)
    x = base.t()  # [64, 4096], not contiguous
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    assert not x.is_contiguous()
    assert torch.equal(normtune.rms_norm(x, w, 1e-6), normtune.rms_norm(x.contiguous(), w, 1e-6))
    b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    assert torch.equal(normtune.layer_norm(x, w, b), normtune.layer_norm(x.contiguous(), w, b))


def test_zero_centered_gamma_and_fp32_weight():
    torch.manual_seed(6)
    x = torch.randn(33, 2048, device="cuda", dtype=torch.bfloat16)
    w = 0.1 * torch.randn(2048, device="cuda", dtype=torch.float32)
    y = normtune.rms_norm(x, w, 1e-6, zero_centered_gamma=True)
    close(y, ref_rms(x, w, 1e-6, zcg=True), torch.bfloat16, "y, zero-centered fp32 gamma")


def test_inference_mode_and_no_grad():
    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with torch.no_grad():
        y = normtune.rms_norm(x, w, 1e-6)
    assert y.grad_fn is None and not y.requires_grad
    with torch.inference_mode():
        y2 = normtune.rms_norm(x.detach(), w.detach(), 1e-6)
    assert torch.equal(y, y2)
    assert normtune.rms_norm(x, w, 1e-6).grad_fn is not None


def test_hidden_beyond_the_limit_is_a_clear_error():
    x = torch.empty(1, 1 << 24, device="cuda", dtype=torch.bfloat16).normal_()
    w = torch.ones(1 << 24, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"hidden size \(last dim\) in \[1, 16777215\]"):
        normtune.rms_norm(x, w, 1e-6)


def test_bad_input_names_the_argument():
    x = torch.randn(4, 4096, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="weight must have shape"):
        normtune.rms_norm(x, torch.ones(4095, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="weight is on cpu"):
        normtune.rms_norm(x, torch.ones(4096, dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="normtune.rms_norm"):
        normtune.rms_norm(x, torch.ones(4096, device="cuda", dtype=torch.float16))  # the C API's dtype check


# ---- quantized outputs ---------------------------------------------------------------------------
def fp8_code_tolerance(fp8):
    """One code of the format (relative), and the subnormal spacing (absolute, before the scale)."""
    return (1 / 8, 2.0 ** -9) if fp8 == torch.float8_e4m3fn else (1 / 4, 2.0 ** -16)


def norm_inputs(seed, rows, hidden):
    """x, residual, weight, bias (bf16) for the quantized-output tests."""
    torch.manual_seed(seed)
    x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
    w = 1 + 0.2 * torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
    return x, torch.randn_like(x), w, 0.3 * torch.randn(hidden, device="cuda", dtype=torch.bfloat16)


def run_variant(norm, rms_fn, ln_fn, x, r, w, b):
    """The `norm` variant ("rms", "rms_add": with residual r, "ln") of a functional pair, and its
    fp64 reference: (outputs without x + residual, reference of y)."""
    if norm == "rms":
        return rms_fn(x, w), ref_rms(x, w, 1e-6)
    if norm == "rms_add":
        *out, h = rms_fn(x, w, residual=r)
        assert torch.equal(h, (x.float() + r.float()).to(torch.bfloat16))
        return tuple(out), ref_rms(h, w, 1e-6)
    return ln_fn(x, w, b), ref_ln(x, w, b, 1e-5)


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("norm", ["rms", "rms_add", "ln"])
def test_fp8_per_tensor_outputs(fp8, norm):
    x, r, w, b = norm_inputs(7, 33, 4096)
    scale = torch.tensor([4.0], device="cuda")
    (y, scale_inv, amax), want = run_variant(
        norm, lambda x, w, residual=None: normtune.rms_norm_fp8(x, w, scale, residual=residual, fp8_dtype=fp8),
        lambda x, w, b: normtune.layer_norm_fp8(x, w, b, scale, fp8_dtype=fp8), x, r, w, b)
    assert y.dtype == fp8 and y.shape == x.shape
    assert scale_inv.item() == 0.25
    rel, sub = fp8_code_tolerance(fp8)
    excess = (y.double() * 0.25 - want).abs() - rel * want.abs() - sub / 4
    assert excess.max().item() <= 0, f"max excess {excess.max().item()}"
    assert abs(amax.item() - want.abs().max().item()) <= 2e-5 * want.abs().max().item()


@pytest.mark.parametrize("norm", ["rms", "rms_add", "ln"])
def test_mxfp8_outputs(norm):
    rows, hidden = 33, 4096
    x, r, w, b = norm_inputs(8, rows, hidden)
    (y, scales), want = run_variant(norm, normtune.rms_norm_mxfp8, normtune.layer_norm_mxfp8, x, r, w, b)
    assert scales.shape == (128, 128) and scales.dtype == torch.float8_e8m0fnu
    block_scale = torch.exp2(scales.view(torch.uint8)[:rows].double() - 127)  # [rows, hidden / 32]
    s = block_scale.repeat_interleave(32, dim=1)
    rel, sub = fp8_code_tolerance(torch.float8_e4m3fn)
    excess = (y.double() * s - want).abs() - rel * want.abs() - sub * s
    assert excess.max().item() <= 0, f"max excess {excess.max().item()}"
    # Each block's scale is the smallest power of two that keeps it within e4m3 (448): its
    # largest value lands in (224, 448] (fp64 here against the kernel's fp32: a little slack).
    ratio = want.abs().view(rows, hidden // 32, 32).amax(-1) / block_scale
    assert (ratio <= 448 * (1 + 1e-5)).all() and (ratio > 224 * (1 - 1e-5)).all()


@pytest.mark.parametrize("norm", ["rms", "rms_add", "ln"])
def test_mxfp8_columnwise_outputs(norm):
    rows, hidden = 70, 2048  # 3 blocks of rows, the last one partial (6 rows)
    x, r, w, b = norm_inputs(9, rows, hidden)
    (y, scales, yc, cscales), want = run_variant(
        norm, lambda x, w, residual=None: normtune.rms_norm_mxfp8(x, w, residual=residual, columnwise=True),
        lambda x, w, b: normtune.layer_norm_mxfp8(x, w, b, columnwise=True), x, r, w, b)
    assert scales.shape == (128, 64) and cscales.shape == (4, 2048) and yc.shape == x.shape
    rel, sub = fp8_code_tolerance(torch.float8_e4m3fn)
    # Row-wise as without the column-wise copy.
    s = torch.exp2(scales.view(torch.uint8)[:rows].double() - 127).repeat_interleave(32, dim=1)
    excess = (y.double() * s - want).abs() - rel * want.abs() - sub * s
    assert excess.max().item() <= 0, f"row-wise: max excess {excess.max().item()}"
    # Column-wise: one scale per 32 rows of a column, the smallest power of two that fits.
    col_scale = torch.exp2(cscales.view(torch.uint8)[:3].double() - 127)  # [3, hidden]
    sc = col_scale.repeat_interleave(32, dim=0)[:rows]
    excess = (yc.double() * sc - want).abs() - rel * want.abs() - sub * sc
    assert excess.max().item() <= 0, f"column-wise: max excess {excess.max().item()}"
    block_max = torch.stack([want[i * 32:(i + 1) * 32].abs().amax(0) for i in range(3)])  # [3, hidden]
    ratio = block_max / col_scale
    assert (ratio <= 448 * (1 + 1e-5)).all() and (ratio > 224 * (1 - 1e-5)).all()
    # The padding (row blocks 3 of 4) stays as allocated (zero).
    assert (cscales.view(torch.uint8)[3:] == 0).all()
    # A later row-wise-only call (the same pooled tensor handle) writes nothing of this call's.
    kept, kept_scales = yc.view(torch.uint8).clone(), cscales.view(torch.uint8).clone()
    normtune.rms_norm_mxfp8(2 * x, w)
    normtune.layer_norm_mxfp8(2 * x, w, b)
    torch.cuda.synchronize()
    assert torch.equal(yc.view(torch.uint8), kept) and torch.equal(cscales.view(torch.uint8), kept_scales)


E2M1_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e2m1_decode(y, rows, hidden):
    """[rows, H] fp64 values of e2m1 codes packed two per byte (element 2i in the low nibble)."""
    b = y.view(torch.uint8).reshape(rows, hidden // 2).long()
    codes = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(rows, hidden)
    mag = torch.tensor(E2M1_VALUES, dtype=torch.float64, device=y.device)[codes & 7]
    return torch.where(codes >= 8, -mag, mag)


@pytest.mark.parametrize("norm", ["rms", "rms_add", "ln"])
@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "fp8_block128"])
def test_block_scaled_outputs(norm, fmt):
    rows, hidden = 33, 4096
    x, r, w, b = norm_inputs(10, rows, hidden)
    amax = torch.tensor([8.0], device="cuda")  # the global amax NVFP4 is given
    kw = {"global_amax": amax} if fmt == "nvfp4" else {}
    (y, scales), want = run_variant(
        norm, lambda x, w, residual=None: normtune.rms_norm_block_scaled(x, w, fmt, residual=residual, **kw),
        lambda x, w, b: normtune.layer_norm_block_scaled(x, w, b, fmt, **kw), x, r, w, b)
    block = {"nvfp4": 16, "mxfp4": 32, "fp8_block128": 128}[fmt]
    if fmt == "fp8_block128":
        assert scales.shape == (hidden // 128, 36) and scales.dtype == torch.float32
        unit = scales[:, :rows].t().double()  # scale_inv per (row, block)
        got = y.double() * unit.repeat_interleave(block, dim=1)
        rel, sub = fp8_code_tolerance(torch.float8_e4m3fn)
        tol = rel * want.abs() + sub * unit.repeat_interleave(block, dim=1)
    else:
        assert y.dtype == torch.float4_e2m1fn_x2 and y.shape == (rows, hidden // 2)
        assert scales.shape == (128, hidden // block)
        if fmt == "nvfp4":
            assert scales.dtype == torch.float8_e4m3fn
            unit = scales[:rows].double() / (448.0 * 6.0 / 8.0)  # float(scale) / S_enc
        else:
            assert scales.dtype == torch.float8_e8m0fnu
            unit = torch.exp2(scales.view(torch.uint8)[:rows].double() - 127)
        u = unit.repeat_interleave(block, dim=1)
        got = e2m1_decode(y, rows, hidden) * u
        tol = want.abs() / 3 + 0.5 * u  # a code within a third of the value, half a unit near zero
    excess = (got - want).abs() - tol - 1e-5
    assert excess.max().item() <= 0, f"max excess {excess.max().item()}"
    # Every block's largest value uses the top of the format: MXFP4's power of two fits it in
    # (3, 6]; NVFP4's E4M3 scale is amax / 6 within E4M3's rounding; 1x128's scale_inv is amax / 448.
    block_max = want.abs().view(rows, hidden // block, block).amax(-1)
    ratio = block_max / unit
    if fmt == "mxfp4":
        assert (ratio <= 6 * (1 + 1e-5)).all() and (ratio > 3 * (1 - 1e-5)).all()
    elif fmt == "nvfp4":
        assert (ratio > 6 / (1 + 1 / 16) - 1e-3).all() and (ratio < 6 / (1 - 1 / 16) + 1e-3).all()
    else:
        torch.testing.assert_close(ratio, torch.full_like(ratio, 448.0), rtol=1e-5, atol=0)


@pytest.mark.parametrize("norm", ["rms", "rms_add", "ln"])
@pytest.mark.parametrize("own_col_amax", [False, True])
def test_nvfp4_columnwise_outputs(norm, own_col_amax):
    rows, hidden = 48, 2064  # three 16-row blocks (the second tile half-full); 129 blocks of 16 a row
    x, r, w, b = norm_inputs(12, rows, hidden)
    amax = torch.tensor([8.0], device="cuda")
    kw = {"global_amax": amax, "columnwise": True}
    if own_col_amax:
        kw["colwise_global_amax"] = torch.tensor([16.0], device="cuda")
    (y, scales, yc, cscales), want = run_variant(
        norm, lambda x, w, residual=None: normtune.rms_norm_block_scaled(x, w, "nvfp4", residual=residual, **kw),
        lambda x, w, b: normtune.layer_norm_block_scaled(x, w, b, "nvfp4", **kw), x, r, w, b)
    assert y.shape == (rows, hidden // 2) and scales.shape == (128, 132)
    assert yc.dtype == torch.float4_e2m1fn_x2 and yc.shape == (hidden, rows // 2)
    assert cscales.dtype == torch.float8_e4m3fn and cscales.shape == (2176, 4)
    # Row-wise as without the column-wise copy.
    unit = scales[:rows, :hidden // 16].double() / (448.0 * 6.0 / 8.0)
    u = unit.repeat_interleave(16, dim=1)
    excess = (e2m1_decode(y, rows, hidden) * u - want).abs() - want.abs() / 3 - 0.5 * u - 1e-5
    assert excess.max().item() <= 0, f"row-wise: max excess {excess.max().item()}"
    # Column-wise: the transpose, one E4M3 scale per 16 rows of a column, from its own amax.
    s_enc = 448.0 * 6.0 / (16.0 if own_col_amax else 8.0)
    cunit = cscales[:hidden, :3].double() / s_enc  # [hidden, 3]
    cu = cunit.repeat_interleave(16, dim=1)  # [hidden, rows]
    want_t = want.t()
    excess = (e2m1_decode(yc, hidden, rows) * cu - want_t).abs() - want_t.abs() / 3 - 0.5 * cu - 1e-5
    assert excess.max().item() <= 0, f"column-wise: max excess {excess.max().item()}"
    block_max = want_t.abs().reshape(hidden, 3, 16).amax(-1)
    ratio = block_max / cunit
    assert (ratio > 6 / (1 + 1 / 16) - 1e-3).all() and (ratio < 6 / (1 - 1 / 16) + 1e-3).all()
    # The padding (rows 2064.. of the scales, block column 3) stays as allocated (zero).
    assert (cscales.view(torch.uint8)[hidden:] == 0).all() and (cscales.view(torch.uint8)[:, 3] == 0).all()


@pytest.mark.parametrize("norm", ["rms", "rms_add", "ln"])
def test_fp8_block128_partial_last_block(norm):
    rows, hidden = 33, 1040  # eight blocks of 128, then one of 16 (TransformerEngine allows it)
    x, r, w, b = norm_inputs(11, rows, hidden)
    (y, scales), want = run_variant(
        norm, lambda x, w, residual=None: normtune.rms_norm_block_scaled(x, w, "fp8_block128", residual=residual),
        lambda x, w, b: normtune.layer_norm_block_scaled(x, w, b, "fp8_block128"), x, r, w, b)
    assert y.shape == (rows, hidden) and scales.shape == (9, 36)  # ceil(1040 / 128), roundup(33, 4)
    unit = scales[:, :rows].t().double()
    u = unit.repeat_interleave(128, dim=1)[:, :hidden]
    rel, sub = fp8_code_tolerance(torch.float8_e4m3fn)
    excess = (y.double() * u - want).abs() - rel * want.abs() - sub * u - 1e-5
    assert excess.max().item() <= 0, f"max excess {excess.max().item()}"
    # Every block's scale_inv is its amax / 448, the last one's from its 16 values alone.
    block_max = torch.nn.functional.pad(want.abs(), (0, 9 * 128 - hidden)).view(rows, 9, 128).amax(-1)
    torch.testing.assert_close(block_max / unit, torch.full_like(block_max, 448.0), rtol=1e-5, atol=0)


def test_quantized_ops_opcheck_and_compile():
    x = torch.randn(6, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    scale = torch.tensor([2.0], device="cuda")
    ops = torch.ops.normtune
    torch.library.opcheck(ops.rms_norm_fp8.default, (x, w, 1e-6, scale, torch.float8_e4m3fn, False))
    torch.library.opcheck(ops.rms_norm_mxfp8.default, (x, w, 1e-6, torch.float8_e4m3fn, False))
    torch.library.opcheck(ops.rms_norm_mxfp8_colwise.default, (x, w, 1e-6, torch.float8_e4m3fn, False))
    torch.library.opcheck(ops.layer_norm_mxfp8_colwise.default, (x, w, w, 1e-5, torch.float8_e4m3fn, False))
    torch.library.opcheck(ops.rms_norm_block.default,
                          (x, w, 1e-6, "nvfp4", None, torch.tensor([4.0], device="cuda"), True, False))
    torch.library.opcheck(ops.fused_add_rms_norm_block.default, (x, x, w, 1e-6, "mxfp4", None, None, False, False))
    torch.library.opcheck(ops.layer_norm_block.default,
                          (x, w, w, 1e-5, "fp8_block128", torch.float8_e4m3fn, None, False, False))
    x16 = torch.randn(16, 1024, device="cuda", dtype=torch.bfloat16)
    torch.library.opcheck(ops.rms_norm_nvfp4_colwise.default,
                          (x16, w, 1e-6, torch.tensor([4.0], device="cuda"), None, True, False))
    torch.library.opcheck(ops.fused_add_rms_norm_nvfp4_colwise.default,
                          (x16, x16, w, 1e-6, None, torch.tensor([2.0], device="cuda"), False, False))

    def f(t):
        y, scale_inv, amax = normtune.rms_norm_fp8(t * 2, w, scale)
        return y.float() * scale_inv, amax
    got, want = torch.compile(f, fullgraph=True)(x), f(x)
    torch.testing.assert_close(got[0], want[0], atol=0, rtol=0)
    torch.testing.assert_close(got[1], want[1], atol=0, rtol=0)


def test_compile_every_module_forward_and_backward():
    """A block with every module under torch.compile(fullgraph=True), no graph break: outputs
    and gradients close to eager's (Inductor fuses the elementwise parts around the norms its
    own way, so not bitwise)."""
    torch.manual_seed(9)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            kw = dict(device="cuda", dtype=torch.bfloat16)
            self.ln = normtune.nn.LayerNorm(1024, **kw)
            self.add_norm = normtune.nn.FusedAddRMSNorm(1024, eps=1e-6, **kw)
            self.norm = normtune.nn.RMSNorm(1024, eps=1e-6, **kw)
            self.lin = torch.nn.Linear(1024, 1024, **kw)

        def forward(self, x, h):
            y, h = self.add_norm(self.lin(self.ln(x)), h)
            return self.norm(y * 2), h

    block = Block()
    x = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    h = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    results = []
    for fn in (block, torch.compile(block, fullgraph=True)):
        x.grad = h.grad = None
        block.zero_grad(set_to_none=True)
        out, res = fn(x, h)
        (out.float().square().sum() + res.float().sum()).backward()
        results.append([out, res, x.grad, h.grad] + [p.grad for p in block.parameters()])
    for eager, compiled in zip(*results):
        torch.testing.assert_close(compiled, eager, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("norm", ["rms", "rms_add", "ln"])
def test_norm_and_amax(norm):
    """y in x's dtype and amax = max |y| of y as written (exactly)."""
    x, r, w, b = norm_inputs(10, 37, 2048)
    (y, amax), want = run_variant(norm, normtune.rms_norm_amax, normtune.layer_norm_amax, x, r, w, b)
    close(y, want, torch.bfloat16, "y")
    assert amax.item() == y.float().abs().max().item()
