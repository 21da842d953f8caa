"""Warm start through the model store: the version active at start and a version activated later record the
plans of `[plans] warm_shapes` on the activation's thread, before the GPU worker serves them; the status shows
the new version's plans, and the total of plans recorded keeps counting over the swap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.conftest import Bundles
from tests.agent.fleet.fleet_agents import WORD, WORD_SWAPPED, read_word, seed_store, store_agent, store_config
from vkocr.agent.fleet.rollout import upload_bundle
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.config_throughput import ThroughputConfig
from vkocr.agent.serving.proto_enums import enum_name
from vkocr.v1 import models_pb2, status_pb2

DETECT_LANES = ThroughputConfig().detect_lanes


def plans(client: OcrClient) -> dict[str, Any]:
    return {enum_name(status_pb2.ModelKind, m.model): m for m in client.status(timeout=10).plans}


def test_an_activated_version_is_warmed_before_it_serves(tmp_path: Path, release_key: KeyPair,
                                                         bundles: Bundles) -> None:
    store = seed_store(tmp_path / "store", release_key, bundles.v1)
    # no cls: fewer plans to record on lavapipe, and the bundles' det options (limit max 960) still apply
    config = store_config(store.root, release_key, **{"plans.warm_shapes": ["320x240"], "ocr.use_cls": False})
    with capture_logs() as logs, store_agent(config) as background, OcrClient(background.target) as client:
        at_start = plans(client)
        # one det shape, recorded on each detection lane
        assert at_start["det"].plans == DETECT_LANES and at_start["rec"].plans > 0 and at_start["cls"].plans == 0
        assert upload_bundle(client, bundles.v2).version == "2.0.0"
        done = client.models.Activate(models_pb2.ActivateRequest(version="2.0.0"), timeout=300)
        assert done.active_version == "2.0.0"
        after = plans(client)
        assert read_word(client, WORD) == (WORD_SWAPPED, "2.0.0")
    warmed = [i for i, e in enumerate(logs) if e["event"] == "plans_warmed"]
    assert len(warmed) == 2 and all(logs[i]["count"] > 0 and logs[i]["skipped"] == 0 for i in warmed)
    swap = next(i for i, e in enumerate(logs) if e["event"] == "activation_step" and e["step"] == "swap")
    assert warmed[1] < swap  # the same thread: warmed, then handed over
    # The new version's own plans (its warm-up, and its self-test's det shape), and totals over both versions.
    assert after["det"].plans >= 1 and after["rec"].plans >= at_start["rec"].plans
    assert after["det"].recorded_total >= at_start["det"].recorded_total + 1
    assert after["rec"].recorded_total >= at_start["rec"].recorded_total + logs[warmed[1]]["plans"]["rec"]
