"""CTC greedy decoding of the recogniser's output, as RapidOCR 1.4.4's ``CTCLabelDecode`` (and 3.10's, which
rounds the scores).

The recogniser's GPU stage returns, per line and time step, the argmax class and its probability; decoding
keeps a step when its class differs from the previous step's and is not the blank (class 0), and scores the
line with the mean probability of the kept steps (0.0 when nothing is kept, as RapidOCR).
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vkocr.postproc.errors import CharsetError

BLANK = "blank"


@dataclass(frozen=True)
class CtcText:
    """One decoded line: text, score, and for each character its time step and probability."""

    text: str
    score: float
    positions: tuple[int, ...]  # time-step index of each character of ``text``
    char_scores: tuple[float, ...]
    steps: int  # number of time steps in the recogniser's output (T)


def load_charset(model_metadata: Mapping[str, str], key: str = "character") -> list[str]:
    """The class list of a PaddleOCR recogniser from its ONNX metadata: "blank" (class 0), the dictionary
    (``str.splitlines`` of the metadata value, as RapidOCR reads it), then a space (the last class)."""
    try:
        text = model_metadata[key]
    except KeyError:
        raise CharsetError(f"the recognition model has no {key!r} metadata; cannot build its dictionary") from None
    chars = text.splitlines()
    if not chars:
        raise CharsetError(f"the recognition model's {key!r} metadata is empty")
    return [BLANK, *chars, " "]


def load_keys_file(path: str | os.PathLike[str]) -> list[str]:
    """The class list from a PaddleOCR dictionary file (``--rec-keys``; RapidOCR's ``rec_keys_path``): "blank",
    each line of the file, then a space. Lines are read as RapidOCR reads them: UTF-8, split at "\\n", each
    line's "\\n" and "\\r" stripped from both ends, so a line holding a space keeps it."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CharsetError(f"cannot read the keys file {os.fspath(path)}: {exc.strerror or exc}") from None
    chars = []
    for number, raw in enumerate(io.BytesIO(data).readlines(), start=1):
        try:
            chars.append(raw.decode("utf-8").strip("\n").strip("\r\n"))
        except UnicodeDecodeError:
            raise CharsetError(f"the keys file {os.fspath(path)}: line {number} is not UTF-8") from None
    if not chars:
        raise CharsetError(f"the keys file {os.fspath(path)} is empty: it needs one character per line")
    return [BLANK, *chars, " "]


def check_classes(charset: Sequence[str], classes: int, source: str) -> None:
    """CharsetError unless the dictionary has exactly one entry per class the recogniser outputs; `source`
    says where the dictionary came from, for the message."""
    if len(charset) != classes:
        raise CharsetError(
            f"{source} has {len(charset) - 2} characters, so {len(charset)} classes with the blank and the space, "
            f"but the recognition model outputs {classes} classes: it needs a dictionary of {classes - 2} "
            "characters, one per line (the one it was trained with)")


def _validate(indices: np.ndarray, scores: np.ndarray, charset: Sequence[str]) -> None:
    if indices.ndim != 2 or indices.shape != scores.shape:
        raise ValueError(f"indices and scores must both be (B, T); got {indices.shape} and {scores.shape}")
    if indices.size and (indices.min() < 0 or indices.max() >= len(charset)):
        raise CharsetError(
            f"class index out of range: model output uses [{indices.min()}, {indices.max()}], "
            f"dictionary has {len(charset)} classes"
        )


def python_round(values: np.ndarray, decimals: int) -> np.ndarray:
    """Python's ``round(v, decimals)`` of every float64 value, vectorised. Python rounds the exact binary value
    to the nearest multiple of 10^-decimals (half to even) and returns the double nearest that decimal: the
    integer ``rint(v · 10^decimals)`` divided by 10^decimals, both exact, is that double once the integer is
    the right one. It is, unless the scaled value lies within a rounding error of a half: those values (and any
    too large for the margin) go through Python's round itself."""
    values = np.asarray(values, np.float64)
    if not 0 <= decimals <= 15:
        return np.array([round(v, decimals) for v in values.tolist()], np.float64)
    scale = 10.0**decimals  # exact
    scaled = values * scale
    nearest = np.rint(scaled)
    out = nearest / scale
    unsure = ~(np.abs(np.abs(scaled - nearest) - 0.5) > 1e-6) | ~(np.abs(scaled) < 2.0**40)
    for i in np.flatnonzero(unsure).tolist():
        out[i] = round(float(values[i]), decimals)
    return out


def ctc_decode(indices: np.ndarray, scores: np.ndarray, charset: Sequence[str], decimals: int | None = None
               ) -> list[CtcText]:
    """Greedy CTC decoding of (B, T) argmax classes and their (B, T) probabilities, with positions.

    ``decimals``: RapidOCR 3.10's rounding — each kept step's probability rounded to this many decimals
    (Python's round), the line's mean of those rounded again (NumPy's); None: RapidOCR 1.4.4's, unrounded."""
    indices = np.asarray(indices)
    scores = np.asarray(scores)
    _validate(indices, scores, charset)
    # the steps that start a new, non-blank class, for all lines at once
    keep = indices != 0
    keep[:, 1:] &= indices[:, 1:] != indices[:, :-1]
    steps = int(indices.shape[1])
    rows, cols = np.nonzero(keep)  # row-major: each line's kept steps together, in order
    kept_scores = scores[rows, cols].astype(np.float64)
    kept_classes, positions = indices[rows, cols].tolist(), cols.tolist()
    if decimals is not None:
        kept_scores = python_round(kept_scores, decimals)
    kept_list = kept_scores.tolist()
    counts = np.bincount(rows, minlength=indices.shape[0]).tolist()
    means = []
    at = 0
    for count in counts:
        # np.mean's own steps (its pairwise sum, then the division), as RapidOCR takes the mean
        means.append(np.add.reduce(kept_scores[at:at + count]) / count if count else 0.0)
        at += count
    line_scores = (np.round(np.array(means, np.float64), decimals) if decimals is not None
                   else np.array(means, np.float64)).tolist()
    out = []
    at = 0
    for count, score in zip(counts, line_scores, strict=True):
        end = at + count
        text = "".join([charset[c] for c in kept_classes[at:end]])
        out.append(CtcText(text, score, tuple(positions[at:end]), tuple(kept_list[at:end]), steps))
        at = end
    return out


def ctc_greedy_decode(indices: np.ndarray, scores: np.ndarray, charset: Sequence[str]) -> list[tuple[str, float]]:
    """(text, score) per line, exactly RapidOCR's ``CTCLabelDecode`` on the same argmax/max values."""
    return [(t.text, t.score) for t in ctc_decode(indices, scores, charset)]
