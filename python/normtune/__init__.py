"""normtune: tuned RMSNorm and LayerNorm CUDA kernels as PyTorch ops.

    import normtune
    y = normtune.rms_norm(x, weight, eps=1e-6)                  # x [..., H] on a CUDA device
    y, h = normtune.rms_norm(x, weight, eps=1e-6, residual=h)   # fused residual add
    norm = normtune.nn.RMSNorm(4096, eps=1e-6, device="cuda", dtype=torch.bfloat16)
    y8, scale_inv, amax = normtune.rms_norm_fp8(x, weight, scale)  # FP8 output, one pass

The ops are torch.ops.normtune.* (registered in C++, with autograd and Meta kernels, so
torch.compile traces them without graph breaks); the kernels are libnormtune's, reached
through its C API.
"""
import os

import torch



def _extension_path():
    """libnormtune_torch.so: next to this file, or (an editable install, pip install -e .) in
    another folder of the package's path, where the build installed it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in [here, *__path__]:
        candidate = os.path.join(folder, "libnormtune_torch.so")
        if os.path.exists(candidate):
            return candidate
    raise ImportError(f"normtune: libnormtune_torch.so is in none of {[here, *__path__]}; reinstall the package")


torch.ops.load_library(_extension_path())

from . import nn  # noqa: E402
from .functional import (fused_add_rms_norm, layer_norm, layer_norm_amax, layer_norm_block_scaled,  # noqa: E402
                         layer_norm_fp8, layer_norm_mxfp8, rms_norm, rms_norm_amax, rms_norm_block_scaled,
                         rms_norm_fp8, rms_norm_mxfp8)

__version__ = "0.1.0"
__all__ = ["rms_norm", "layer_norm", "fused_add_rms_norm", "rms_norm_fp8", "layer_norm_fp8", "rms_norm_mxfp8",
           "layer_norm_mxfp8", "rms_norm_block_scaled", "layer_norm_block_scaled", "rms_norm_amax",
           "layer_norm_amax", "nn"]
