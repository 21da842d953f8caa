"""NumPy reference implementations of the ONNX ops the Vulkan kernels implement (math only)."""

from .activation import ACTIVATIONS, apply_activation
from .argmax import argmax_with_max
from .conv import conv2d, conv_transpose2d
from .elementwise import BINARY_OPS, UNARY_OPS, binary, broadcast_shape, unary
from .layout import concat, slice_, transpose
from .matmul import gemm, matmul
from .normalize import layer_norm, reduce_mean, softmax
from .pool import average_pool2d, global_average_pool, max_pool2d
from .resize import resize

__all__ = [
    "ACTIVATIONS", "BINARY_OPS", "UNARY_OPS", "apply_activation", "argmax_with_max", "average_pool2d",
    "binary", "broadcast_shape", "concat", "conv2d", "conv_transpose2d", "gemm", "global_average_pool",
    "layer_norm", "matmul", "max_pool2d", "reduce_mean", "resize", "slice_", "softmax", "transpose", "unary",
]
