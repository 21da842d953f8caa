"""excite.comp (an SE block's two 1×1 convolutions on the squeezed map and its product, in one dispatch) against
NumPy on fresh random inputs with poisoned outputs, in both storage precisions and both of the kernel's blocks;
and bit for bit against the three kernels it replaces (gemv.comp twice, binary.comp), h and g in fp16's
subnormal range included. With an upsampled addend (an FPN's upsample-and-add folded in): against NumPy, and bit
for bit against the excitation followed by resize.comp's nearest upsample-and-add."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, fresh_rng, poisoned, rel_err, release, run
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv import record_conv2d
from vkocr.engine.kernels.elementwise import record_binary
from vkocr.engine.kernels.excite import LARGE_MAP, Excite, block
from vkocr.engine.kernels.gemv import Epilogue
from vkocr.engine.kernels.resize import record_resize
from vkocr.engine.ops.activation import apply_activation
from vkocr.engine.recorder import Recorder

DTYPES = [np.float32, np.float16]
FIRST = Epilogue("relu")
SECOND = Epilogue("hardsigmoid", 0.2, 0.5)
# (C, C1, N, H, W): 4 and 16 channels a workgroup, C not a multiple of either, maps under and over LARGE_MAP
SHAPES = [(24, 6, 1, 7, 9), (50, 12, 2, 5, 13), (96, 24, 1, 9, 11), (96, 24, 1, 40, 110), (40, 200, 3, 30, 50),
          (7, 3, 1, 66, 70)]


class Block:
    """One SE block's tensors on the host, stored in `dtype`. `tiny`: s, w1 and the biases so small that h and g
    fall in fp16's subnormals (steps of 2^-24), and a second product without activation, so that how h and g
    are rounded reaches the output."""

    def __init__(self, rng: np.random.Generator, c: int, c1: int, n: int, h: int, w: int, dtype: type, *,
                 biases: bool = True, tiny: bool = False) -> None:
        def uniform(*shape: int, scale: float = 1.0) -> np.ndarray:
            return (rng.uniform(-1.0, 1.0, shape) * scale).astype(dtype)

        small = 3e-3 if tiny else 1.0
        self.dtype = dtype
        self.second = Epilogue("none") if tiny else SECOND
        self.x, self.s = uniform(n, c, h, w), uniform(n, c, 1, 1, scale=small)
        self.w1, self.w2 = uniform(c1, c, 1, 1, scale=small), uniform(c, c1, 1, 1)
        self.b1 = uniform(c1, scale=small**2) if biases else None  # (the size of a product w1 · s)
        self.b2 = uniform(c, scale=small**2) if biases else None

    def products(self) -> tuple[np.ndarray, np.ndarray]:
        """h and g in float64, each from the other rounded to the storage dtype, before its own rounding."""
        def product(w: np.ndarray, v: np.ndarray, b: np.ndarray | None, e: Epilogue) -> np.ndarray:
            sums = np.einsum("ok,nk->no", w[:, :, 0, 0].astype(np.float64), v.astype(np.float64))
            sums += 0.0 if b is None else b.astype(np.float64)
            return apply_activation(sums, e.activation, e.act_alpha, e.act_beta)

        h = product(self.w1, self.s[:, :, 0, 0], self.b1, FIRST)
        return h, product(self.w2, h.astype(self.dtype), self.b2, self.second)

    def reference(self, gated_add: bool) -> np.ndarray:
        """In float64, h and g rounded to the storage dtype as the replaced nodes stored them."""
        g = self.products()[1].astype(self.dtype)[:, :, None, None].astype(np.float64)
        x = self.x.astype(np.float64)
        return (x + x * g if gated_add else x * g).astype(self.dtype)


def run_excite(device: Device, b: Block, gated_add: bool, u: np.ndarray | None = None, up: int = 1) -> np.ndarray:
    """The Excite's output; with `u` and `up`, plus u upsampled by `up`."""
    excite = Excite.of(b.w1.shape, b.w2.shape, FIRST, b.second, has_b1=b.b1 is not None, has_b2=b.b2 is not None,
                       gated_add=gated_add, upsample=up)
    x, s, w1, w2 = (device.upload(a) for a in (b.x, b.s, b.w1, b.w2))
    b1 = device.upload(b.b1) if b.b1 is not None else None
    b2 = device.upload(b.b2) if b.b2 is not None else None
    small = device.upload(u) if u is not None else None
    out = poisoned(device, b.x.shape, b.dtype)
    try:
        run(device, lambda rec: excite.record(rec, x, s, w1, b1, w2, b2, out, small))
        return device.download(out)
    finally:
        release(device, *(t for t in (x, s, w1, b1, w2, b2, small, out) if t is not None))


