"""``merge_lines``: recognised lines → paragraphs in reading order.

Two lines belong to one paragraph when one lies below the other with a vertical gap of at most ``max_gap``
line heights, their horizontal extents overlap by at least ``min_overlap`` of the narrower one, and their
heights differ by at most ``max_height_ratio`` (a heading does not join the body under it). Paragraphs are the
connected groups of such pairs. Lines inside a paragraph, and the paragraphs themselves, follow
``sort_boxes``'s reading order. Text is joined with a space, or with nothing where either side of the join is
CJK (``separator`` overrides). Geometry uses each line's axis-aligned bounds, so it suits roughly horizontal
text. Adds the field ``paragraphs`` (``field`` renames it): a list of ``Paragraph``.

Options: ``max_gap`` (1.0), ``min_overlap`` (0.3), ``max_height_ratio`` (1.5), ``separator`` (auto),
``field`` ("paragraphs").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vkocr.postproc.errors import PluginConfigError
from vkocr.postproc.order import sort_box_indices
from vkocr.postproc.result import OcrLine, OcrResult, Quad

_DEFAULTS: dict[str, Any] = {
    "max_gap": 1.0,
    "min_overlap": 0.3,
    "max_height_ratio": 1.5,
    "separator": None,
    "field": "paragraphs",
}
_CJK = (
    (0x3000, 0x303F),  # CJK punctuation
    (0x3040, 0x30FF),  # kana
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0xFF00, 0xFFEF),  # full-width forms
    (0x20000, 0x2FFFF),
)


@dataclass(frozen=True)
class Paragraph:
    text: str
    box: Quad  # axis-aligned bounding quad of its lines, clockwise from the top-left
    lines: tuple[int, ...]  # indices into OcrResult.lines, in reading order


def is_cjk(ch: str) -> bool:
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _CJK)


def join_texts(texts: list[str], separator: str | None = None) -> str:
    """Texts joined by ``separator``, or by a space except where either side of a join is CJK."""
    if separator is not None:
        return separator.join(texts)
    out = ""
    for text in texts:
        if out and text and not (is_cjk(out[-1]) or is_cjk(text[0])):
            out += " "
        out += text
    return out


def _bounds(lines: list[OcrLine]) -> np.ndarray:
    """(n, 4) x0, y0, x1, y1 of each line's box."""
    boxes = np.array([line.box for line in lines], dtype=np.float64).reshape(len(lines), 4, 2)
    return np.concatenate([boxes.min(axis=1), boxes.max(axis=1)], axis=1)


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


class MergeLines:
    """Groups lines into paragraphs; see the module docstring for the rule and the options."""

    name = "merge_lines"

    def __init__(self, options: Mapping[str, Any]) -> None:
        unknown = set(options) - set(_DEFAULTS)
        if unknown:
            raise PluginConfigError(f"merge_lines: unknown options {sorted(unknown)}")
        opts = {**_DEFAULTS, **options}
        for key in ("max_gap", "min_overlap", "max_height_ratio"):
            value = opts[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise PluginConfigError(f"merge_lines: {key} must be a non-negative number, got {value!r}")
        if opts["separator"] is not None and not isinstance(opts["separator"], str):
            raise PluginConfigError("merge_lines: separator must be a string")
        if not isinstance(opts["field"], str) or not opts["field"]:
            raise PluginConfigError("merge_lines: field must be a non-empty string")
        self.max_gap = float(opts["max_gap"])
        self.min_overlap = float(opts["min_overlap"])
        self.max_height_ratio = float(opts["max_height_ratio"])
        self.separator: str | None = opts["separator"]
        self.field: str = opts["field"]

    def _linked(self, b: np.ndarray) -> np.ndarray:
        """(n, n) whether line i and line j belong together (symmetric)."""
        x0, y0, x1, y1 = (b[:, k] for k in range(4))
        height = np.maximum(y1 - y0, 1e-6)
        width = np.maximum(x1 - x0, 1e-6)
        lo_h = np.minimum(height[:, None], height[None, :])
        hi_h = np.maximum(height[:, None], height[None, :])
        gap = np.maximum(y0[None, :] - y1[:, None], y0[:, None] - y1[None, :])  # < 0 when rows overlap
        centre = (y0 + y1) / 2
        stacked = np.abs(centre[:, None] - centre[None, :]) >= 0.5 * lo_h
        overlap = np.minimum(x1[:, None], x1[None, :]) - np.maximum(x0[:, None], x0[None, :])
        narrow = np.minimum(width[:, None], width[None, :])
        return (  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
            stacked
            & (gap <= self.max_gap * lo_h)
            & (overlap >= self.min_overlap * narrow)
            & (hi_h <= self.max_height_ratio * lo_h)
        )

    def paragraphs(self, lines: list[OcrLine]) -> list[Paragraph]:
        if not lines:
            return []
        b = _bounds(lines)
        parent = list(range(len(lines)))
        for i, j in zip(*np.nonzero(np.triu(self._linked(b), 1)), strict=True):
            parent[_find(parent, int(i))] = _find(parent, int(j))
        groups: dict[int, list[int]] = {}
        for i in range(len(lines)):
            groups.setdefault(_find(parent, i), []).append(i)
        out = []
        for members in groups.values():
            order = [members[k] for k in sort_box_indices(np.array([lines[i].box for i in members]))]
            x0, y0 = b[members, 0].min(), b[members, 1].min()
            x1, y1 = b[members, 2].max(), b[members, 3].max()
            box = [[float(x0), float(y0)], [float(x1), float(y0)], [float(x1), float(y1)], [float(x0), float(y1)]]
            out.append(Paragraph(join_texts([lines[i].text for i in order], self.separator), box, tuple(order)))
        return [out[k] for k in sort_box_indices(np.array([p.box for p in out]))]

    def __call__(self, result: OcrResult) -> dict[str, Any]:
        return {self.field: self.paragraphs(result.lines)}
