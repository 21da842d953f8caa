"""The clients of one `vkocr bench agent` level, in a process of their own (spawned by bench_agent.py, so that
their Python does not share the agent's GIL): N channels, unary calls or one stream each, every answer sent back
with its latency, error code and message, or texts and the agent's stage timings."""

from __future__ import annotations

import pickle
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from vkocr.v1 import ocr_pb2

REORDERED = "WRONG_ORDER"  # a stream's answer that carries another frame's request id

# index, ms, error code, texts (for an error: its message), stages
Answer = tuple[int, float, str | None, list[str] | None, dict[str, float]]


def client_process(conn: Connection, target: str, requests_path: str, clients: int, mode: str,
                   passes: int = 1) -> None:
    """The clients of one level (another process): connect `clients` channels, say "ready", wait for "go",
    then take the requests in turn, every one once per pass, until none is left (an answer's index counts
    across the passes); send back every answer and the wall time from "go"."""
    from vkocr.agent.serving.client import OcrClient
    from vkocr.v1 import ocr_pb2

    requests = [ocr_pb2.RecognizeRequest.FromString(b) for b in pickle.loads(Path(requests_path).read_bytes())]
    requests *= passes
    # a connection each, as N controllers would have: sharing one, calls past the agent's streams per
    # connection were refused UNAVAILABLE (64 clients until session 44) and every frame crossed one socket
    channels = [OcrClient(target, own_connection=True) for _ in range(clients)]
    try:
        for client in channels:
            client.health(timeout=60)  # connected before the clock starts
        taken = iter(range(len(requests)))
        take = threading.Lock()
        answers: list[Answer] = []

        def next_index() -> int | None:
            with take:
                return next(taken, None)

        loop = unary_client if mode == "unary" else stream_client
        threads = [threading.Thread(target=loop, args=(c, requests, next_index, answers), daemon=True)
                   for c in channels]
        conn.send("ready")
        conn.recv()
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        conn.send((answers, time.perf_counter() - began))
    finally:
        for client in channels:
            client.close()
        conn.close()


def answer_of(index: int, took_ms: float, response: ocr_pb2.RecognizeResponse) -> Answer:
    from vkocr.agent.serving.durations import ms_of

    return (index, took_ms, None, [line.text for line in response.lines],
            {stage: ms_of(spent) for stage, spent in response.timings.items()})


def unary_client(client: Any, requests: list[Any], next_index: Any, answers: list[Answer]) -> None:
    import grpc

    while (index := next_index()) is not None:
        began = time.perf_counter()
        try:
            response = client.ocr_stub.Recognize(requests[index])
        except grpc.RpcError as err:
            code = err.code().name if isinstance(err, grpc.Call) else "UNKNOWN"
            details = (err.details() or "") if isinstance(err, grpc.Call) else ""
            answers.append((index, 0.0, code, [details], {}))
            continue
        answers.append(answer_of(index, (time.perf_counter() - began) * 1e3, response))


def stream_client(client: Any, requests: list[Any], next_index: Any, answers: list[Answer]) -> None:
    """One RecognizeStream; the next frame goes once the last one's answer is in."""
    import queue

    import grpc
    from google.rpc import code_pb2

    from vkocr.v1 import ocr_pb2

    turn: queue.Queue[None] = queue.Queue()
    sent: list[tuple[int, float]] = []  # (index, send time) of each frame, in order

    def frames() -> Any:
        while (index := next_index()) is not None:
            sent.append((index, time.perf_counter()))
            yield ocr_pb2.RecognizeStreamRequest(request=requests[index])
            turn.get()  # its answer came

    try:
        for n, frame in enumerate(client.ocr_stub.RecognizeStream(frames())):
            index, began = sent[n]
            took = (time.perf_counter() - began) * 1e3
            if frame.request_id != requests[index].request_id:  # answers come in request order
                answers.append((index, took, REORDERED, None, {}))
            elif frame.HasField("error"):
                answers.append((index, took, code_pb2.Code.Name(frame.error.code), [frame.error.message], {}))
            else:
                answers.append(answer_of(index, took, frame.response))
            turn.put(None)
    except grpc.RpcError as err:  # the stream broke: its frames without an answer count as its code
        code, details = (err.code().name, err.details() or "") if isinstance(err, grpc.Call) else ("UNKNOWN", "")
        answered = {a[0] for a in answers}
        answers.extend((index, 0.0, code, [details], {}) for index, _ in sent if index not in answered)
