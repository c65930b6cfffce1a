"""What needs no GPU: the package imports, the ops are registered with their schemas, shapes
and dtypes are inferred under FakeTensorMode and on the meta device, bad calls raise clear
errors, and the modules match torch.nn's parameters and state_dict keys."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import normtune

OPS = ["rms_norm", "layer_norm", "fused_add_rms_norm", "rms_norm_fwd", "layer_norm_fwd", "fused_add_rms_norm_fwd",
       "rms_norm_bwd", "rms_norm_bwd_add", "layer_norm_bwd"]


def test_ops_are_registered_with_their_schemas():
    for name in OPS:
        assert hasattr(torch.ops.normtune, name), name
    schema = str(torch.ops.normtune.rms_norm.default._schema)
    assert schema == "normtune::rms_norm(Tensor x, Tensor weight, float eps, bool zero_centered_gamma=False) -> Tensor"
    schema = str(torch.ops.normtune.layer_norm_bwd.default._schema)
    assert schema.startswith("normtune::layer_norm_bwd(Tensor dy, Tensor x, Tensor mu, Tensor rsigma, Tensor weight")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fake_tensor_shapes(dtype):
    with FakeTensorMode():
        x = torch.empty(2, 3, 4096, dtype=dtype, device="cuda")
        w = torch.empty(4096, dtype=dtype, device="cuda")
        b = torch.empty(4096, dtype=dtype, device="cuda")
        y = torch.ops.normtune.rms_norm(x, w, 1e-6)
        assert y.shape == x.shape and y.dtype == dtype and y.device.type == "cuda"
        y, rsigma = torch.ops.normtune.rms_norm_fwd(x, w, 1e-6)
        assert rsigma.shape == (6,) and rsigma.dtype == torch.float32
        y, mu, rsigma = torch.ops.normtune.layer_norm_fwd(x, w, b, 1e-5)
        assert y.shape == x.shape and mu.shape == (6,) and rsigma.shape == (6,)
        y, h = torch.ops.normtune.fused_add_rms_norm(x, x, w, 1e-6)
        assert y.shape == x.shape and h.shape == x.shape and h.dtype == dtype
        dx, dw = torch.ops.normtune.rms_norm_bwd(x, x, rsigma, w)
        assert dx.shape == x.shape and dw.shape == w.shape
        dx, dw, db = torch.ops.normtune.layer_norm_bwd(x, x, mu, rsigma, w)
        assert dx.shape == x.shape and dw.shape == (4096,) and db.shape == (4096,)


def test_meta_device_and_fp32_weight():
    x = torch.empty(5, 1024, dtype=torch.bfloat16, device="meta")
    w = torch.empty(1024, dtype=torch.float32, device="meta")
    assert normtune.rms_norm(x, w).shape == (5, 1024)
    y, h = normtune.rms_norm(x, w, residual=x)
    assert y.dtype == torch.bfloat16 and h.shape == (5, 1024)


def test_fake_shape_errors_name_the_argument():
    with FakeTensorMode():
        x = torch.empty(4, 4096, dtype=torch.bfloat16, device="cuda")
        with pytest.raises(RuntimeError, match=r"weight must have shape \[4096\]"):
            torch.ops.normtune.rms_norm(x, torch.empty(4095, dtype=torch.bfloat16, device="cuda"), 1e-6)
        with pytest.raises(RuntimeError, match="bias must have weight's shape"):
            torch.ops.normtune.layer_norm(x, torch.empty(4096, device="cuda"), torch.empty(8, device="cuda"), 1e-5)
        with pytest.raises(RuntimeError, match="residual must have x's shape"):
            torch.ops.normtune.fused_add_rms_norm(x, x[:2], torch.empty(4096, device="cuda"), 1e-6)


def test_cpu_tensors_are_a_clear_error():
    x = torch.randn(4, 64)
    w = torch.ones(64)
    for call in (lambda: normtune.rms_norm(x, w), lambda: normtune.layer_norm(x, w, torch.zeros(64)),
                 lambda: normtune.rms_norm(x, w, residual=x)):
        with pytest.raises(RuntimeError, match="x must be a CUDA tensor, got one on cpu"):
            call()


def test_modules_match_torch_nn():
    ours, theirs = normtune.nn.RMSNorm(256, eps=1e-6), torch.nn.RMSNorm(256, eps=1e-6)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    ours.load_state_dict(theirs.state_dict())
    ours, theirs = normtune.nn.LayerNorm(256), torch.nn.LayerNorm(256)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    ours, theirs = normtune.nn.LayerNorm(256, bias=False), torch.nn.LayerNorm(256, bias=False)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    assert normtune.nn.RMSNorm(256, elementwise_affine=False).state_dict().keys() == \
        torch.nn.RMSNorm(256, elementwise_affine=False).state_dict().keys()
    with pytest.raises(ValueError, match="last dimension only"):
        normtune.nn.RMSNorm((4, 256))
    x = torch.empty(3, 256, device="meta")
    assert normtune.nn.RMSNorm(256, device="meta")(x).shape == (3, 256)
    y, h = normtune.nn.FusedAddRMSNorm(256, device="meta")(x, x)
    assert y.shape == h.shape == (3, 256)


def test_meta_kernels_take_symbolic_shapes():
    """torch.compile(dynamic=True) and opcheck's dynamic-shape tests trace the Meta kernels with
    symbolic sizes: no concrete size may be asked for."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, r, w, b):
        y, rs = torch.ops.normtune.rms_norm_fwd(x, w, 1e-6)
        z, mu, rs2 = torch.ops.normtune.layer_norm_fwd(x, w, b, 1e-5)
        s, h, rs3 = torch.ops.normtune.fused_add_rms_norm_fwd(x, r, w, 1e-6)
        dx, dw = torch.ops.normtune.rms_norm_bwd(y, x, rs, w)
        return y, rs, z, mu, s, h, dx, dw

    x = torch.empty(3, 5, 256, device="meta", dtype=torch.bfloat16)
    w = torch.empty(256, device="meta", dtype=torch.bfloat16)
    graph = make_fx(f, tracing_mode="symbolic")(x, x, w, w)
    assert "normtune.rms_norm_fwd" in str(graph.graph)
    with pytest.raises(RuntimeError, match="weight must have shape"):
        make_fx(f, tracing_mode="symbolic")(x, x, torch.empty(255, device="meta", dtype=torch.bfloat16), w)


