"""CTC decoding against RapidOCR's CTCLabelDecode, and the dictionary from the recogniser's metadata."""

from __future__ import annotations

import numpy as np
import pytest
from rapidocr_onnxruntime.ch_ppocr_rec.utils import CTCLabelDecode

from tests.paths import MODELS
from vkocr.postproc.ctc import BLANK, ctc_decode, ctc_greedy_decode, load_charset, python_round
from vkocr.postproc.errors import CharsetError


@pytest.fixture(scope="module")
def model_metadata() -> dict[str, str]:
    onnx = pytest.importorskip("onnx")
    path = MODELS / "ch_PP-OCRv4_rec_infer.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    model = onnx.load(str(path), load_external_data=False)
    return {p.key: p.value for p in model.metadata_props}


def _probabilities(rng: np.random.Generator, b: int, t: int, classes: int) -> np.ndarray:
    logits = rng.normal(size=(b, t, classes)).astype(np.float32)
    hot = rng.integers(0, 6, (b, t))  # favour blank and a few classes: repeats and blanks are common
    logits[np.arange(b)[:, None], np.arange(t)[None, :], hot] += rng.uniform(0, 12, (b, t)).astype(np.float32)
    p = np.exp(logits - logits.max(axis=2, keepdims=True))
    return p / p.sum(axis=2, keepdims=True)


def test_charset_from_model_metadata(model_metadata: dict[str, str]) -> None:
    charset = load_charset(model_metadata)
    reference = CTCLabelDecode(character=model_metadata["character"].splitlines()).character
    assert charset == reference
    assert len(charset) == 6625 and charset[0] == BLANK and charset[-1] == " "


def test_decode_matches_rapidocr(rng: np.random.Generator, model_metadata: dict[str, str]) -> None:
    charset = load_charset(model_metadata)
    decoder = CTCLabelDecode(character=model_metadata["character"].splitlines())
    for _ in range(12):
        b, t = int(rng.integers(1, 7)), int(rng.integers(1, 80))
        probs = _probabilities(rng, b, t, len(charset))
        indices, scores = probs.argmax(axis=2), probs.max(axis=2)
        assert ctc_greedy_decode(indices, scores, charset) == decoder(probs)
        detailed = decoder(probs, return_word_box=True, wh_ratio_list=[1.0] * b, max_wh_ratio=1.0)
        for ours, ref in zip(ctc_decode(indices, scores, charset), detailed, strict=True):
            steps, _words, cols, _, confs = ref[2]
            assert (ours.text, ours.score, ours.steps) == (ref[0], ref[1], steps)
            assert list(ours.positions) == [c for word in cols for c in word]
            assert list(ours.char_scores) == (confs if ours.text else [])


def test_decode_rules() -> None:
    charset = [BLANK, "a", "b", " "]
    idx = np.array([[1, 1, 0, 1, 2, 2, 3], [0, 0, 0, 0, 0, 0, 0]])
    prob = np.array([[0.9, 0.8, 0.99, 0.7, 0.6, 0.5, 0.4], [0.9] * 7], dtype=np.float32)
    first, empty = ctc_decode(idx, prob, charset)
    assert first.text == "aab " and first.positions == (0, 3, 4, 6)
    assert first.score == pytest.approx(np.mean(prob[0, [0, 3, 4, 6]]))
    assert (empty.text, empty.score, empty.positions) == ("", 0.0, ())  # RapidOCR scores an empty line 0


def test_charset_and_index_errors() -> None:
    with pytest.raises(CharsetError, match="character"):
        load_charset({"other": "x"})
    with pytest.raises(CharsetError, match="empty"):
        load_charset({"character": ""})
    with pytest.raises(CharsetError, match="out of range"):
        ctc_greedy_decode(np.array([[5]]), np.array([[1.0]]), [BLANK, "a", " "])
    with pytest.raises(ValueError, match="B, T"):
        ctc_greedy_decode(np.zeros((2, 3), int), np.zeros((2, 4)), [BLANK, "a", " "])


@pytest.mark.parametrize("decimals", [0, 2, 5, 9, 17])
def test_python_round_is_pythons_round(rng: np.random.Generator, decimals: int) -> None:
    halves = (np.arange(20000) + 0.5) / 10.0**min(decimals, 12)  # decimal halves, nearest doubles
    values = np.concatenate([
        rng.random(20000), rng.random(20000).astype(np.float32).astype(np.float64),  # scores as the GPU gives them
        halves, halves.astype(np.float32).astype(np.float64), np.arange(256) / 256,  # ties and near-ties
        -rng.random(500), rng.random(500) * 1e14, [0.0, -0.0, 1.0]])
    ours = python_round(values, decimals)
    theirs = np.array([round(v, decimals) for v in values.tolist()])
    assert np.array_equal(ours, theirs) and np.array_equal(np.signbit(ours), np.signbit(theirs))
