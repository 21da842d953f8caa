"""The client honours the agent's RetryInfo: a call refused for now (a full queue) is tried again after the
delay the agent asks for, with backoff, for as long as its deadline allows (a count of tries only without a
deadline); a call refused for good is never retried."""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from tests.agent.agents import REC_ONLY, lot_number, running_agent, wait_for, word_png
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.retries import NO_RETRIES, RetryPolicy
from vkocr.v1 import ocr_pb2


def read(client: OcrClient, i: int) -> str:
    response = client.recognize(word_png(lot_number(i)), use_det=False, use_cls=False)
    return response.lines[0].text


def test_a_full_queue_is_retried_as_the_agent_says_and_then_served() -> None:
    with running_agent(**{"server.queue_size": 1, "device.select": "cpu"}) as background, \
            OcrClient(background.target, timeout=120, retries=RetryPolicy(attempts=12)) as patient, \
            OcrClient(background.target, timeout=120, retries=NO_RETRIES) as hasty, \
            ThreadPoolExecutor(1) as pool:
        assert read(patient, 1) == lot_number(1)
        worker, stats = background.agent.worker, background.agent.stats
        with worker.held():  # no lane takes a request: the queue's one place is taken by the first
            busy = [patient.ocr_stub.Recognize.future(ocr_pb2.RecognizeRequest(
                encoded=word_png(lot_number(2)), options=REC_ONLY), timeout=120)]
            wait_for(lambda: worker.queue_depth() == 1)
            with pytest.raises(grpc.RpcError) as refused:
                read(hasty, 4)
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED  # no retries: refused at once
            before = stats.snapshot().rejected_total
            retried = pool.submit(read, patient, 5)
            wait_for(lambda: stats.snapshot().rejected_total > before)  # its first try was refused too
        assert retried.result(timeout=120) == lot_number(5)  # a later try, once the queue had room
        assert [f.result(timeout=120).lines[0].text for f in busy] == [lot_number(2)]


def test_six_callers_of_a_busy_agent_with_a_queue_of_one_are_all_served_within_their_deadline() -> None:
    """The agent is slow: its worker is held for longer than a fixed count of tries would keep retrying (three
    tries gave up after about a second), then serves the queue one by one. Every caller, retrying as the
    default policy does, gets its answer before its deadline."""
    with running_agent(**{"server.queue_size": 1, "device.select": "cpu"}) as background, \
            OcrClient(background.target, timeout=120) as client, ThreadPoolExecutor(6) as pool:
        assert read(client, 0) == lot_number(0)
        worker, stats = background.agent.worker, background.agent.stats
        with worker.held():
            callers = [pool.submit(read, client, i) for i in range(1, 7)]
            wait_for(lambda: stats.snapshot().rejected_total >= 10)  # each refused, some again and again
            time.sleep(3)  # the board stays busy past what three tries would have waited
        assert sorted(c.result(timeout=120) for c in callers) == [lot_number(i) for i in range(1, 7)]
        assert stats.snapshot().rejected_total >= 10


def test_without_a_deadline_the_tries_are_counted_and_with_one_the_deadline_bounds_them() -> None:
    policy = RetryPolicy(base_s=0.0, max_wait_s=0.0, jitter=0.0)
    assert policy.most_attempts(None) == policy.attempts_without_deadline
    assert policy.most_attempts(10.0) is None
    assert RetryPolicy(attempts=3).most_attempts(10.0) == 3


def test_a_bad_request_is_never_retried() -> None:
    with running_agent(**{"device.select": "cpu"}) as background, \
            OcrClient(background.target, timeout=60, retries=RetryPolicy(attempts=5)) as client:
        before = background.agent.stats.snapshot().requests_total
        with pytest.raises(grpc.RpcError) as caught:
            client.recognize(b"not an image at all")
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert background.agent.stats.snapshot().requests_total == before + 1


def test_waits_follow_the_hint_grow_and_stay_bounded() -> None:
    policy = RetryPolicy(attempts=5, base_s=0.25, max_wait_s=2.0, jitter=0.2)
    rng = random.Random(7)
    waits = [policy.wait_s(retry, 0.5, rng) for retry in (1, 2, 3, 4)]
    assert 0.5 <= waits[0] <= 0.6  # the agent's delay, longer than the first backoff
    assert 1.0 <= waits[2] <= 1.2 and 2.0 <= waits[3] <= 2.4  # backoff, then the cap (plus jitter)
    assert policy.wait_s(1, 30.0, rng) <= 2.4  # an agent asking for more is capped too
    with pytest.raises(ValueError, match="at least 1"):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match="attempts_without_deadline"):
        RetryPolicy(attempts_without_deadline=0)
    with pytest.raises(ValueError, match="base_s"):
        RetryPolicy(base_s=10.0, max_wait_s=1.0)