def run_excite_then_upsample_add(device: Device, b: Block, gated_add: bool, u: np.ndarray, up: int) -> np.ndarray:
    """excite.comp, then resize.comp's nearest upsample of u with the excitation as its addend: what the graph ran
    before map_fusion.fuse_excite_upsample_add."""
    excite = Excite.of(b.w1.shape, b.w2.shape, FIRST, b.second, has_b1=b.b1 is not None, has_b2=b.b2 is not None,
                       gated_add=gated_add)
    x, s, w1, w2, small = (device.upload(a) for a in (b.x, b.s, b.w1, b.w2, u))
    b1 = device.upload(b.b1) if b.b1 is not None else None
    b2 = device.upload(b.b2) if b.b2 is not None else None
    excited, out = poisoned(device, b.x.shape, b.dtype), poisoned(device, b.x.shape, b.dtype)

    def record(rec: Recorder) -> None:
        excite.record(rec, x, s, w1, b1, w2, b2, excited)
        record_resize(rec, small, out, mode="nearest", coordinate_transformation_mode="asymmetric",
                      nearest_mode="floor", scales=(float(up), float(up)), addend=excited)

    try:
        run(device, record)
        return device.download(out)
    finally:
        release(device, *(t for t in (x, s, w1, b1, w2, b2, small, excited, out) if t is not None))


def run_three_kernels(device: Device, b: Block, gated_add: bool) -> np.ndarray:
    """gemv.comp twice (record_conv2d on a 1×1 map) and binary.comp: what the graph ran before the fusion."""
    n, c = b.s.shape[:2]
    c1 = b.w1.shape[0]
    x, s, w1, w2 = (device.upload(a) for a in (b.x, b.s, b.w1, b.w2))
    b1 = device.upload(b.b1) if b.b1 is not None else None
    b2 = device.upload(b.b2) if b.b2 is not None else None
    h, g = poisoned(device, (n, c1, 1, 1), b.dtype), poisoned(device, (n, c, 1, 1), b.dtype)
    out = poisoned(device, b.x.shape, b.dtype)

    def record(rec: Recorder) -> None:  # (the recorder puts a barrier between a write and its reads)
        record_conv2d(rec, s, w1, h, b1, activation=FIRST.activation)
        record_conv2d(rec, h, w2, g, b2, activation=b.second.activation, alpha=b.second.act_alpha,
                      beta=b.second.act_beta)
        record_binary(rec, "gated_add" if gated_add else "mul", x, g, out)

    try:
        run(device, record)
        return device.download(out)
    finally:
        release(device, *(t for t in (x, s, w1, b1, w2, b2, h, g, out) if t is not None))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gated_add", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_excite_matches_numpy(device: Device, shape: tuple[int, ...], gated_add: bool, dtype: type) -> None:
    rng, seed = fresh_rng()
    b = Block(rng, *shape, dtype, biases=shape[0] % 2 == 0)
    got = run_excite(device, b, gated_add)
    assert not np.isnan(got).any(), f"{shape}: unwritten outputs; seed {seed}"
    err = rel_err(got, b.reference(gated_add))
    assert err <= TOLERANCES[np.dtype(dtype)], f"{shape} gated={gated_add} {dtype}: rel error {err:.3g}; seed {seed}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tiny", [False, True])
def test_excite_is_the_three_kernels_bit_for_bit(device: Device, dtype: type, tiny: bool) -> None:
    rng, seed = fresh_rng()
    for shape in SHAPES[1:4]:
        for gated_add in (False, True):
            b = Block(rng, *shape, dtype, tiny=tiny)
            if tiny:
                h, g = (np.abs(v) for v in b.products())
                assert ((h > 0) & (h < 2.0**-14)).any() and (g < 2.0**-14).any(), f"no subnormals; seed {seed}"
            fused, apart = run_excite(device, b, gated_add), run_three_kernels(device, b, gated_add)
            assert np.array_equal(fused, apart), (f"{shape} gated={gated_add} {dtype} tiny={tiny}: max diff "
                                                 f"{np.abs(fused.astype(np.float64) - apart).max():.3g}; seed {seed}")


