"""A recognised line's text laid out inside its own box, for `--vis`.

The text is set upright in the box's own frame (its width along the top edge, its height along the left edge),
at the largest font size whose glyphs fit with a margin on every side, then warped onto the quadrilateral, so a
turned or slanted box gets turned or slanted text. A box the pipeline read top to bottom (get_rotate_crop_image
turns crops at least 1.5 times taller than wide) gets its characters stacked, as in a vertical CJK column.
Nothing is clipped: a layout that did not fit would show as ink outside the box.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image, ImageDraw

from vkocr.agent.ocr.fonts import Font, load_font
from vkocr.agent.ocr.image_reference import ROTATE90_RATIO

MARGIN = 0.1  # of the line's height (its width, when stacked), kept free on each side, at least 1 px
REFERENCE = "Hg"  # a line is sized from cap height to descender, so "ace" is not drawn taller than "Ace"


@dataclass(frozen=True)
class TextInk:
    """A line's text as coverage, 0–255: the patch `alpha` whose top-left pixel lies at (x, y) of the canvas."""

    alpha: np.ndarray
    x: int
    y: int


def box_sides(box: np.ndarray) -> tuple[float, float]:
    """The quad's own width (mean of its top and bottom edges) and height (mean of its left and right edges)."""
    p = np.asarray(box, np.float64)
    width = (np.linalg.norm(p[1] - p[0]) + np.linalg.norm(p[2] - p[3])) / 2
    height = (np.linalg.norm(p[3] - p[0]) + np.linalg.norm(p[2] - p[1])) / 2
    return float(width), float(height)


def reads_vertically(box: np.ndarray) -> bool:
    """get_rotate_crop_image's rule (longest sides, truncated): the pipeline read this box top to bottom."""
    p = np.asarray(box, np.float64)
    width = int(max(np.linalg.norm(p[0] - p[1]), np.linalg.norm(p[2] - p[3])))
    height = int(max(np.linalg.norm(p[0] - p[3]), np.linalg.norm(p[1] - p[2])))
    return width > 0 and height / width >= ROTATE90_RATIO


def text_ink(box: np.ndarray, text: str, font_path: str | None, canvas_size: tuple[int, int]) -> TextInk | None:
    """`text` fitted inside `box` (4×2, clockwise from the top-left) on a canvas of (width, height); None when
    there is nothing to draw (blank text, a box too small for a 1 px font, or a box off the canvas)."""
    quad = np.asarray(box, np.float32).reshape(4, 2)
    width, height = box_sides(quad)
    vertical = reads_vertically(quad)
    margin = max(1, round(MARGIN * (width if vertical else height)))
    room = (int(width) - 2 * margin, int(height) - 2 * margin)
    if min(room) < 1:
        return None
    tile = (stacked_tile if vertical else line_tile)(text, font_path, *room)
    if tile is None:
        return None
    # The tile is centred in the room the margins leave; whole pixels keep an axis-aligned box's text crisp.
    left = margin + (room[0] - tile.shape[1]) // 2
    top = margin + (room[1] - tile.shape[0]) // 2
    frame = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.float32)
    tile_to_canvas = cv2.getPerspectiveTransform(frame, quad) @ np.array([[1, 0, left], [0, 1, top], [0, 0, 1]])
    return warp_tile(tile, tile_to_canvas, canvas_size)


def line_tile(text: str, font_path: str | None, width: int, height: int) -> np.ndarray | None:
    """One line of `text` at the largest size whose extent fits width × height, as an L-mode coverage tile."""
    def extent(size: int) -> tuple[Font, tuple[float, float, float, float]]:
        font = load_font(font_path, size)
        left, top, right, bottom = font.getbbox(text)
        _, ref_top, _, ref_bottom = font.getbbox(REFERENCE)
        return font, (left, min(top, ref_top), right, max(bottom, ref_bottom))

    def fits(size: int) -> bool:
        left, top, right, bottom = extent(size)[1]
        return right - left <= width and bottom - top <= height

    if not text.strip():
        return None
    size = largest(fits, upper=2 * height + 2)
    if size is None:
        return None
    font, (left, top, right, bottom) = extent(size)
    tile = Image.new("L", (int(np.ceil(right - left)), int(np.ceil(bottom - top))), 0)
    ImageDraw.Draw(tile).text((-left, -top), text, fill=255, font=font)
    return np.asarray(tile)


def stacked_tile(text: str, font_path: str | None, width: int, height: int) -> np.ndarray | None:
    """`text`'s characters stacked top to bottom, each upright and centred in a cell one em tall (or its ink's
    height, if taller), at the largest size whose column fits width × height."""
    chars = list(text.strip())

    def layout(size: int) -> tuple[Font, list[tuple[float, float, float, float]], int, int]:
        font = load_font(font_path, size)
        boxes = [font.getbbox(c) for c in chars]
        cell = int(np.ceil(max([size] + [b - t for _, t, _, b in boxes])))
        column = int(np.ceil(max(r - lft for lft, _, r, _ in boxes)))
        return font, boxes, cell, column

    def fits(size: int) -> bool:
        _, _, cell, column = layout(size)
        return column <= width and cell * len(chars) <= height

    if not chars:
        return None
    size = largest(fits, upper=height + 2)
    if size is None:
        return None
    font, boxes, cell, column = layout(size)
    tile = Image.new("L", (max(1, column), cell * len(chars)), 0)
    draw = ImageDraw.Draw(tile)
    for i, (c, (left, top, right, bottom)) in enumerate(zip(chars, boxes)):
        draw.text(((column - (right - left)) / 2 - left, i * cell + (cell - (bottom - top)) / 2 - top), c,
                  fill=255, font=font)
    return np.asarray(tile)


def largest(fits: Callable[[int], bool], upper: int) -> int | None:
    """The largest size in 1..upper for which `fits(size)` holds (bisection: text extents grow with size)."""
    if not fits(1):
        return None
    low, high = 1, max(1, upper)
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def warp_tile(tile: np.ndarray, tile_to_canvas: np.ndarray, canvas_size: tuple[int, int]) -> TextInk | None:
    """The tile warped onto the canvas, computed only over the canvas pixels it can reach."""
    th, tw = tile.shape
    corners = cv2.perspectiveTransform(np.array([[[0, 0], [tw, 0], [tw, th], [0, th]]], np.float32),
                                    tile_to_canvas)[0]
    x0, y0 = (max(0, int(np.floor(v)) - 1) for v in corners.min(axis=0))
    x1 = min(canvas_size[0], int(np.ceil(corners[:, 0].max())) + 2)
    y1 = min(canvas_size[1], int(np.ceil(corners[:, 1].max())) + 2)
    if x1 <= x0 or y1 <= y0:
        return None
    to_patch = np.array([[1, 0, -x0], [0, 1, -y0], [0, 0, 1]]) @ tile_to_canvas
    alpha = cv2.warpPerspective(tile, to_patch, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR,
                                borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    return TextInk(alpha, x0, y0)
