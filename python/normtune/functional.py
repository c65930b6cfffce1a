"""Functional forms of normtune's ops (torch.ops.normtune.*).

x is [..., H] on a CUDA device (fp32, fp16 or bf16); weight (and bias) are [H] of x's dtype
or fp32; the result has x's shape and dtype. A non-contiguous x is copied first.
zero_centered_gamma: the weight is stored as gamma - 1 (the norm multiplies by 1 + weight).
"""
from typing import Optional, Tuple, Union

import torch

# The overloads themselves, looked up once (a call through torch.ops.normtune.<name> resolves
# the overload packet on every call).
_rms_norm = torch.ops.normtune.rms_norm.default
_fused_add_rms_norm = torch.ops.normtune.fused_add_rms_norm.default
_layer_norm = torch.ops.normtune.layer_norm.default


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, residual: Optional[torch.Tensor] = None,
             zero_centered_gamma: bool = False) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """RMSNorm of x; with `residual`, of x + residual, returning (y, x + residual)."""
    if residual is None:
        return _rms_norm(x, weight, eps, zero_centered_gamma)
    return _fused_add_rms_norm(x, residual, weight, eps, zero_centered_gamma)


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                       zero_centered_gamma: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """(RMSNorm(x + residual), x + residual) in one pass; x + residual is rounded to x's dtype."""
    return _fused_add_rms_norm(x, residual, weight, eps, zero_centered_gamma)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5,
               zero_centered_gamma: bool = False) -> torch.Tensor:
    """LayerNorm of x over its last dimension."""
    return _layer_norm(x, weight, bias, eps, zero_centered_gamma)


# ---- quantized outputs (forward only) --------------------------------------------------------
# Gradients do not flow through an FP8 y. A training recipe keeps x and rsigma (and mu) from
# these calls and runs torch.ops.normtune.rms_norm_bwd / layer_norm_bwd on the gradient of y,
# as TransformerEngine does.

def rms_norm_fp8(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, eps: float = 1e-6,
                 residual: Optional[torch.Tensor] = None, fp8_dtype: torch.dtype = torch.float8_e4m3fn,
                 zero_centered_gamma: bool = False) -> Tuple[torch.Tensor, ...]:
    """RMSNorm of x (or of x + residual) written as FP8 with one per-tensor scale, in one pass.

    scale: one fp32 value on x's device. Returns (y, scale_inv, amax), with a residual
    (y, scale_inv, amax, x + residual): y = fp8(norm * scale), scale_inv = 1 / scale (what an
    FP8 GEMM multiplies back), amax = max |norm| before the scale (for the next scale).
    """
    if residual is None:
        y, _, amax, scale_inv = torch.ops.normtune.rms_norm_fp8.default(x, weight, eps, scale, fp8_dtype,
                                                                        zero_centered_gamma)
        return y, scale_inv, amax
    y, residual_out, _, amax, scale_inv = torch.ops.normtune.fused_add_rms_norm_fp8.default(
        x, residual, weight, eps, scale, fp8_dtype, zero_centered_gamma)
    return y, scale_inv, amax, residual_out


