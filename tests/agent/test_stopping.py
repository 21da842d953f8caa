"""A request whose answer is no longer wanted stops at the next stage boundary: the pipeline asks its caller
after every stage, and a job says who stopped wanting it (its client, its deadline, the agent's shutdown)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from tests.text_pages import FONT, text_page
from vkocr.agent.errors import RequestStopped, StopWho
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.ocr.request import OcrRequest
from vkocr.agent.serving.jobs import Job
from vkocr.postproc.registry import PluginChain

# eight lines, rendered here: every stage runs, and rec in more than one batch (of six)
LINES = ("LOT4821", "EXP2027", "LOT0042", "BATCH17", "SHIFT3", "LINE12", "PALLET9", "CRATE55")


@pytest.fixture(scope="module")
def pipeline() -> Iterator[OcrPipeline]:
    with OcrPipeline.open("cpu", cpu_threads=2) as opened:
        yield opened


def stop_after(boundaries: int, who: StopWho) -> tuple[list[int], Callable[[], StopWho | None]]:
    """A stop check that wants the answer for `boundaries` boundaries, then names `who`; counts its calls."""
    asked = [0]

    def stop() -> StopWho | None:
        asked[0] += 1
        return who if asked[0] > boundaries else None

    return asked, stop


@pytest.mark.skipif(not os.path.exists(FONT), reason="fonts-dejavu-core (installed by ./test.sh) renders the page")
def test_each_boundary_can_stop_the_request_and_nothing_after_it_runs(pipeline: OcrPipeline) -> None:
    image = decode_image(text_page(*LINES))
    full = pipeline.recognize(image, decoded=True)
    asked, never = stop_after(10**6, "client")
    unstopped = pipeline.recognize(image, decoded=True, stop=never)
    assert [line.text for line in unstopped.lines] == [line.text for line in full.lines] and full.lines
    boundaries = asked[0]
    assert boundaries >= 6  # decode, det, db, cls and at least two rec batches
    stopped_after = []
    for k in range(boundaries):
        asked, stop = stop_after(k, "deadline")
        with pytest.raises(RequestStopped) as caught:
            pipeline.recognize(image, decoded=True, stop=stop)
        assert caught.value.who == "deadline" and asked[0] == k + 1  # asked once more, never again
        stopped_after.append(caught.value.after)
    assert stopped_after[:4] == ["decode", "det", "db", "cls"] and set(stopped_after[4:]) == {"rec"}


def test_a_job_says_who_no_longer_wants_its_answer() -> None:
    image = np.full((8, 8, 3), 255, np.uint8)
    job = Job("j1", OcrRequest.of(image, OcrOptions(), PluginChain(())))
    assert job.stop_reason() is None
    job.cancel("shutdown")
    assert job.stop_reason() == "shutdown"
    late = Job("j2", OcrRequest.of(image, OcrOptions(), PluginChain(())), deadline=time.monotonic() - 1)
    assert late.stop_reason() == "deadline"
    wanted = Job("j3", OcrRequest.of(image, OcrOptions(), PluginChain(())), deadline=time.monotonic() + 60)
    assert wanted.stop_reason() is None
    wanted.cancel("client")
    assert wanted.stop_reason() == "client"
