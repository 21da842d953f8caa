"""The agent end to end: a real server on a loopback port, real models on the Vulkan device, real gRPC clients."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from structlog.testing import capture_logs

from tests.agent.agents import (
    REC_ONLY,
    agent_config,
    frame,
    lot_number,
    running_agent,
    wait_for,
    word_pixels,
    word_png,
)
from tests.agent.certs import TlsFiles
from vkocr.agent.serving.background import BackgroundAgent, start_agent
from vkocr.agent.serving.call_deadlines import OCR_TIMEOUT_S, SLOW_OCR_TIMEOUT_S, ocr_timeout_for
from vkocr.agent.serving.client import OcrClient
from vkocr.engine.errors import VulkanUnavailable
from vkocr.v1 import ocr_pb2, ocr_pb2_grpc, status_pb2, status_pb2_grpc

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")


@pytest.fixture(scope="module")
def agent() -> Iterator[BackgroundAgent]:
    with running_agent(**{"server.status_interval_s": 0.2}) as background:
        yield background


@pytest.fixture
def ocr(agent: BackgroundAgent) -> Iterator[ocr_pb2_grpc.OcrServiceStub]:
    with grpc.insecure_channel(agent.target) as channel:
        yield ocr_pb2_grpc.OcrServiceStub(channel)


def rec_request(i: int) -> ocr_pb2.RecognizeRequest:
    return ocr_pb2.RecognizeRequest(request_id=f"id-{i}", encoded=word_png(lot_number(i)), options=REC_ONLY)


def details(err: grpc.RpcError) -> list[object]:
    """The google.rpc details of a failed call, unpacked."""
    status = rpc_status.from_call(err)
    assert status is not None, f"no rich status in {err}"
    unpacked = []
    for any_detail in status.details:
        for kind in (error_details_pb2.BadRequest, error_details_pb2.RetryInfo, error_details_pb2.ErrorInfo):
            if any_detail.Is(kind.DESCRIPTOR):
                message = kind()
                any_detail.Unpack(message)
                unpacked.append(message)
    return unpacked


def test_recognize_finds_and_reads_every_line(ocr: ocr_pb2_grpc.OcrServiceStub, agent: BackgroundAgent) -> None:
    import io

    from PIL import Image

    page = Image.new("RGB", (420, 150), "white")
    page.paste(Image.fromarray(word_pixels("LOT4821", 30)), (20, 20))
    page.paste(Image.fromarray(word_pixels("EXP2027-03", 30)), (20, 90))
    buffer = io.BytesIO()
    page.save(buffer, format="PNG")
    response = ocr.Recognize(ocr_pb2.RecognizeRequest(request_id="page-1", encoded=buffer.getvalue()))
    assert response.request_id == "page-1"
    # PP-OCR drops the spaces, as RapidOCR does
    assert [line.text for line in response.lines] == ["LOT4821", "EXP2027-03"]
    first = response.lines[0]
    assert len(first.box) == 4 and 10 <= first.box[0].x <= 40 and 15 <= first.box[0].y <= 40
    assert (response.image_width, response.image_height) == (420, 150)
    assert response.model_version == "ppocrv4-rapidocr-1.4.4"
    assert response.device == agent.agent.state.get().device
    assert {"decode", "det", "db", "cls", "rec", "queue", "plugins", "total"} <= set(response.timings)
    assert response.timings["total"].ToNanoseconds() >= response.timings["rec"].ToNanoseconds() > 0


def test_raw_pixels_in_every_layout_read_the_same(ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    pixels = word_pixels("LOT0815")
    gray = pixels[..., 0]
    cases = {
        ocr_pb2.PIXEL_LAYOUT_RGB8: pixels, ocr_pb2.PIXEL_LAYOUT_BGR8: pixels[..., ::-1],
        ocr_pb2.PIXEL_LAYOUT_GRAY8: gray, ocr_pb2.PIXEL_LAYOUT_GRAY16: gray.astype("<u2") * 257,
    }
    for layout, array in cases.items():
        raw = ocr_pb2.RawImage(data=array.tobytes(), height=array.shape[0], width=array.shape[1], layout=layout)
        response = ocr.Recognize(ocr_pb2.RecognizeRequest(raw=raw, options=REC_ONLY))
        assert [line.text for line in response.lines] == ["LOT0815"], ocr_pb2.PixelLayout.Name(layout)


def test_stream_of_40_answers_in_request_order(ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    # 40, not 100: one recognition takes 2.5 s on lavapipe on the 2-core CI machine
    answers = list(ocr.RecognizeStream(frame(rec_request(i)) for i in range(40)))
    assert [a.request_id for a in answers] == [f"id-{i}" for i in range(40)]
    assert [a.response.request_id for a in answers] == [f"id-{i}" for i in range(40)]
    assert [a.response.lines[0].text if a.response.lines else "" for a in answers] == [lot_number(i) for i in range(40)]
    assert not any(a.HasField("error") for a in answers)


def test_a_bad_request_in_a_stream_fails_alone(ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    requests = [rec_request(1), ocr_pb2.RecognizeRequest(request_id="bad", encoded=b"\x89PNG\r\n\x1a\n broken"),
                rec_request(2)]
    answers = list(ocr.RecognizeStream(frame(r) for r in requests))
    assert [a.request_id for a in answers] == ["id-1", "bad", "id-2"]
    assert answers[1].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and not answers[1].HasField("response")
    assert [a.response.lines[0].text for a in (answers[0], answers[2])] == [lot_number(1), lot_number(2)]


def test_16_concurrent_clients_times_4_requests_all_correct(agent: BackgroundAgent) -> None:
    """4 calls each, not 20: one recognition takes 2.5 s on lavapipe on the 2-core CI machine; 16 clients
    still interleave on one GPU worker."""
    def client(k: int) -> list[tuple[str, str]]:
        with grpc.insecure_channel(agent.target) as channel:
            stub = ocr_pb2_grpc.OcrServiceStub(channel)
            got = []
            for j in range(4):
                i = 100 + 4 * k + j
                response = stub.Recognize(rec_request(i), timeout=600)
                got.append((response.request_id, response.lines[0].text if response.lines else ""))
            return got

    with ThreadPoolExecutor(16) as pool:
        results = [answer for answers in pool.map(client, range(16)) for answer in answers]
    assert len(results) == 64
    assert all(text == lot_number(int(rid[3:])) for rid, text in results), \
        [r for r in results if r[1] != lot_number(int(r[0][3:]))]


def test_bad_image_is_invalid_argument_with_field_details(ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        ocr.Recognize(ocr_pb2.RecognizeRequest(encoded=b"GIF89a not really"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    (bad,) = details(caught.value)
    assert isinstance(bad, error_details_pb2.BadRequest)
    assert bad.field_violations[0].field == "image" and bad.field_violations[0].reason == "corrupt"
    assert ocr.Recognize(rec_request(3)).lines[0].text == lot_number(3)  # still serving


def test_bad_options_and_unknown_plugins_are_invalid_argument(ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    cases = {
        "options.box_thresh": ocr_pb2.Options(box_thresh=1.5),
        "options.plugins.names": ocr_pb2.Options(plugins=ocr_pb2.PluginSelection(names=["no_such_plugin"])),
    }
    for field, options in cases.items():
        with pytest.raises(grpc.RpcError) as caught:
            ocr.Recognize(ocr_pb2.RecognizeRequest(encoded=word_png("x"), options=options))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        (bad,) = details(caught.value)
        assert bad.field_violations[0].field == field, caught.value.details()


def test_plugins_chosen_per_request_add_fields(ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    from google.protobuf import struct_pb2

    plugin_options = struct_pb2.Struct()
    plugin_options.update({"regex_fields": {"lot": {"pattern": r"LOT(\d+)", "type": "int"}}})
    options = ocr_pb2.Options(use_det=False, use_cls=False, plugins=ocr_pb2.PluginSelection(
        names=["regex_fields"], options=plugin_options))
    response = ocr.Recognize(ocr_pb2.RecognizeRequest(encoded=word_png("LOT0042"), options=options))
    assert "lot" in response.fields.fields, response
    assert response.fields["lot"] == 42


def test_oversized_message_is_refused_and_the_agent_serves_on(ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        ocr.Recognize(ocr_pb2.RecognizeRequest(encoded=os.urandom(17 * 1024 * 1024)))
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in (caught.value.details() or "")
    assert ocr.Recognize(rec_request(4)).lines[0].text == lot_number(4)


def test_expired_deadline_is_dropped_before_gpu_work(ocr: ocr_pb2_grpc.OcrServiceStub, agent: BackgroundAgent) -> None:
    worker = agent.agent.worker
    dropped, served = worker.counts.dropped["deadline"], agent.agent.stats.snapshot().requests_total
    with worker.held():  # the request waits for the worker past its deadline
        with pytest.raises(grpc.RpcError) as caught:
            ocr.Recognize(rec_request(5), timeout=0.3)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    wait_for(lambda: worker.counts.dropped["deadline"] == dropped + 1)
    assert ocr.Recognize(rec_request(5)).lines[0].text == lot_number(5)
    assert agent.agent.stats.snapshot().requests_total == served + 2  # the expired one is counted, as failed


def test_a_request_cancelled_on_the_gpu_stops_at_the_next_stage_and_frees_the_worker(
        ocr: ocr_pb2_grpc.OcrServiceStub, agent: BackgroundAgent) -> None:
    import io

    from PIL import Image

    page = Image.new("RGB", (640, 480), "white")  # a det plan of its own and many lines: seconds on lavapipe
    for row in range(10):
        page.paste(Image.fromarray(word_pixels(f"LOT{row:04d} EXP2027-{row:02d}", 26)), (20, 10 + 46 * row))
    buffer = io.BytesIO()
    page.save(buffer, format="PNG")
    worker = agent.agent.worker
    stopped = worker.counts.stopped["client"]
    with capture_logs() as logs:
        call = ocr.Recognize.future(ocr_pb2.RecognizeRequest(request_id="abandoned", encoded=buffer.getvalue()))
        wait_for(lambda: worker.running == "abandoned")
        call.cancel()  # the client goes while its request is on the GPU
        wait_for(lambda: worker.counts.stopped["client"] == stopped + 1)
    assert call.cancelled()
    (line,) = [e for e in logs if e.get("event") == "request_stopped"]
    assert line["request_id"] == "abandoned" and line["who"] == "client", line
    assert line["after"] in {"decode", "det", "db", "cls", "rec"}  # never after its last stage: it was stopped
    (handled,) = [e for e in logs if e.get("event") == "request" and e.get("request_id") == "abandoned"]
    assert handled["status"] == "CANCELLED"
    assert ocr.Recognize(rec_request(7)).lines[0].text == lot_number(7)  # the worker serves the next one


def test_the_client_gives_lavapipe_a_longer_deadline(agent: BackgroundAgent) -> None:
    with OcrClient(agent.target) as client:
        assert client.ocr_timeout() == SLOW_OCR_TIMEOUT_S  # lavapipe, named: tens of seconds per photo
    assert ocr_timeout_for("vulkan", "NVIDIA H200") == OCR_TIMEOUT_S
    assert ocr_timeout_for("numpy", "numpy") == SLOW_OCR_TIMEOUT_S
    with OcrClient("127.0.0.1:1") as nobody:  # no status: the default, and the OCR call says what is wrong
        assert nobody.ocr_timeout() == OCR_TIMEOUT_S


def test_cancelled_stream_leaves_the_agent_serving(ocr: ocr_pb2_grpc.OcrServiceStub, agent: BackgroundAgent) -> None:
    stream = ocr.RecognizeStream(frame(rec_request(i)) for i in range(200, 240))
    first = next(stream)
    assert first.request_id == "id-200"
    stream.cancel()
    # the handlers end at once; the worker then drops their queued jobs one by one
    wait_for(lambda: agent.agent.stats.snapshot().in_flight == 0 and agent.agent.worker.queue_depth() == 0)
    assert agent.agent.stats.snapshot().in_flight == 0
    assert agent.agent.worker.queue_depth() == 0
    assert ocr.Recognize(rec_request(6)).lines[0].text == lot_number(6)


def test_status_watch_streams_updates(agent: BackgroundAgent, ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    from google.protobuf import duration_pb2

    with grpc.insecure_channel(agent.target) as channel:
        watch = status_pb2_grpc.StatusServiceStub(channel).WatchStatus(
            status_pb2.WatchStatusRequest(interval=duration_pb2.Duration(nanos=100_000_000)), timeout=120)
        first = next(watch).status
        assert first.state == status_pb2.SERVING_STATE_SERVING and first.sequence == 0
        assert first.queue_capacity == 32 and first.uptime.ToNanoseconds() > 0 and first.device
        assert first.backend == status_pb2.BACKEND_VULKAN and first.latency_window.ToNanoseconds() > 0
        assert {p.model for p in first.plans} <= {status_pb2.MODEL_KIND_DET, status_pb2.MODEL_KIND_CLS,
                                                  status_pb2.MODEL_KIND_REC, status_pb2.MODEL_KIND_ORI}
        ocr.Recognize(rec_request(7))
        later = next(watch).status
        while later.requests_total <= first.requests_total:
            later = next(watch).status
        assert later.sequence > first.sequence
        p50, p99 = later.latency_p50.ToNanoseconds(), later.latency_p99.ToNanoseconds()
        assert p50 > 0 and p99 >= p50
        assert later.pool_reserved_bytes >= later.pool_used_bytes > 0
        watch.cancel()


def test_health_and_reflection_list_the_services(agent: BackgroundAgent) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with grpc.insecure_channel(agent.target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "vkocr.v1.OcrService", "vkocr.v1.StatusService", "vkocr.v1.ModelsService",
                        "vkocr.liveness"):
            assert health.Check(health_pb2.HealthCheckRequest(service=service)).status == \
                health_pb2.HealthCheckResponse.SERVING, service
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        (answer,) = reflect.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        names = {s.name for s in answer.list_services_response.service}
        assert {"vkocr.v1.OcrService", "vkocr.v1.StatusService", "grpc.health.v1.Health"} <= names


def test_full_queue_is_resource_exhausted_with_a_retry_hint() -> None:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with running_agent(**{"server.queue_size": 1, "metrics.listen": "127.0.0.1:0"}) as background, \
            grpc.insecure_channel(background.target) as channel:
        stub = ocr_pb2_grpc.OcrServiceStub(channel)
        stub.Recognize(rec_request(0))  # plans recorded: the burst below meets a warm worker
        worker = background.agent.worker
        with worker.held():  # the worker takes at most one request and the queue holds one: the rest must fail
            futures = [stub.Recognize.future(rec_request(i)) for i in range(12)]
            wait_for(lambda: sum(f.done() for f in futures) >= 10)
            # health is answered while the queue is full and the worker busy
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
        ok, exhausted = [], []
        for i, future in enumerate(futures):
            try:
                ok.append((i, future.result(timeout=600).lines[0].text))
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err
                exhausted.append(err)
        assert exhausted and ok
        assert all(text == lot_number(i) for i, text in ok)
        retry = [d for d in details(exhausted[0]) if isinstance(d, error_details_pb2.RetryInfo)]
        assert retry and retry[0].retry_delay.ToTimedelta().total_seconds() > 0
        assert background.agent.stats.snapshot().rejected_total == len(exhausted)
        port = background.agent.metrics_server.port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as scrape:
            families = {f.name: f for f in text_string_to_metric_families(scrape.read().decode())}
        answered = {s.labels["code"]: s.value for s in families["vkocr_requests"].samples
                    if s.name == "vkocr_requests_total"}
        assert answered == {"OK": len(ok) + 1, "RESOURCE_EXHAUSTED": len(exhausted)}
        assert families["vkocr_rejected"].samples[0].value == len(exhausted)


def test_health_watch_through_load_serving_rebuild_serving() -> None:
    from vkocr.agent.ocr.pipeline import OcrPipeline

    may_load = threading.Event()

    def open_when_allowed() -> OcrPipeline:  # the real models, once the watch below is connected
        assert may_load.wait(120)
        return OcrPipeline.open("llvmpipe")

    background = start_agent(agent_config(), wait_serving=False, open_pipeline=open_when_allowed)
    seen: list[int] = []
    try:
        with grpc.insecure_channel(background.target) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(), timeout=600)

            def collect() -> None:
                try:
                    for update in watch:
                        seen.append(update.status)
                except grpc.RpcError:
                    pass

            reader = threading.Thread(target=collect)
            reader.start()
            wait_for(lambda: seen == [health_pb2.HealthCheckResponse.NOT_SERVING])
            may_load.set()
            assert background.agent.worker.loaded.wait(300)
            wait_for(lambda: seen[-1:] == [health_pb2.HealthCheckResponse.SERVING])
            stub = ocr_pb2_grpc.OcrServiceStub(channel)
            assert stub.Recognize(rec_request(8)).lines[0].text == lot_number(8)
            lost = background.agent.worker.pipeline
            assert lost is not None and lost.device is not None
            background.agent.worker.inject_device_loss()
            # the request that meets the lost device is answered after the rebuild, on the new device
            assert stub.Recognize(rec_request(9), timeout=600).lines[0].text == lot_number(9)
            wait_for(lambda: seen[-1:] == [health_pb2.HealthCheckResponse.SERVING])
            status = status_pb2_grpc.StatusServiceStub(channel).GetStatus(status_pb2.GetStatusRequest()).status
            assert status.device_rebuilds == 1 and status.state == status_pb2.SERVING_STATE_SERVING
            assert lost.device is None  # the failed pipeline closed its device (and instance) for good
            watch.cancel()
            reader.join(10)
    finally:
        background.stop(5)
    not_serving, serving = health_pb2.HealthCheckResponse.NOT_SERVING, health_pb2.HealthCheckResponse.SERVING
    assert seen == [not_serving, serving, not_serving, serving]


def test_a_device_that_cannot_be_rebuilt_hands_over_to_the_cpu() -> None:
    """device.cpu_fallback: when the lost device cannot be opened again, the CPU executor serves, the request
    that met the loss included, and the status says so."""
    from vkocr.agent.ocr.pipeline import OcrPipeline

    opened: list[OcrPipeline] = []

    def gpu_only_once() -> OcrPipeline:  # the first open works; every rebuild finds no device
        if opened:
            raise VulkanUnavailable("no Vulkan device (test: the GPU stays gone)")
        opened.append(OcrPipeline.open("llvmpipe"))
        return opened[0]

    background = start_agent(agent_config(**{"device.cpu_fallback": True}), open_pipeline=gpu_only_once)
    try:
        with grpc.insecure_channel(background.target) as channel:
            stub = ocr_pb2_grpc.OcrServiceStub(channel)
            first = stub.Recognize(rec_request(21), timeout=600)
            assert first.lines[0].text == lot_number(21) and first.device != "cpu"
            background.agent.worker.inject_device_loss()
            after = stub.Recognize(rec_request(22), timeout=600)
            assert after.lines[0].text == lot_number(22) and after.device == "cpu"
            status = status_pb2_grpc.StatusServiceStub(channel).GetStatus(status_pb2.GetStatusRequest()).status
            assert (status.state, status.backend, status.device, status.device_rebuilds) == (
                status_pb2.SERVING_STATE_SERVING, status_pb2.BACKEND_CPU, "cpu", 1)
            assert stub.Recognize(rec_request(23), timeout=600).lines[0].text == lot_number(23)
            assert opened[0].device is None  # the lost pipeline closed its device
    finally:
        background.stop(5)


def test_a_bug_of_ours_answers_internal_with_an_incident_and_the_agent_serves_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A recogniser whose dictionary is shorter than its classes (a deployment mistake the pipeline cannot
    turn into a client error): the reading request fails INTERNAL with an incident id in its ErrorInfo, the
    id the agent logged with the error, and the agent keeps answering: a boxes-only request on the same
    pipeline succeeds right after."""
    from vkocr.agent.cli.logs import configure_logging
    from vkocr.agent.ocr.pipeline import OcrPipeline

    configure_logging("info")  # as `vkocr serve` does: used as a library, vkocr prints nothing

    def short_dictionary() -> OcrPipeline:
        pipeline = OcrPipeline.open("llvmpipe")
        pipeline.charset = pipeline.charset[:40]  # the model still scores all 6625 classes
        return pipeline

    background = start_agent(agent_config(), open_pipeline=short_dictionary)
    try:
        with grpc.insecure_channel(background.target) as channel:
            stub = ocr_pb2_grpc.OcrServiceStub(channel)
            with pytest.raises(grpc.RpcError) as caught:
                stub.Recognize(rec_request(31), timeout=600)
            assert caught.value.code() == grpc.StatusCode.INTERNAL
            (info,) = [d for d in details(caught.value) if isinstance(d, error_details_pb2.ErrorInfo)]
            incident = dict(info.metadata)["incident_id"]
            assert len(incident) >= 8
            captured = capsys.readouterr()
            logged = [line for line in (captured.out + captured.err).splitlines() if incident in line]
            assert len(logged) == 1 and "internal_error" in logged[0] and "CharsetError" in logged[0]
            boxes_only = ocr_pb2.RecognizeRequest(request_id="id-32", encoded=word_png(lot_number(32)),
                                                  options=ocr_pb2.Options(use_rec=False, use_cls=False))
            reply = stub.Recognize(boxes_only, timeout=600)
            assert len(reply.lines) == 1 and reply.lines[0].text == ""
            status = status_pb2_grpc.StatusServiceStub(channel).GetStatus(status_pb2.GetStatusRequest()).status
            assert status.state == status_pb2.SERVING_STATE_SERVING
    finally:
        background.stop(5)


def test_plaintext_health_port_beside_a_tls_agent(tls_files: TlsFiles) -> None:
    """Kubelet probes speak plaintext only: with TLS on, a health-only port answers them, and nothing else."""
    overrides = {"tls.cert": str(tls_files.server_cert), "tls.key": str(tls_files.server_key),
                 "server.health_listen": "127.0.0.1:0"}
    with running_agent(**overrides) as background:
        health_target = f"127.0.0.1:{background.agent.health_port}"
        with grpc.insecure_channel(health_target) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="vkocr.v1.OcrService"), timeout=10)
            assert check.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as caught:  # no OCR on the plaintext port
                ocr_pb2_grpc.OcrServiceStub(channel).Recognize(rec_request(10), timeout=10)
            assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
        with grpc.insecure_channel(background.target) as channel:  # the main port stays TLS-only
            with pytest.raises(grpc.RpcError) as caught:
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
