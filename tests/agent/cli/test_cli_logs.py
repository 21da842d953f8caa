"""What a person sees in the logs: the agent logs JSON lines however it starts (bare, ./run.sh's config/dev.toml,
the deployment files), the top-level --log-level/--log-json reach `vkocr serve`; the CPU backend's fallback is a
warning once per process for the agent, and no warning at all for a local command on a machine without a GPU
(`vkocr devices` says why); `metrics_listening` is logged once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import structlog
from PIL import Image

from tests.agent.agents import FONT, running_agent, word_pixels
from tests.paths import ROOT
from vkocr.agent.cli.main import main
from vkocr.agent.ocr.fallback_notice import FallbackNotice
from vkocr.agent.serving.config import load_config


@pytest.mark.parametrize("config", [None, "config/dev.toml", "deploy/agent.example.toml", "deploy/agent.image.toml"])
def test_the_agent_logs_json_at_info_however_it_starts(config: str | None) -> None:
    loaded = load_config(ROOT / config if config else None, env={})
    assert (loaded.logging.json, loaded.logging.level) == (True, "info")


def test_the_top_level_log_flags_reach_serve(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--log-level", "debug", "--log-json", "serve", "--print-config"]) == 0
    printed = capsys.readouterr().out
    assert '[logging]\nlevel = "debug"\njson = true' in printed
    assert main(["serve", "--config", str(ROOT / "config/dev.toml"), "--print-config"]) == 0
    assert '[logging]\nlevel = "info"\njson = true' in capsys.readouterr().out


def test_the_fallback_warns_the_agent_once_and_a_local_command_only_where_a_gpu_is_unusable() -> None:
    agent = FallbackNotice()
    assert [agent.level(has_gpu=False) for _ in range(3)] == ["warning", "info", "info"]
    local = FallbackNotice()
    local.quiet_without_gpu = True
    assert local.level(has_gpu=False) == "info"
    assert local.level(has_gpu=True) == "warning"  # a GPU there but denied or broken: a person should know


@pytest.mark.skipif(not os.path.exists(FONT), reason="fonts-dejavu-core renders the test image")
def test_a_local_command_on_a_machine_without_a_gpu_prints_no_warning(tmp_path: Path) -> None:
    image = tmp_path / "word.png"
    Image.fromarray(word_pixels("LOT2041")).save(image)
    no_driver = {**os.environ, "VK_DRIVER_FILES": str(tmp_path / "none.json"),
                 "VK_ICD_FILENAMES": str(tmp_path / "none.json"), "VKOCR_DEVICE": ""}
    done = subprocess.run([sys.executable, "-m", "vkocr.agent.cli.main", "ocr", str(image), "--no-det", "--no-cls",
                           "--models", "ppocrv4"], capture_output=True, text=True, cwd=ROOT, env=no_driver,
                          timeout=300, check=False)
    assert done.returncode == 0 and "LOT2041" in done.stdout
    assert done.stderr == ""  # the CPU is what a machine without a GPU runs on: nothing to warn about
    devices = subprocess.run([sys.executable, "-m", "vkocr.agent.cli.main", "devices"], capture_output=True,
                             text=True, cwd=ROOT, env=no_driver, timeout=120, check=False)
    assert "chosen: the cpu backend: no usable GPU" in devices.stdout  # where it is said instead


def test_metrics_listening_is_logged_once() -> None:
    with structlog.testing.capture_logs() as logs, running_agent(**{"device.select": "cpu",
                                                                     "metrics.listen": "127.0.0.1:0"}):
        pass
    assert [e["event"] for e in logs].count("metrics_listening") == 1
