"""Drop-in modules: the constructor arguments, parameters and state_dict keys of
torch.nn.RMSNorm and torch.nn.LayerNorm (a checkpoint loads into either), over the last
dimension only (normalized_shape an int or a 1-tuple)."""
import numbers
from typing import Optional, Tuple, Union

import torch

from . import functional as F

_Shape = Union[int, Tuple[int, ...], torch.Size]


def _hidden(normalized_shape: _Shape, name: str) -> int:
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else tuple(normalized_shape)
    if len(shape) != 1:
        raise ValueError(f"normtune.nn.{name}: normalized_shape must be the last dimension only "
                         f"(an int or a 1-tuple), got {normalized_shape}")
    return int(shape[0])


class RMSNorm(torch.nn.Module):
    """torch.nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True): eps None means
    torch.finfo(x.dtype).eps, as torch's."""

    def __init__(self, normalized_shape: _Shape, eps: Optional[float] = None, elementwise_affine: bool = True,
                 device=None, dtype=None):
        super().__init__()
        hidden = _hidden(normalized_shape, "RMSNorm")
        self.normalized_shape = (hidden,)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.ones(hidden, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_buffer("_ones", torch.ones(hidden, device=device, dtype=dtype), persistent=False)

    def _eps(self, x: torch.Tensor) -> float:
        return torch.finfo(x.dtype).eps if self.eps is None else self.eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight if self.weight is not None else self._ones
        return F.rms_norm(x, weight, self._eps(x))

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class FusedAddRMSNorm(RMSNorm):
    """forward(x, residual) -> (RMSNorm(x + residual), x + residual), one pass."""

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        weight = self.weight if self.weight is not None else self._ones
        return F.fused_add_rms_norm(x, residual, weight, self._eps(x))


class LayerNorm(torch.nn.Module):
    """torch.nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True)."""

    def __init__(self, normalized_shape: _Shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        hidden = _hidden(normalized_shape, "LayerNorm")
        self.normalized_shape = (hidden,)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        factory = dict(device=device, dtype=dtype)
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.ones(hidden, **factory))
            if bias:
                self.bias = torch.nn.Parameter(torch.zeros(hidden, **factory))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.weight is None:
            self.register_buffer("_ones", torch.ones(hidden, **factory), persistent=False)
        if self.bias is None:
            self.register_buffer("_zeros", torch.zeros(hidden, **factory), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight if self.weight is not None else self._ones
        bias = self.bias if self.bias is not None else self._zeros
        return F.layer_norm(x, weight, bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
