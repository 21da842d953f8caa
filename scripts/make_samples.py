"""Render the sample images the README's examples read (samples/*.png): the project's own, so the examples run
in any clone. Run again after changing them: python scripts/make_samples.py

word.png    one line, tightly framed (for recognition only: use_det=False)
label.png   a product label: lot, expiry and weight lines (Latin and digits)
shelf.png   a shelf tag in Chinese with a price, one line turned a few degrees
page.png    a short page of mixed lines, wide as a scan
labels.pdf  label.png and shelf.png as the two pages of a PDF
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1]
FONT = "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"  # fonts-wqy-microhei, which scripts/setup.sh installs


def draw_lines(size: tuple[int, int], lines: list[tuple[str, int, tuple[int, int], float]]) -> Image.Image:
    """White canvas; each line (text, pixel size, top-left, angle in degrees) in black."""
    page = Image.new("RGB", size, "white")
    for text, px, (x, y), angle in lines:
        font = ImageFont.truetype(FONT, px)
        left, top, right, bottom = font.getbbox(text)
        tile = Image.new("L", (right - left + 8, bottom - top + 8), 0)
        ImageDraw.Draw(tile).text((4 - left, 4 - top), text, fill=255, font=font)
        tile = tile.rotate(angle, expand=True, resample=Image.Resampling.BICUBIC)
        page.paste((20, 20, 20), (x, y), tile)
    return page


def main() -> int:
    if not Path(FONT).exists():
        print(f"make_samples: {FONT} is missing (apt-get install fonts-wqy-microhei)", file=sys.stderr)
        return 1
    out = ROOT / "samples"
    out.mkdir(exist_ok=True)
    draw_lines((250, 48), [("LOT 4821-B", 32, (12, 6), 0.0)]).save(out / "word.png")
    draw_lines((360, 150), [("LOT 4821-B", 30, (18, 14), 0.0), ("EXP 2027-03-15", 26, (18, 60), 0.0),
                            ("NET WT 500 g", 22, (18, 104), 0.0)]).save(out / "label.png")
    draw_lines((420, 180), [("新鲜有机牛奶", 40, (20, 16), 0.0), ("每盒 ¥12.80", 32, (24, 82), 3.0),
                            ("保质期至 2027年3月", 24, (22, 132), 0.0)]).save(out / "shelf.png")
    page_lines = [("Delivery note 0815", 34, (30, 20), 0.0), ("Ship to: Hall 3, Gate 7", 24, (30, 84), 0.0),
                  ("Item  Qty  Weight", 24, (30, 130), 0.0), ("Bearing 6204-2RS  40  4.8 kg", 24, (30, 170), 0.0),
                  ("检验合格 QC passed", 24, (30, 214), 0.0), ("Signed: M. Weber", 22, (430, 256), 0.0)]
    draw_lines((760, 300), page_lines).save(out / "page.png")
    label, shelf = Image.open(out / "label.png"), Image.open(out / "shelf.png")
    label.save(out / "labels.pdf", save_all=True, append_images=[shelf], resolution=72.0)
    for name in ("word.png", "label.png", "shelf.png", "page.png", "labels.pdf"):
        print(out / name, (out / name).stat().st_size, "bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
