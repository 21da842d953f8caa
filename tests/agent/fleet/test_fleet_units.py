"""The pieces of the fleet tooling that need no agent: soak gates over real AgentStatus messages, rollout
waves, which agents a rollback must undo, retries against an address nobody listens on, the development
configuration and its relative paths."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from structlog.testing import capture_logs

from tests.paths import ROOT
from vkocr.agent.fleet.rollout import (
    Gates,
    active_version,
    evaluate_soak,
    switched_to,
    upload_bundle,
    upload_id_for,
    waves,
)
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.config import load_config
from vkocr.agent.serving.durations import duration_from_ms
from vkocr.v1 import status_pb2


def status(requests: int, errors: int, *, version: str = "2.0.0", state: int = status_pb2.SERVING_STATE_SERVING,
           p99: float = 10.0) -> status_pb2.AgentStatus:
    return status_pb2.AgentStatus(state=state, model_version=version, requests_total=requests, errors_total=errors,
                                  latency_p99=duration_from_ms(p99))


def test_a_quiet_healthy_soak_passes() -> None:
    assert evaluate_soak([status(5, 1), status(5, 1)], ["SERVING"], "2.0.0", Gates()) is None


def test_errors_are_counted_during_the_soak_only() -> None:
    samples = [status(100, 40), status(300, 41)]  # 40 errors before the soak, 1 in 200 requests during it
    assert evaluate_soak(samples, ["SERVING"], "2.0.0", Gates(max_error_rate=0.01)) is None
    assert evaluate_soak(samples, ["SERVING"], "2.0.0", Gates(max_error_rate=0.001)) == \
        "error rate 1/200 (0.5%) above 0.1%"


@pytest.mark.parametrize("samples, health, gates, why", [
    ([status(0, 0)], ["SERVING", "NOT_SERVING"], Gates(), "health went NOT_SERVING"),
    ([status(0, 0), status(0, 0, state=status_pb2.SERVING_STATE_REBUILDING)], ["SERVING"], Gates(),
     "state REBUILDING"),
    ([status(0, 0, version="1.0.0")], ["SERVING"], Gates(), "serves 1.0.0, not 2.0.0"),
    ([status(1, 0, p99=900.0)], ["SERVING"], Gates(max_p99_ms=500), "p99 latency 900 ms above 500 ms"),
    ([], ["SERVING"], Gates(), "no status received during the soak"),
])
def test_failed_gates_say_why(samples: list[status_pb2.AgentStatus], health: list[str], gates: Gates,
                              why: str) -> None:
    assert evaluate_soak(samples, health, "2.0.0", gates) == why


def test_waves() -> None:
    agents = [f"a{i}" for i in range(1, 8)]
    assert waves(agents, 1, 3) == [["a1"], ["a2", "a3", "a4"], ["a5", "a6", "a7"]]
    assert waves(agents, 0, 5) == [["a1", "a2", "a3", "a4", "a5"], ["a6", "a7"]]
    assert waves(agents[:2], 3, 1) == [["a1", "a2"]]
    with pytest.raises(ValueError):
        waves(agents, 1, 0)


def test_upload_ids_name_the_content() -> None:
    assert upload_id_for("ab" * 32) == "bundle-" + "ab" * 20


def test_the_development_config_resolves_paths_from_its_folder() -> None:
    config = load_config(ROOT / "config" / "dev.toml", env={})
    assert config.server.listen == "127.0.0.1:50051" and not config.tls_enabled
    assert config.models.store == str(ROOT / "state" / "models")
    assert config.models.trusted_keys == [str(ROOT / "state" / "keys" / "dev.pub")]
    assert config.auth.dev_allow_loopback


def test_relative_paths_from_the_environment_stay_relative(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[models]\nstore = "store"\ndir = "/opt/models"\n[tls]\ncert = "tls/a.pem"\nkey = "tls/a.key"\n')
    config = load_config(path, env={"VKOCR_MODELS_TRUSTED_KEYS": "keys/a.pub"})
    assert config.models.store == str(tmp_path / "store") and config.models.dir == "/opt/models"
    assert (config.tls.cert, config.tls.key) == (str(tmp_path / "tls" / "a.pem"), str(tmp_path / "tls" / "a.key"))
    assert config.models.trusted_keys == ["keys/a.pub"]


@pytest.mark.parametrize("active, old, version, switched", [
    ("2.0.0", "1.0.0", "2.0.0", True),  # Activate failed on the client's side, yet the agent switched
    ("1.0.0", "1.0.0", "2.0.0", False),  # refused, or still activating: the old version is active
    (None, "1.0.0", "2.0.0", False),  # never answered: unknown, said so in its row
    ("2.0.0", "2.0.0", "2.0.0", False),  # it had the new version before the rollout: never rolled back
    ("3.0.0", "1.0.0", "2.0.0", False),
])
def test_an_agent_whose_activation_failed_is_rolled_back_when_it_switched_all_the_same(
        active: str | None, old: str, version: str, switched: bool) -> None:
    assert switched_to(active, old, version) is switched


def test_an_unreachable_agent_is_asked_again_for_its_active_version() -> None:
    with OcrClient("127.0.0.1:1") as client, capture_logs() as logs:
        assert active_version(client, attempts=3, pause_s=0.01) is None
    assert [e["attempt"] for e in logs if e["event"] == "active_version_unknown"] == [1, 2, 3]


def test_an_upload_retries_when_its_status_cannot_be_asked(tmp_path: Path) -> None:
    """UploadStatus, the first call of each attempt, failing UNAVAILABLE is retried like the upload itself."""
    bundle = tmp_path / "some.vkb"
    bundle.write_bytes(b"bundle bytes")
    with OcrClient("127.0.0.1:1") as client, capture_logs() as logs, pytest.raises(grpc.RpcError) as info:
        upload_bundle(client, bundle, attempts=3)
    assert info.value.code() is grpc.StatusCode.UNAVAILABLE
    assert [e["attempt"] for e in logs if e["event"] == "upload_retry"] == [1, 2]
