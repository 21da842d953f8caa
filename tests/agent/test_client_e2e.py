"""`vkocr client …` and OcrClient against real agents on loopback ports (real models on the Vulkan device):
output against the local `vkocr ocr`, failed calls, streams, status and health, TLS and mutual TLS, round
robin over two agents, and `vkocr serve --print-config` with a file, the environment and flags."""

from __future__ import annotations

import json
import os
import socket
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path
from typing import Any

import grpc
import pytest
from PIL import Image

from tests.agent.agents import FONT, lot_number, running_agent, word_pixels, word_png
from tests.agent.certs import TlsFiles
from vkocr.agent.cli.logs import configure_logging
from vkocr.agent.cli.main import main
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.serving.background import BackgroundAgent
from vkocr.agent.serving.client import OcrClient

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

REC_ONLY_FLAGS = ["--no-det", "--no-cls"]  # the cheapest real request: the whole image is one line


@pytest.fixture(scope="module", autouse=True)
def logs_on_stderr() -> None:
    """The in-process agents log where `vkocr serve` does, on stderr (structlog's default is stdout, where it
    would mix with the client's JSON lines)."""
    configure_logging("warning")


@pytest.fixture(scope="module")
def agent(logs_on_stderr: None) -> Iterator[BackgroundAgent]:
    with running_agent() as background:
        yield background


def save_word(folder: Path, text: str) -> Path:
    path = folder / f"{text}.png"
    path.write_bytes(word_png(text))
    return path


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def texts(record: dict[str, Any]) -> list[str]:
    return [line["text"] for line in record["lines"]]


def flat(box: list[list[float]]) -> list[float]:
    return [coordinate for point in box for coordinate in point]


def client_stderr(err: str) -> list[str]:
    """The client's own lines on stderr (an in-process agent may log there too)."""
    return [line for line in err.splitlines() if line.startswith("vkocr client: ")]


# --- output, failures, stream, watch, health ----------------------------------------------------------------


