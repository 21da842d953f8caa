"""The recogniser on the GPU stops at its logits.

A PP-OCR recogniser ends in a Softmax over the classes, and on the GPU the only reader of those probabilities is
the rec epilogue (agent/ocr/gpu_stream.py): the most likely class of every time step and its probability, which
CTC decoding reads. `record_argmax(softmax=True)` works both out from the logits in one kernel, bit for bit what
the Softmax then the ArgMax give (the same reductions in the same order), so the probabilities (18 710 per time
step for PP-OCRv6, 48 MB for 16 lines of 320 px) are never written nor read again, and the plan has one dispatch
fewer. The CPU backend and the NumPy executor run the whole model, as before.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from vkocr.engine.device import Device
from vkocr.engine.graph.ir import Graph
from vkocr.engine.graph.model import Model, read_model
from vkocr.engine.graph.onnx_import import load_proto
from vkocr.engine.graph.precision import PrecisionPlan


def without_final_softmax(graph: Graph, output_rank: int | None) -> Graph | None:
    """`graph` ending at the input of the Softmax that makes its one output, where that Softmax runs over the
    output's last axis (`output_rank`: the output's declared rank, None when the file declares none); else None."""
    if len(graph.outputs) != 1:
        return None
    last = next((n for n in graph.nodes if graph.outputs[0] in n.outputs), None)
    if last is None or last.op != "Softmax" or len(last.inputs) != 1:
        return None
    axis = int(last.attrs.get("axis", -1))
    if not (axis == -1 or (output_rank is not None and axis == output_rank - 1)):
        return None
    if any(last.outputs[0] in n.inputs for n in graph.nodes):  # the probabilities have another reader
        return None
    return replace(graph, nodes=[n for n in graph.nodes if n is not last], outputs=[last.inputs[0]])


def load_rec_logits(path: str | Path, device: Device, precision: PrecisionPlan, *,
                    shape_classes: bool = True) -> tuple[Model, bool]:
    """The recogniser's model on `device`, without its final softmax where it has one over the classes, and
    whether it was cut (then its output is the logits: the epilogue asks record_argmax for softmax=True);
    `shape_classes` as Model takes it."""
    proto = load_proto(path)  # read once: the graph, and its output's declared rank
    graph, spec = read_model(proto, name=Path(path).name)
    declared = proto.graph.output[0].type.tensor_type if len(proto.graph.output) == 1 else None
    rank = len(declared.shape.dim) if declared is not None and declared.HasField("shape") else None
    cut = without_final_softmax(graph, rank)
    model = Model(cut or graph, device, input_spec=spec, precision=precision, shape_classes=shape_classes)
    return model, cut is not None