QUANT_OPS = ["rms_norm_fp8", "layer_norm_fp8", "fused_add_rms_norm_fp8", "rms_norm_mxfp8", "layer_norm_mxfp8",
             "fused_add_rms_norm_mxfp8", "rms_norm_mxfp8_colwise", "layer_norm_mxfp8_colwise",
             "fused_add_rms_norm_mxfp8_colwise", "rms_norm_block", "layer_norm_block", "fused_add_rms_norm_block",
             "rms_norm_nvfp4_colwise", "layer_norm_nvfp4_colwise", "fused_add_rms_norm_nvfp4_colwise",
             "rms_norm_amax", "layer_norm_amax", "fused_add_rms_norm_amax"]


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_quantized_ops_shapes_and_dtypes(fp8):
    for name in QUANT_OPS:
        assert hasattr(torch.ops.normtune, name), name
    with FakeTensorMode():
        x = torch.empty(3, 100, 4096, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(4096, dtype=torch.bfloat16, device="cuda")
        scale = torch.empty(1, dtype=torch.float32, device="cuda")
        y, scale_inv, amax = normtune.rms_norm_fp8(x, w, scale, fp8_dtype=fp8)
        assert y.shape == x.shape and y.dtype == fp8
        assert scale_inv.shape == amax.shape == (1,) and amax.dtype == torch.float32
        y, scale_inv, amax, h = normtune.rms_norm_fp8(x, w, scale, residual=x, fp8_dtype=fp8)
        assert h.shape == x.shape and h.dtype == torch.bfloat16
        y, scale_inv, amax = normtune.layer_norm_fp8(x, w, w, scale, fp8_dtype=fp8)
        assert y.dtype == fp8
        y, scales = normtune.rms_norm_mxfp8(x, w, fp8_dtype=fp8)
        # 300 rows -> 384 (roundup to 128); 4096 / 32 = 128 blocks (a multiple of 4)
        assert y.dtype == fp8 and scales.shape == (384, 128) and scales.dtype == torch.float8_e8m0fnu
        y, scales, h = normtune.rms_norm_mxfp8(x, w, residual=x, fp8_dtype=fp8)
        assert h.shape == x.shape
        y, scales = normtune.layer_norm_mxfp8(x[:, :1, :1056], w[:1056], w[:1056], fp8_dtype=fp8)
        assert scales.shape == (128, 36)  # 3 rows -> 128; 1056 / 32 = 33 blocks -> 36
        # With the column-wise copy: 300 rows -> ceil(300 / 32) = 10 row blocks -> 12; 4096 columns.
        y, scales, yc, cscales = normtune.rms_norm_mxfp8(x, w, fp8_dtype=fp8, columnwise=True)
        assert yc.shape == x.shape and yc.dtype == fp8 and scales.shape == (384, 128)
        assert cscales.shape == (12, 4096) and cscales.dtype == torch.float8_e8m0fnu
        y, scales, yc, cscales, h = normtune.rms_norm_mxfp8(x, w, residual=x, fp8_dtype=fp8, columnwise=True)
        assert h.shape == x.shape and h.dtype == torch.bfloat16 and yc.shape == x.shape
        y, scales, yc, cscales = normtune.layer_norm_mxfp8(x[:, :1, :1056], w[:1056], w[:1056], fp8_dtype=fp8,
                                                           columnwise=True)
        assert cscales.shape == (4, 1152)  # 3 rows -> 1 row block -> 4; 1056 columns -> 1152


def test_block_scaled_ops_shapes_and_dtypes():
    with FakeTensorMode():
        x = torch.empty(3, 100, 4096, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(4096, dtype=torch.bfloat16, device="cuda")
        amax = torch.empty(1, dtype=torch.float32, device="cuda")
        # NVFP4: e2m1 two per byte; 300 rows -> 384; 4096 / 16 = 256 scales a row.
        y, scales = normtune.rms_norm_block_scaled(x, w, "nvfp4", global_amax=amax)
        assert y.shape == (3, 100, 2048) and y.dtype == torch.float4_e2m1fn_x2
        assert scales.shape == (384, 256) and scales.dtype == torch.float8_e4m3fn
        y, scales, h = normtune.rms_norm_block_scaled(x, w, "nvfp4", residual=x, swizzled=True)
        assert h.shape == x.shape and h.dtype == torch.bfloat16 and y.shape == (3, 100, 2048)
        # MXFP4: E8M0 per 32, MXFP8's shape; 1056 / 32 = 33 blocks -> 36.
        y, scales = normtune.layer_norm_block_scaled(x[:, :1, :1056], w[:1056], w[:1056], "mxfp4")
        assert y.shape == (3, 1, 528) and scales.shape == (128, 36) and scales.dtype == torch.float8_e8m0fnu
        # FP8 1x128: fp32 scale_inv [ceil(H / 128), roundup(rows, 4)] (TransformerEngine's transposed layout).
        for fp8 in (torch.float8_e4m3fn, torch.float8_e5m2):
            y, scales = normtune.rms_norm_block_scaled(x, w, "fp8_block128", fp8_dtype=fp8)
            assert y.shape == x.shape and y.dtype == fp8
            assert scales.shape == (32, 300) and scales.dtype == torch.float32
        y, scales = normtune.layer_norm_block_scaled(x[:1, :7], w, w, "fp8_block128")
        assert scales.shape == (32, 8)  # 7 rows -> 8
        # A partial last block: H = 1056 = 8 x 128 + 32 -> ceil(1056 / 128) = 9 rows of scales.
        y, scales = normtune.rms_norm_block_scaled(x[:, :, :1056], w[:1056], "fp8_block128")
        assert y.shape == (3, 100, 1056) and scales.shape == (9, 300)


def test_nvfp4_columnwise_shapes_and_dtypes():
    with FakeTensorMode():
        x = torch.empty(3, 112, 4096, dtype=torch.bfloat16, device="cuda")  # 336 rows: 21 blocks of 16
        w = torch.empty(4096, dtype=torch.bfloat16, device="cuda")
        amax = torch.empty(1, dtype=torch.float32, device="cuda")
        y, scales, yc, cscales = normtune.rms_norm_block_scaled(x, w, "nvfp4", global_amax=amax, columnwise=True)
        assert y.shape == (3, 112, 2048) and y.dtype == torch.float4_e2m1fn_x2
        assert scales.shape == (384, 256) and scales.dtype == torch.float8_e4m3fn
        # The transpose: [H, rows / 2] bytes; scales [roundup(H, 128), roundup(rows / 16, 4)] = [4096, 24].
        assert yc.shape == (4096, 168) and yc.dtype == torch.float4_e2m1fn_x2
        assert cscales.shape == (4096, 24) and cscales.dtype == torch.float8_e4m3fn
        y, scales, yc, cscales, h = normtune.rms_norm_block_scaled(x, w, "nvfp4", residual=x, columnwise=True,
                                                                   colwise_global_amax=amax, swizzled=True)
        assert h.shape == x.shape and h.dtype == torch.bfloat16 and yc.shape == (4096, 168)
        # LayerNorm, H = 1040 (65 blocks of 16; not a multiple of 32), 16 rows: scales [1152, 4].
        y, scales, yc, cscales = normtune.layer_norm_block_scaled(x[0, :16, :1040], w[:1040], w[:1040], "nvfp4",
                                                                  columnwise=True)
        assert y.shape == (16, 520) and scales.shape == (128, 68)
        assert yc.shape == (1040, 8) and cscales.shape == (1152, 4)


def test_nvfp4_columnwise_bad_arguments():
    with FakeTensorMode():
        x = torch.empty(32, 4096, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(4096, dtype=torch.bfloat16, device="cuda")
        amax = torch.empty(1, dtype=torch.float32, device="cuda")
        with pytest.raises(RuntimeError, match=r"the rows of x \(24\) must be a multiple of 16 for the column-wise"):
            normtune.rms_norm_block_scaled(x[:24], w, "nvfp4", columnwise=True)
        with pytest.raises(ValueError, match="columnwise=True belongs to the nvfp4 format here, got 'mxfp4'"):
            normtune.rms_norm_block_scaled(x, w, "mxfp4", columnwise=True)
        with pytest.raises(ValueError, match="colwise_global_amax needs columnwise=True"):
            normtune.layer_norm_block_scaled(x, w, w, "nvfp4", colwise_global_amax=amax)
        with pytest.raises(RuntimeError, match="colwise_global_amax must be one fp32 value"):
            normtune.rms_norm_block_scaled(x, w, "nvfp4", columnwise=True,
                                           colwise_global_amax=torch.empty(2, device="cuda"))
        with pytest.raises(RuntimeError, match="the last dim of x \\(40\\) must be a multiple of 16"):
            normtune.rms_norm_block_scaled(x[:, :40], w[:40], "nvfp4", columnwise=True)
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor"):
        torch.ops.normtune.rms_norm_nvfp4_colwise(torch.randn(16, 64), torch.ones(64), 1e-6)


def test_block_scaled_ops_bad_arguments():
    with FakeTensorMode():
        x = torch.empty(4, 4096, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(4096, dtype=torch.bfloat16, device="cuda")
        with pytest.raises(RuntimeError, match="format must be 'nvfp4', 'mxfp4' or 'fp8_block128', got 'nvfp8'"):
            normtune.rms_norm_block_scaled(x, w, "nvfp8")
        with pytest.raises(RuntimeError, match=r"the last dim of x \(1000\) must be a multiple of 16 \(fp8_block128"):
            normtune.rms_norm_block_scaled(x[:, :1000], w[:1000], "fp8_block128")
        with pytest.raises(RuntimeError, match="must be a multiple of 16"):
            normtune.rms_norm_block_scaled(x[:, :40], w[:40], "nvfp4")
        with pytest.raises(RuntimeError, match="global_amax must be one fp32 value"):
            normtune.rms_norm_block_scaled(x, w, "nvfp4", global_amax=torch.empty(2, device="cuda"))
        with pytest.raises(RuntimeError, match="global_amax belongs to the nvfp4 format"):
            normtune.rms_norm_block_scaled(x, w, "mxfp4", global_amax=torch.empty(1, device="cuda"))
        with pytest.raises(RuntimeError, match="fp8_block128 scales have one layout"):
            normtune.rms_norm_block_scaled(x, w, "fp8_block128", swizzled=True)
        with pytest.raises(RuntimeError, match="out_dtype must be torch.float8_e4m3fn or torch.float8_e5m2"):
            normtune.rms_norm_block_scaled(x, w, "fp8_block128", fp8_dtype=torch.bfloat16)
        with pytest.raises(RuntimeError, match="residual must have x's shape and dtype"):
            normtune.rms_norm_block_scaled(x, w, "nvfp4", residual=x[:2])
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor"):
        normtune.rms_norm_block_scaled(torch.randn(4, 64), torch.ones(64), "mxfp4")


def test_quantized_ops_bad_arguments():
    with FakeTensorMode():
        x = torch.empty(4, 4096, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(4096, dtype=torch.bfloat16, device="cuda")
        with pytest.raises(RuntimeError, match="out_dtype must be torch.float8_e4m3fn or torch.float8_e5m2"):
            torch.ops.normtune.rms_norm_fp8(x, w, 1e-6, torch.empty(1, device="cuda"), torch.bfloat16)
        with pytest.raises(RuntimeError, match="scale must be one fp32 value"):
            normtune.rms_norm_fp8(x, w, torch.empty(2, device="cuda"))
        with pytest.raises(RuntimeError, match="scale must be one fp32 value"):
            normtune.rms_norm_fp8(x, w, torch.empty(1, device="cuda", dtype=torch.bfloat16))
        with pytest.raises(RuntimeError, match="residual must have x's shape and dtype"):
            normtune.rms_norm_mxfp8(x, w, residual=x[:2])
        with pytest.raises(RuntimeError, match="residual must have x's shape and dtype"):
            normtune.rms_norm_mxfp8(x, w, residual=x[:2], columnwise=True)
        with pytest.raises(RuntimeError, match="out_dtype must be torch.float8_e4m3fn or torch.float8_e5m2"):
            normtune.layer_norm_mxfp8(x, w, w, fp8_dtype=torch.float16, columnwise=True)
        with pytest.raises(RuntimeError, match=r"the last dim of x \(1000\) must be a multiple of 32"):
            normtune.rms_norm_mxfp8(x[:, :1000], w[:1000])
        with pytest.raises(RuntimeError, match=r"the last dim of x \(1000\) must be a multiple of 32"):
            normtune.rms_norm_mxfp8(x[:, :1000], w[:1000], columnwise=True)
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor"):
        normtune.rms_norm_fp8(torch.randn(4, 64), torch.ones(64), torch.ones(1))


def test_quantized_ops_refuse_inputs_that_require_grad():
    x = torch.empty(4, 256, device="meta", requires_grad=True)
    w = torch.empty(256, device="meta")
    with pytest.raises(RuntimeError, match="x requires grad, but the quantized and amax ops are forward only"):
        normtune.rms_norm_mxfp8(x, w)
    with torch.no_grad():
        y, scales = normtune.rms_norm_mxfp8(x, w)
    assert y.dtype == torch.float8_e4m3fn and scales.shape == (128, 8)
    y, scale_inv, amax = normtune.rms_norm_fp8(x.detach(), w, torch.empty(1, device="meta"))
    assert not y.requires_grad
    with pytest.raises(RuntimeError, match="x requires grad, but the quantized and amax ops are forward only"):
        normtune.rms_norm_mxfp8(x, w, columnwise=True)


def test_amax_ops_shapes_and_dtypes():
    with FakeTensorMode():
        x = torch.empty(2, 7, 1024, dtype=torch.float16, device="cuda")
        w = torch.empty(1024, dtype=torch.float32, device="cuda")
        y, amax = normtune.rms_norm_amax(x, w)
        assert y.shape == x.shape and y.dtype == torch.float16 and amax.shape == (1,) and amax.dtype == torch.float32
        y, amax, h = normtune.rms_norm_amax(x, w, residual=x)
        assert h.shape == x.shape and h.dtype == torch.float16
        y, amax = normtune.layer_norm_amax(x, w, w)
        assert y.dtype == torch.float16


def test_backward_ops_check_their_own_arguments():
    """dy, add, rsigma and mu are checked against x (the library sees only x's [rows, H])."""
    with FakeTensorMode():
        x = torch.empty(2, 3, 512, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(512, dtype=torch.bfloat16, device="cuda")
        rs = torch.empty(6, dtype=torch.float32, device="cuda")
        ops = torch.ops.normtune
        dx, dw = ops.rms_norm_bwd(x, x, rs, w)
        assert dx.shape == x.shape and dw.shape == w.shape
        with pytest.raises(RuntimeError, match=r"dy must have x's shape and dtype \(\[2, 3, 512\]"):
            ops.rms_norm_bwd(x[:1], x, rs, w)
        with pytest.raises(RuntimeError, match="dy must have x's shape and dtype"):
            ops.rms_norm_bwd(x.float(), x, rs, w)
        with pytest.raises(RuntimeError, match=r"rsigma must be fp32 of shape \[rows\]"):
            ops.rms_norm_bwd(x, x, rs[:5], w)
        with pytest.raises(RuntimeError, match=r"add must have x's shape"):
            ops.rms_norm_bwd_add(x, x, x[:, :2], rs, w)
        with pytest.raises(RuntimeError, match=r"mu must be fp32 of shape \[rows\]"):
            ops.layer_norm_bwd(x, x, rs.double(), rs, w)
        with pytest.raises(RuntimeError, match="residual must have x's shape and dtype"):
            ops.fused_add_rms_norm_fwd(x, x.half(), w, 1e-6)


def test_autograd_backward_on_meta_tensors():
    """The autograd kernels' backward calls the kernel ops with the saved tensors: shapes and
    dtypes of every gradient, checked on the meta device."""
    x = torch.empty(3, 5, 256, device="meta", dtype=torch.bfloat16, requires_grad=True)
    r = torch.empty(3, 5, 256, device="meta", dtype=torch.bfloat16, requires_grad=True)
    w = torch.empty(256, device="meta", dtype=torch.float32, requires_grad=True)
    b = torch.empty(256, device="meta", dtype=torch.float32, requires_grad=True)
    dx, dw = torch.autograd.grad(normtune.rms_norm(x, w), (x, w), torch.empty_like(x))
    assert dx.shape == x.shape and dx.dtype == x.dtype and dw.shape == w.shape and dw.dtype == w.dtype
    dx, dw, db = torch.autograd.grad(normtune.layer_norm(x, w, b), (x, w, b), torch.empty_like(x))
    assert dx.shape == x.shape and dw.shape == db.shape == w.shape
    y, h = normtune.rms_norm(x, w, residual=r)
    dx, dr, dw = torch.autograd.grad((y, h), (x, r, w), (torch.empty_like(y), torch.empty_like(h)))
    assert dx.shape == dr.shape == x.shape and dw.shape == w.shape
