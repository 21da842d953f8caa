"""Every op the IR knows: its output shapes for concrete input shapes, and its NumPy execution.

`infer(node, shapes, consts)` gets the input shapes and, for inputs that are constants, their values (None
otherwise): a Reshape needs its target, a Slice its bounds. `run(node, inputs)` computes the outputs with the
references in vk/ops; it serves the NumPy executor and constant folding. The Vulkan side is vk/graph/lower.py.

The ops live in groups, each registering itself in `OPS` (vk/graph/opset_registry.py): convolution and
pooling (opset_windows.py), elementwise (opset_elementwise.py), shape and layout (opset_layout.py), matrix
products and normalisation (opset_matrix.py). Importing this module imports them all, so `OPS` here is
complete: take it from here.
"""

from __future__ import annotations

# imported for their registrations (each op adds itself to OPS)
from vkocr.engine.graph import opset_elementwise, opset_layout, opset_matrix, opset_windows  # noqa: F401
from vkocr.engine.graph.opset_registry import OPS as OPS
from vkocr.engine.graph.opset_registry import OpDef as OpDef
from vkocr.engine.graph.opset_registry import Shape as Shape
