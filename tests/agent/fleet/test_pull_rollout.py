"""Pull mode end to end: a real Mosquitto and registry on loopback, three real agents (CPU backend) whose fleet
client follows the broker, and `vkocr fleet rollout|status|rollback` as an operator runs them.

The tests run in order on one fleet (agents take seconds to start): a rollout with one board offline that catches
up when it starts again; a rollback; a failing self-test that stops the wave; desired states naming an untrusted
signer or an older version, which install nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.brokers import MOSQUITTO, REGISTRY, mosquitto, registry
from tests.agent.fleet.conftest import Bundles
from tests.agent.fleet.fleet_agents import make_bundle
from tests.agent.fleet.pull_fleet import BOARDS, FLEET, GROUP, Fleet, push
from vkocr.agent.fleet import topics
from vkocr.agent.fleet.topics import Desired

pytestmark = pytest.mark.skipif(not (Path(REGISTRY).exists() and shutil.which(MOSQUITTO)),
                                reason="mosquitto and docker-registry (./test.sh installs them)")
WAIT_S = 180.0  # a board's update: pull, verify, load, self-test on a shared 2-core machine


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, bundles: Bundles, release_key: KeyPair) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("pull-fleet")
    with mosquitto(work / "broker", FLEET, BOARDS) as broker, registry(work / "registry") as oci:
        f = Fleet(broker, oci, release_key, work)
        f.seed(bundles.v1)
        try:
            for board in BOARDS:
                f.start(board)
            yield f
        finally:
            f.stop_all()


@pytest.fixture(scope="module")
def refs(fleet: Fleet, bundles: Bundles) -> dict[str, str]:
    return {"1.0.0": push(fleet.oci, bundles.v1, "ocr/labels", "1.0.0"),
            "2.0.0": push(fleet.oci, bundles.v2, "ocr/labels", "2.0.0")}


def reported(fleet: Fleet) -> dict[str, tuple[str, str, bool]]:
    """board → (version, result, online), as any operator reads it from the broker."""
    with fleet.view() as view:
        return {r.board: (r.version, r.result, r.online) for r in view.boards(GROUP)}


def wait_boards(fleet: Fleet, done: dict[str, str], result: str = "", timeout: float = WAIT_S) -> None:
    """Until each board named reports serving the version given (and `result`, that of its last update)."""
    with fleet.view() as view:
        assert view.wait_for(lambda: all((s := view.states.get(b)) is not None and s.version == v
                                         and s.health == "SERVING" and (not result or s.result == result)
                                         for b, v in done.items()), timeout), \
            {b: view.states.get(b) for b in done}


def test_rollout_with_a_board_offline_that_catches_up(fleet: Fleet, refs: dict[str, str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    wait_boards(fleet, dict.fromkeys(BOARDS, "1.0.0"))
    # 1.0.0 is what they serve: the group's desired state becomes it at once (the baseline to roll back to)
    assert fleet.cli("rollout", f"{fleet.oci}/ocr/labels:1.0.0", "--canary", "1", "--batch", "50%",
                     "--soak", "0.1s") == 0
    capsys.readouterr()

    fleet.stop("b3")
    code = fleet.cli("rollout", f"{fleet.oci}/ocr/labels:2.0.0", "--canary", "1", "--batch", "50%", "--soak", "1s",
                     "--json")
    out, err = capsys.readouterr()
    assert code == 0, err
    answer = json.loads(out)
    assert answer["rollout"]["status"] == "done" and answer["rollout"]["pending"] == ["b3"]
    assert answer["rollout"]["waves"] == [["b1"], ["b2", "b3"]] and answer["rollout"]["bundle"] == refs["2.0.0"]
    assert "pending (offline, will catch up): b3" in err
    assert reported(fleet) == {"b1": ("2.0.0", "installed", True), "b2": ("2.0.0", "installed", True),
                               "b3": ("1.0.0", "installed", False)}

    # another operator's status sees the same, from the broker alone
    assert fleet.cli("status", "--json") == 0
    status = json.loads(capsys.readouterr().out)
    assert status["desired"][GROUP]["version"] == "2.0.0"
    assert [(b["board"], b["online"], b["version"]) for b in status["boards"]] == [
        ("b1", True, "2.0.0"), ("b2", True, "2.0.0"), ("b3", False, "1.0.0")]

    fleet.start("b3")  # back: it reads the group's retained desired state and installs 2.0.0
    wait_boards(fleet, {"b3": "2.0.0"}, result="installed")
    assert fleet.active("b3") == "2.0.0"


def test_rollback_takes_the_group_back(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    assert fleet.cli("rollback", "--wave-timeout", f"{WAIT_S:g}s") == 0
    out, err = capsys.readouterr()
    assert "group line-a goes back to 1.0.0" in err
    assert all(fleet.active(b) == "1.0.0" for b in BOARDS)
    assert {b: v for b, (v, _r, _o) in reported(fleet).items()} == dict.fromkeys(BOARDS, "1.0.0")


def test_a_failing_self_test_stops_the_wave(fleet: Fleet, release_key: KeyPair, selftest_image: Path,
                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = make_bundle(tmp_path / "labels-2.1.0.vkb", "2.1.0", release_key, selftest_image, "LOT9999")
    push(fleet.oci, bad, "ocr/labels", "2.1.0")
    code = fleet.cli("rollout", f"{fleet.oci}/ocr/labels:2.1.0", "--canary", "1", "--batch", "1", "--soak", "0.1s")
    out, err = capsys.readouterr()
    assert code == 1
    assert "rollout stopped: 1 failed (at most 0 allowed): b1: activation of 2.1.0 failed at self_tests" in err
    assert "wave 2/" not in err  # no board beyond the canary was asked
    states = reported(fleet)
    assert states["b1"][:2] == ("1.0.0", "failed")  # the old version still serves
    assert states["b2"][0] == states["b3"][0] == "1.0.0" and all(fleet.active(b) == "1.0.0" for b in BOARDS)
    with fleet.view() as view:
        assert view.rollouts[GROUP].status == "stopped" and view.desired[GROUP].version == "1.0.0"
        assert "LOT9999" in view.states["b1"].self_test


def test_an_untrusted_signer_or_an_older_version_installs_nothing(
        fleet: Fleet, bundles: Bundles, intruder_key: KeyPair, selftest_image: Path, tmp_path: Path) -> None:
    intruders = make_bundle(tmp_path / "labels-9.0.0.vkb", "9.0.0", intruder_key, selftest_image, "LOT0042")
    untrusted = push(fleet.oci, intruders, "ocr/labels", "9.0.0")
    older = push(fleet.oci, bundles.bad_self_test, "ocr/labels", "1.5.0")  # 2.0.0 ran on every board
    stored = {board: sorted(p.name for p in (fleet.work / board / "versions").iterdir()) for board in BOARDS}
    assert all("1.5.0" not in versions and "9.0.0" not in versions for versions in stored.values())
    for desired, why in ((Desired("9.0.0", untrusted, intruder_key.fingerprint, "t-untrusted"), "is not trusted"),
                         (Desired("1.5.0", older, release_key_of(bundles), "t-older"), "is older than 2.0.0")):
        with fleet.view() as view:
            view.publish(topics.group_desired(FLEET, GROUP), desired)
            assert view.wait_for(lambda d=desired: all(  # type: ignore[misc]
                (s := view.states.get(b)) is not None and s.desired == d.bundle and s.result == "refused"
                for b in BOARDS), WAIT_S)
            assert all(why in view.states[b].error for b in BOARDS)
        for board in BOARDS:  # nothing was pulled into the store, nothing changed
            assert sorted(p.name for p in (fleet.work / board / "versions").iterdir()) == stored[board]
            assert fleet.active(board) == "1.0.0"


def release_key_of(bundles: Bundles) -> str:
    from vkocr.agent.bundles.bundle import read_manifest

    return str(read_manifest(bundles.v1).signer)


def test_a_pending_board_counts_as_failed_after_the_deadline(fleet: Fleet, refs: dict[str, str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Without --pending-deadline an offline board stays pending (the first test); with it, it counts."""
    fleet.stop("b3")
    code = fleet.cli("rollout", f"{fleet.oci}/ocr/labels:2.0.0", "--canary", "0", "--batch", "100%", "--soak",
                     "0.1s", "--pending-deadline", "1s", "--wave-timeout", "180s")
    out, err = capsys.readouterr()
    assert code == 1
    assert "waiting up to 1 s for the pending boards: b3" in err
    assert "rollout incomplete: b3 did not install 2.0.0 within 1 s of the last wave" in err
    with fleet.view() as view:
        record = view.rollouts[GROUP]
        assert (record.status, record.failed, record.pending) == ("incomplete", ["b3"], [])
        assert view.desired[GROUP].version == "2.0.0"  # its desired state stays: it installs it when back
    assert (fleet.active("b1"), fleet.active("b2"), fleet.active("b3")) == ("2.0.0", "2.0.0", "1.0.0")
