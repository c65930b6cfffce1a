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
