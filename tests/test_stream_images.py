"""The varied image set of `vkocr bench stream`: many sizes, deterministic per seed, RGB uint8, text on it."""

from __future__ import annotations

import numpy as np

from vkocr.agent.cli.stream_images import varied_images


def test_the_set_has_many_sizes_and_aspects() -> None:
    images = varied_images(24)
    assert len(images) == 24 and len({name for name, _ in images}) == 24
    sizes = {rgb.shape[:2] for _, rgb in images}
    assert len(sizes) >= 12
    assert len({round(w / h, 2) for h, w in sizes}) >= 12  # aspects, not only scales
    assert any(h > w for h, w in sizes) and any(w > 2 * h for h, w in sizes)  # portrait and wide labels
    assert all(max(h, w) <= 2000 for h, w in sizes)
    for name, rgb in images:
        assert rgb.dtype == np.uint8 and rgb.ndim == 3 and rgb.shape[2] == 3 and rgb.flags.c_contiguous
        assert name.endswith(f"-{rgb.shape[1]}x{rgb.shape[0]}")
        dark = (rgb.mean(axis=2) < 100).mean()
        assert 0.001 < dark < 0.3, name  # text drawn, on a light background


def test_the_same_seed_gives_the_same_images_and_another_seed_others() -> None:
    first, again, other = varied_images(3, seed=5), varied_images(3, seed=5), varied_images(3, seed=6)
    assert [n for n, _ in first] == [n for n, _ in again]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(first, again))
    assert not any(a.shape == b.shape and np.array_equal(a, b) for (_, a), (_, b) in zip(first, other))


def test_a_shorter_set_is_a_prefix_of_a_longer_one() -> None:
    short, longer = varied_images(2, seed=1), varied_images(3, seed=1)
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(short, longer))