def test_client_ocr_json_matches_local_ocr(agent: BackgroundAgent, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    page = Image.new("RGB", (320, 320), "white")  # square: the detector's smallest input on this side
    page.paste(Image.fromarray(word_pixels("LOT4821", 30)), (20, 60))
    page.paste(Image.fromarray(word_pixels("EXP2027-03", 30)), (20, 200))
    path = tmp_path / "label.png"
    page.save(path)

    assert main(["client", "ocr", str(path), "--target", agent.target, "--json"]) == 0
    (remote,) = json_lines(capsys.readouterr().out)
    assert main(["ocr", str(path), "--json", "--device", "llvmpipe", "--models", "ppocrv4"]) == 0  # the agent's
    (local,) = json_lines(capsys.readouterr().out)

    for record in (remote, local):
        assert record["image"] == str(path)
        assert {"image", "lines", "timings_ms", "device"} <= set(record)
        for line in record["lines"]:
            assert set(line) >= {"text", "score", "box", "angle"}
            assert len(line["box"]) == 4 and all(len(point) == 2 for point in line["box"])
    assert texts(remote) == texts(local) == ["LOT4821", "EXP2027-03"]
    for ours, theirs in zip(remote["lines"], local["lines"], strict=True):
        assert ours["angle"] == theirs["angle"]
        assert ours["score"] == pytest.approx(theirs["score"], abs=1e-5)  # float32 on the wire
        assert flat(ours["box"]) == pytest.approx(flat(theirs["box"]), abs=1e-3)
    assert {"det", "rec", "total"} <= set(remote["timings_ms"])
    assert remote["model_version"] == "ppocrv4-rapidocr-1.4.4"
    # The same device, named the same way by both: the device's name (e.g. "llvmpipe (LLVM 15.0.6, 256 bits)").
    assert remote["device"] == local["device"] == agent.agent.state.get().device != ""


def test_a_failed_call_prints_the_code_name_and_details(agent: BackgroundAgent, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n but not really")
    good = save_word(tmp_path, lot_number(11))
    code = main(["client", "ocr", str(corrupt), str(good), "--target", agent.target, "--json",
                 *REC_ONLY_FLAGS])
    out, err = capsys.readouterr()
    assert code == 1
    (failure,) = client_stderr(err)
    assert failure.startswith(f"vkocr client: {corrupt}: INVALID_ARGUMENT: ")
    assert "(corrupt)" in failure  # the BadRequest detail's reason
    bad, ok = json_lines(out)  # a bad image does not stop the next one
    assert bad["image"] == str(corrupt) and bad["error"].startswith("INVALID_ARGUMENT: ")
    assert ok["image"] == str(good) and texts(ok) == [lot_number(11)]


def test_commands_against_an_unreachable_target_fail_with_unavailable(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    image = save_word(tmp_path, lot_number(13))
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{sock.getsockname()[1]}"
    for command in (["stream", str(image), *REC_ONLY_FLAGS], ["watch", "--count", "1"], ["health"]):
        assert main(["client", *command, "--target", target, "--timeout", "10s"]) == 1, command
        out, err = capsys.readouterr()
        assert out == ""
        (failure,) = client_stderr(err)
        assert failure.startswith("vkocr client: UNAVAILABLE: "), command


def test_a_call_past_its_deadline_fails_with_deadline_exceeded(agent: BackgroundAgent, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    image = save_word(tmp_path, lot_number(12))
    code = main(["client", "ocr", str(image), str(image), "--target", agent.target, "--timeout", "1ms",
                 *REC_ONLY_FLAGS])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    (failure,) = client_stderr(err)  # the agent cannot answer in time: the second image is not tried
    assert failure.startswith(f"vkocr client: {image}: DEADLINE_EXCEEDED: ")


def test_client_stream_answers_every_image_in_order(agent: BackgroundAgent, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    images = [save_word(tmp_path, lot_number(i)) for i in (21, 22)]
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff not a jpeg")
    names = [str(images[0]), str(broken), str(images[1])]
    code = main(["client", "stream", *names, "--target", agent.target, "--json", *REC_ONLY_FLAGS])
    out, err = capsys.readouterr()
    assert code == 1  # one image failed; the stream carried on
    first, bad, last = json_lines(out)
    assert [first["image"], bad["image"], last["image"]] == names
    assert texts(first) == [lot_number(21)] and texts(last) == [lot_number(22)]
    assert bad["error"].startswith("INVALID_ARGUMENT: ")
    assert client_stderr(err) == [f"vkocr client: {broken}: {bad['error']}"]

    assert main(["client", "stream", str(images[0]), "--target", agent.target, *REC_ONLY_FLAGS]) == 0
    readable = capsys.readouterr().out.splitlines()
    assert readable[0].startswith(f"{images[0]}: 1 line (") and readable[1].endswith(f"  {lot_number(21)}")


def test_client_ocr_and_stream_read_what_vkocr_ocr_reads(agent: BackgroundAgent, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory (its images, sorted), a PDF (each page, rendered here) and `-` (stdin), as `vkocr ocr`."""
    import io
    import sys

    folder = tmp_path / "shots"
    folder.mkdir()
    for i in (42, 41):
        save_word(folder, lot_number(i))
    pages = [Image.fromarray(word_pixels(lot_number(i))).convert("RGB") for i in (43, 44)]
    pdf = tmp_path / "labels.pdf"
    pages[0].save(pdf, format="PDF", save_all=True, append_images=pages[1:], resolution=72.0)
    stdin = word_png(lot_number(45))
    names = [str(folder / f"{lot_number(41)}.png"), str(folder / f"{lot_number(42)}.png"),
             f"{pdf}#page=1", f"{pdf}#page=2", "-"]
    for command in ("ocr", "stream"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        assert main(["client", command, str(folder), str(pdf), "-", "--pdf-dpi", "72", "--target", agent.target,
                     "--json", *REC_ONLY_FLAGS]) == 0, command
        records = json_lines(capsys.readouterr().out)
        assert [r["image"] for r in records] == names, command
        assert [texts(r) for r in records] == [[lot_number(i)] for i in (41, 42, 43, 44, 45)], command
    assert main(["client", "ocr", "-", "-", "--target", agent.target]) == 2  # stdin can be read once
    assert "- (standard input) can be given once" in capsys.readouterr().err


def test_client_watch_and_health(agent: BackgroundAgent, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["client", "watch", "--target", agent.target, "--count", "2", "--interval", "100ms",
                 "--json"]) == 0
    first, second = json_lines(capsys.readouterr().out)
    assert (first["sequence"], second["sequence"]) == (0, 1)
    for update in (first, second):
        assert update["state"] == "SERVING"
        assert update["device"] == agent.agent.state.get().device
        assert update["model_version"] == "ppocrv4-rapidocr-1.4.4" and update["queue_capacity"] == 32
    assert main(["client", "watch", "--target", agent.target, "--count", "1"]) == 0
    line = capsys.readouterr().out
    assert "#0  SERVING  " in line and "queue 0/32" in line

    assert main(["client", "health", "--target", agent.target]) == 0
    assert capsys.readouterr().out == "SERVING\n"
    assert main(["client", "health", "--target", agent.target, "--service", "vkocr.v1.OcrService"]) == 0
    assert capsys.readouterr().out == "SERVING\n"
    assert main(["client", "health", "--target", agent.target, "--watch", "--count", "1"]) == 0
    assert capsys.readouterr().out == "SERVING\n"


# --- TLS ----------------------------------------------------------------------------------------------------


def test_tls_agent(tls_files: TlsFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = save_word(tmp_path, lot_number(31))
    tls = {"tls.cert": str(tls_files.server_cert), "tls.key": str(tls_files.server_key)}
    with running_agent(**tls) as background:
        target = ["--target", background.target]
        assert main(["client", "health", *target, "--tls-ca", str(tls_files.ca)]) == 0
        assert capsys.readouterr().out == "SERVING\n"
        assert main(["client", "ocr", str(image), *target, "--tls-ca", str(tls_files.ca), "--json",
                     *REC_ONLY_FLAGS]) == 0
        (answer,) = json_lines(capsys.readouterr().out)
        assert texts(answer) == [lot_number(31)]

        # A plaintext client meets a TLS agent: the connection fails, the call says so and exits 1.
        assert main(["client", "health", *target, "--timeout", "10s"]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        (failure,) = client_stderr(err)
        assert failure.startswith("vkocr client: UNAVAILABLE: ")
        with OcrClient(background.target, timeout=10) as plaintext, pytest.raises(grpc.RpcError) as caught:
            plaintext.health()
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_agent(tls_files: TlsFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = save_word(tmp_path, lot_number(32))
    mtls = {"tls.cert": str(tls_files.server_cert), "tls.key": str(tls_files.server_key),
            "tls.client_ca": str(tls_files.ca)}
    with running_agent(**mtls) as background:
        ca = ["--target", background.target, "--tls-ca", str(tls_files.ca)]
        identity = ["--tls-cert", str(tls_files.client_cert), "--tls-key", str(tls_files.client_key)]

        # Without a client certificate the handshake is refused.
        assert main(["client", "health", *ca, "--timeout", "10s"]) == 1
        (failure,) = client_stderr(capsys.readouterr().err)
        assert failure.startswith("vkocr client: UNAVAILABLE: ")
        with (OcrClient(background.target, ca=tls_files.ca, timeout=10) as anonymous,
              pytest.raises(grpc.RpcError) as caught):
            anonymous.recognize(word_png(lot_number(33)), use_det=False, use_cls=False)
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE

        # With one it is served.
        assert main(["client", "health", *ca, *identity]) == 0
        assert capsys.readouterr().out == "SERVING\n"
        assert main(["client", "ocr", str(image), *ca, *identity, "--json", *REC_ONLY_FLAGS]) == 0
        (answer,) = json_lines(capsys.readouterr().out)
        assert texts(answer) == [lot_number(32)]
        # The refused calls never reached the OCR service.
        assert background.agent.stats.snapshot().requests_total == 1


# --- several agents -----------------------------------------------------------------------------------------


def test_round_robin_spreads_requests_over_two_agents(agent: BackgroundAgent) -> None:
    with running_agent() as second:
        agents = (agent, second)
        before = [a.agent.stats.snapshot().requests_total for a in agents]
        with OcrClient([agent.target, second.target], timeout=120) as client, ThreadPoolExecutor(2) as pool:
            read = list(pool.map(lambda i: client.recognize(word_png(lot_number(i)), use_det=False,
                                                            use_cls=False), range(40, 60)))
        grew = [a.agent.stats.snapshot().requests_total - b for a, b in zip(agents, before, strict=True)]
    assert [r.lines[0].text for r in read] == [lot_number(i) for i in range(40, 60)]
    assert sum(grew) == 20
    assert all(n > 0 for n in grew), grew


# --- configuration ------------------------------------------------------------------------------------------


def test_print_config_shows_file_then_environment_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('[server]\nlisten = "127.0.0.1:6000"\nqueue_size = 8\ngrace_s = 3\n\n'
                      '[ocr]\ntext_score = 0.6\n')
    monkeypatch.setenv("VKOCR_SERVER_QUEUE_SIZE", "16")  # the environment beats the file
    monkeypatch.setenv("VKOCR_SERVER_LISTEN", "127.0.0.1:7000")
    assert main(["serve", "--config", str(config), "--listen", "127.0.0.1:7001", "--print-config"]) == 0
    printed = tomllib.loads(capsys.readouterr().out)  # what it prints is a config file itself
    assert printed["server"]["listen"] == "127.0.0.1:7001"  # the flag beats both
    assert printed["server"]["queue_size"] == 16
    assert printed["server"]["grace_s"] == 3.0  # from the file alone
    assert printed["server"]["stream_window"] == 8  # the default
    assert printed["ocr"]["text_score"] == 0.6  # the file's, among every option at its default
    assert printed["ocr"]["thresh"] == OcrOptions().thresh and len(printed["ocr"]) == len(fields(OcrOptions))
    assert printed["tls"] == {"cert": "", "key": "", "client_ca": ""}


@pytest.mark.parametrize(("toml", "env", "flags", "names"), [
    ("[server]\nqueue_sise = 8\n", {}, [], ["server.queue_sise", "agent.toml"]),
    ("[serve]\nlisten = \"127.0.0.1:1\"\n", {}, [], ["[serve]"]),
    ("[server]\nqueue_size = \"eight\"\n", {}, [], ["server.queue_size must be int"]),
    ("[server]\nlisten = \"0.0.0.0:50051\"\n", {}, [], ["0.0.0.0", "server.allow_remote_plaintext"]),
    ("", {}, ["--listen", "0.0.0.0:50051"], ["0.0.0.0", "server.allow_remote_plaintext"]),
    ("", {"VKOCR_SERVER_QUEUE_SIZE": "lots"}, [], ["VKOCR_SERVER_QUEUE_SIZE", "'lots'"]),
    ("[tls]\ncert = \"/etc/vkocr/agent.pem\"\n", {}, [], ["[tls]", "key"]),
], ids=["unknown-key", "unknown-section", "wrong-type", "plaintext-on-0.0.0.0", "plaintext-flag", "bad-env",
        "cert-without-key"])
def test_a_bad_config_exits_2_naming_the_key(
    toml: str, env: dict[str, str], flags: list[str], names: list[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(toml)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["serve", "--config", str(config), *flags, "--print-config"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("vkocr: error: ") and len(err.splitlines()) == 1
    for name in names:
        assert name in err