def layer_norm_fp8(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor,
                   eps: float = 1e-5, fp8_dtype: torch.dtype = torch.float8_e4m3fn,
                   zero_centered_gamma: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LayerNorm of x as FP8 with one per-tensor scale: (y, scale_inv, amax), as rms_norm_fp8."""
    y, _, _, amax, scale_inv = torch.ops.normtune.layer_norm_fp8.default(x, weight, bias, eps, scale, fp8_dtype,
                                                                         zero_centered_gamma)
    return y, scale_inv, amax


def rms_norm_mxfp8(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, residual: Optional[torch.Tensor] = None,
                   fp8_dtype: torch.dtype = torch.float8_e4m3fn, zero_centered_gamma: bool = False,
                   columnwise: bool = False) -> Tuple[torch.Tensor, ...]:
    """RMSNorm of x (or of x + residual) as MXFP8: FP8 data with one E8M0 scale per 32 elements
    of a row (H a multiple of 32). Returns (y, scales), with a residual (y, scales, x + residual);
    scales is torch.float8_e8m0fnu of shape [roundup(rows, 128), roundup(H / 32, 4)]
    (TransformerEngine's layout; the padding is left unwritten).

    columnwise=True also writes the column-wise copy (what the backward GEMMs read), in the
    same pass: y_colwise of y's shape with one E8M0 scale per 32 rows of a column,
    colwise_scales [roundup(ceil(rows / 32), 4), roundup(H, 128)]; the result is then
    (y, scales, y_colwise, colwise_scales) (+ x + residual)."""
    if columnwise:
        if residual is None:
            y, scales, yc, cscales, _ = torch.ops.normtune.rms_norm_mxfp8_colwise.default(
                x, weight, eps, fp8_dtype, zero_centered_gamma)
            return y, scales, yc, cscales
        y, scales, yc, cscales, residual_out, _ = torch.ops.normtune.fused_add_rms_norm_mxfp8_colwise.default(
            x, residual, weight, eps, fp8_dtype, zero_centered_gamma)
        return y, scales, yc, cscales, residual_out
    if residual is None:
        y, scales, _ = torch.ops.normtune.rms_norm_mxfp8.default(x, weight, eps, fp8_dtype, zero_centered_gamma)
        return y, scales
    y, scales, residual_out, _ = torch.ops.normtune.fused_add_rms_norm_mxfp8.default(
        x, residual, weight, eps, fp8_dtype, zero_centered_gamma)
    return y, scales, residual_out


def _wants_nvfp4_columnwise(norm: str, format: str, columnwise: bool,
                            colwise_global_amax: Optional[torch.Tensor]) -> bool:
    """Whether a {norm}_block_scaled call asks for the column-wise nvfp4 copy (ValueError for
    a column-wise request the format or the arguments cannot have)."""
    if not columnwise and colwise_global_amax is None:
        return False
    if format != "nvfp4":
        raise ValueError(f"normtune.{norm}_block_scaled: columnwise=True belongs to the nvfp4 format here, "
                         f"got '{format}' (mxfp8: {norm}_mxfp8(..., columnwise=True))")
    if not columnwise:
        raise ValueError(f"normtune.{norm}_block_scaled: colwise_global_amax needs columnwise=True")
    return True


def rms_norm_block_scaled(x: torch.Tensor, weight: torch.Tensor, format: str = "nvfp4", eps: float = 1e-6,
                          residual: Optional[torch.Tensor] = None, global_amax: Optional[torch.Tensor] = None,
                          swizzled: bool = False, fp8_dtype: torch.dtype = torch.float8_e4m3fn,
                          zero_centered_gamma: bool = False, columnwise: bool = False,
                          colwise_global_amax: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, ...]:
    """RMSNorm of x (or of x + residual) with a block-scaled y, row-wise, in one pass. format:

    - 'nvfp4': y e2m1 (torch.float4_e2m1fn_x2, [..., H / 2]: element 2i in the low nibble), one
      E4M3 scale per 16 elements (torch.float8_e4m3fn [roundup(rows, 128), roundup(H / 16, 4)]),
      TransformerEngine's NVFP4 arithmetic with global_amax (one fp32 value: this tensor's amax
      from a previous pass or step; None: an encode scale of 1);
    - 'mxfp4': y e2m1, one E8M0 scale per 32 (torch.float8_e8m0fnu, shaped as MXFP8's);
    - 'fp8_block128': y fp8_dtype, one fp32 scale_inv per 128 elements of a row, in
      TransformerEngine's transposed layout [ceil(H / 128), roundup(rows, 4)] (a row's last
      block may be partial).

    swizzled=True writes nvfp4 / mxfp4 scales in the 128x4 tiles GEMMs read. H must be a
    multiple of the block (fp8_block128: of 16). Returns (y, scales), with a residual (y, scales, x + residual).
    nvfp4 with columnwise=True also returns the column-wise copy the backward GEMMs read, after
    scales: y_colwise, TransformerEngine's transpose (torch.float4_e2m1fn_x2 [H, rows / 2]), and
    colwise_scales, one E4M3 scale per 16 rows of a column ([roundup(H, 128), roundup(rows / 16,
    4)], swizzled as the row-wise ones), encoded with colwise_global_amax (None: global_amax);
    rows (x's leading dims) must be a multiple of 16.
    Forward only, as the other quantized ops."""
    if _wants_nvfp4_columnwise("rms_norm", format, columnwise, colwise_global_amax):
        if residual is None:
            y, scales, yc, cscales, _ = torch.ops.normtune.rms_norm_nvfp4_colwise.default(
                x, weight, eps, global_amax, colwise_global_amax, swizzled, zero_centered_gamma)
            return y, scales, yc, cscales
        y, scales, yc, cscales, residual_out, _ = torch.ops.normtune.fused_add_rms_norm_nvfp4_colwise.default(
            x, residual, weight, eps, global_amax, colwise_global_amax, swizzled, zero_centered_gamma)
        return y, scales, yc, cscales, residual_out
    if residual is None:
        y, scales, _ = torch.ops.normtune.rms_norm_block.default(x, weight, eps, format, fp8_dtype, global_amax,
                                                                 swizzled, zero_centered_gamma)
        return y, scales
    y, scales, residual_out, _ = torch.ops.normtune.fused_add_rms_norm_block.default(
        x, residual, weight, eps, format, fp8_dtype, global_amax, swizzled, zero_centered_gamma)
    return y, scales, residual_out


def layer_norm_block_scaled(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, format: str = "nvfp4",
                            eps: float = 1e-5, global_amax: Optional[torch.Tensor] = None, swizzled: bool = False,
                            fp8_dtype: torch.dtype = torch.float8_e4m3fn, zero_centered_gamma: bool = False,
                            columnwise: bool = False,
                            colwise_global_amax: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, ...]:
    """LayerNorm of x with a block-scaled y: (y, scales), as rms_norm_block_scaled; nvfp4 with
    columnwise=True: (y, scales, y_colwise, colwise_scales)."""
    if _wants_nvfp4_columnwise("layer_norm", format, columnwise, colwise_global_amax):
        y, scales, yc, cscales, _, _ = torch.ops.normtune.layer_norm_nvfp4_colwise.default(
            x, weight, bias, eps, global_amax, colwise_global_amax, swizzled, zero_centered_gamma)
        return y, scales, yc, cscales
    y, scales, _, _ = torch.ops.normtune.layer_norm_block.default(x, weight, bias, eps, format, fp8_dtype,
                                                                  global_amax, swizzled, zero_centered_gamma)
    return y, scales


def layer_norm_mxfp8(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5,
                     fp8_dtype: torch.dtype = torch.float8_e4m3fn, zero_centered_gamma: bool = False,
                     columnwise: bool = False) -> Tuple[torch.Tensor, ...]:
    """LayerNorm of x as MXFP8: (y, scales), or with columnwise=True (y, scales, y_colwise,
    colwise_scales), as rms_norm_mxfp8."""
    if columnwise:
        y, scales, yc, cscales, _, _ = torch.ops.normtune.layer_norm_mxfp8_colwise.default(
            x, weight, bias, eps, fp8_dtype, zero_centered_gamma)
        return y, scales, yc, cscales
    y, scales, _, _ = torch.ops.normtune.layer_norm_mxfp8.default(x, weight, bias, eps, fp8_dtype, zero_centered_gamma)
    return y, scales


def rms_norm_amax(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, residual: Optional[torch.Tensor] = None,
                  zero_centered_gamma: bool = False) -> Tuple[torch.Tensor, ...]:
    """RMSNorm of x (or of x + residual) in x's dtype together with amax = max |y| of y as
    written (TransformerEngine's norm + amax, the first step of current scaling), one pass.
    Returns (y, amax), with a residual (y, amax, x + residual)."""
    if residual is None:
        y, _, amax = torch.ops.normtune.rms_norm_amax.default(x, weight, eps, zero_centered_gamma)
        return y, amax
    y, residual_out, _, amax = torch.ops.normtune.fused_add_rms_norm_amax.default(x, residual, weight, eps,
                                                                                  zero_centered_gamma)
    return y, amax, residual_out


def layer_norm_amax(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5,
                    zero_centered_gamma: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """LayerNorm of x in x's dtype and the amax of y as written: (y, amax)."""
    y, _, _, amax = torch.ops.normtune.layer_norm_amax.default(x, weight, bias, eps, zero_centered_gamma)
    return y, amax