# (C, C1, N, H, W, factor): DB's neck's 2× steps on both blocks, a 4× one, maps not square
UPSAMPLED = [(24, 6, 1, 6, 10, 2), (96, 24, 1, 46, 64, 2), (50, 12, 2, 8, 12, 4), (7, 3, 1, 66, 70, 2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gated_add", [False, True])
@pytest.mark.parametrize("shape", UPSAMPLED)
def test_excite_adds_an_upsampled_map(device: Device, shape: tuple[int, ...], gated_add: bool, dtype: type) -> None:
    """out = u upsampled (nearest, each element repeated factor × factor times) + the excitation, the excitation
    rounded to the storage type first; and bit for bit the Excite followed by resize.comp's upsample-and-add."""
    rng, seed = fresh_rng()
    *dims, up = shape
    c, _, n, h, w = dims
    b = Block(rng, *dims, dtype)
    u = rng.uniform(-2.0, 2.0, (n, c, h // up, w // up)).astype(dtype)
    got = run_excite(device, b, gated_add, u, up)
    assert not np.isnan(got).any(), f"{shape}: unwritten outputs; seed {seed}"
    want = (u.repeat(up, axis=2).repeat(up, axis=3).astype(np.float64) + b.reference(gated_add)).astype(dtype)
    err = rel_err(got, want)
    assert err <= TOLERANCES[np.dtype(dtype)], f"{shape} gated={gated_add} {dtype}: rel error {err:.3g}; seed {seed}"
    apart = run_excite_then_upsample_add(device, b, gated_add, u, up)
    assert np.array_equal(got, apart), (f"{shape} gated={gated_add} {dtype}: not bit for bit, max diff "
                                        f"{np.abs(got.astype(np.float64) - apart).max():.3g}; seed {seed}")


def test_the_block_follows_the_map_and_the_weights() -> None:
    assert block(24, 6, 1, 7, 9) == (1, 4)
    assert block(96, 24, 1, 9, 11) == (1, 4)  # C·C1 = 2304 on a small map: 4 channels, more workgroups
    assert block(192, 48, 1, 46, 64) == (1, 16)
    assert block(96, 24, 1, 64, LARGE_MAP // 64) == (4, 16)
    assert block(48, 12, 1, 184, 256) == (4, 4)


def test_excite_refuses_what_it_cannot_run() -> None:
    with pytest.raises(KernelArgumentError, match="1×1"):
        Excite.of((6, 24, 3, 3), (24, 6, 1, 1), FIRST, SECOND, has_b1=True, has_b2=True, gated_add=False)
    with pytest.raises(KernelArgumentError, match="undo"):
        Excite.of((6, 24, 1, 1), (24, 5, 1, 1), FIRST, SECOND, has_b1=True, has_b2=True, gated_add=False)
    with pytest.raises(KernelArgumentError, match="nothing else"):
        Excite.of((6, 24, 1, 1), (24, 6, 1, 1), FIRST, Epilogue("relu", post_affine=(2.0, 1.0)), has_b1=True,
                  has_b2=True, gated_add=False)
    with pytest.raises(KernelArgumentError, match="hidden"):
        Excite.of((1025, 24, 1, 1), (24, 1025, 1, 1), FIRST, SECOND, has_b1=True, has_b2=True, gated_add=False)
    with pytest.raises(KernelArgumentError, match="upsamples its addend"):
        Excite.of((6, 24, 1, 1), (24, 6, 1, 1), FIRST, SECOND, has_b1=True, has_b2=True, gated_add=False, upsample=0)


def test_excite_refuses_an_addend_it_cannot_upsample(device: Device) -> None:
    rng, _ = fresh_rng()
    b = Block(rng, 8, 2, 1, 6, 10, np.float32)
    with pytest.raises(KernelArgumentError, match="takes an addend"):
        run_excite(device, b, False, None, 2)
    with pytest.raises(KernelArgumentError, match="takes no addend"):
        run_excite(device, b, False, rng.uniform(-1, 1, (1, 8, 3, 5)).astype(np.float32), 1)
    with pytest.raises(KernelArgumentError, match="addend to upsample"):
        run_excite(device, b, False, rng.uniform(-1, 1, (1, 8, 3, 4)).astype(np.float32), 2)
    odd = Block(rng, 8, 2, 1, 7, 10, np.float32)
    with pytest.raises(KernelArgumentError, match="no upsampling"):
        run_excite(device, odd, False, rng.uniform(-1, 1, (1, 8, 3, 5)).astype(np.float32), 2)
