"""The pieces of the fleet tooling that need no agent: soak gates over real AgentStatus messages, rollout
waves, the development configuration and its relative paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from vkocr.v1 import status_pb2

from agent.config import load_config
from agent.fleet import Gates, evaluate_soak, upload_id_for, waves

ROOT = Path(__file__).resolve().parents[2]


def status(requests: int, errors: int, *, version: str = "2.0.0", state: int = status_pb2.SERVING,
           p99: float = 10.0) -> status_pb2.AgentStatus:
    return status_pb2.AgentStatus(state=state, model_version=version, requests_total=requests, errors_total=errors,
                                  latency_p99_ms=p99)


def test_a_quiet_healthy_soak_passes() -> None:
    assert evaluate_soak([status(5, 1), status(5, 1)], ["SERVING"], "2.0.0", Gates()) is None


def test_errors_are_counted_during_the_soak_only() -> None:
    samples = [status(100, 40), status(300, 41)]  # 40 errors before the soak, 1 in 200 requests during it
    assert evaluate_soak(samples, ["SERVING"], "2.0.0", Gates(max_error_rate=0.01)) is None
    assert evaluate_soak(samples, ["SERVING"], "2.0.0", Gates(max_error_rate=0.001)) == \
        "error rate 1/200 (0.5%) above 0.1%"


@pytest.mark.parametrize("samples, health, gates, why", [
    ([status(0, 0)], ["SERVING", "NOT_SERVING"], Gates(), "health went NOT_SERVING"),
    ([status(0, 0), status(0, 0, state=status_pb2.REBUILDING)], ["SERVING"], Gates(), "state REBUILDING"),
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
