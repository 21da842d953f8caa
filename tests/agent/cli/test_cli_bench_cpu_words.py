"""The benches on the CPU backend speak of the CPU backend: no GPU waits, no GPU busy figure, and every n/a in
their tables says why. Real runs, as small as the benches allow."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkocr.agent.cli.main import main

SMALL = ["--device", "cpu", "--rendered", "2"]


def report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(argv) == 0
    return capsys.readouterr().out.splitlines()


def test_bench_stream_on_the_cpu_backend(capsys: pytest.CaptureFixture[str]) -> None:
    lines = report(["bench", "stream", *SMALL, "--passes", "1", "--no-rapidocr", "--no-warm", "--models", "ppocrv4"],
                   capsys)
    assert not [line for line in lines if "GPU" in line], lines
    assert any("n/a" in line for line in lines[2:4])  # the plans columns…
    assert "plans n/a: the CPU backend keeps no plans" in lines[-1]  # …and why
    assert any(line.startswith("reference (RapidOCR): not run (--no-rapidocr") for line in lines)


def test_bench_agent_on_the_cpu_backend(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    monkeypatch.setenv("VKOCR_SHARED", str(tmp_path))  # a clone's view: no compat images, the rendered ones only
    lines = report(["bench", "agent", *SMALL, "--clients", "1", "--modes", "unary", "--runs", "default",
                    "--no-det", "--no-cls"], capsys)
    [row] = [line for line in lines if line.startswith("default, unary")]
    assert " n/a " in row and "%" not in row  # no "GPU busy 0%"
    assert "GPU busy n/a: the CPU backend has no GPU to be busy" in lines
