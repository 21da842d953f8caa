"""The lock files the set-up installs from (requirements/*.lock, made by scripts/lock.sh) pin every dependency
pyproject.toml names, each with its files' sha256: the set-up installs vkocr itself with --no-deps, so a
dependency missing from a lock would be missing on every board."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.paths import ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    return {normalised(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in requirements}


def pins(lock: str) -> dict[str, tuple[str, list[str]]]:
    """Each pinned package of a lock file: its version and the hashes that follow its pin."""
    found: dict[str, tuple[str, list[str]]] = {}
    hashes: list[str] = []
    for line in (ROOT / "requirements" / lock).read_text().splitlines():
        if match := PIN.match(line):
            hashes = []
            found[normalised(match.group(1))] = (match.group(2), hashes)
        elif "--hash=sha256:" in line:
            hashes.append(line.split("--hash=sha256:")[1].split()[0])
    return found


@pytest.mark.parametrize(("lock", "extras"), [("run.lock", []), ("test.lock", ["test", "plots"])])
def test_the_lock_pins_every_dependency_with_hashes(lock: str, extras: list[str]) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = requirement_names(project["dependencies"])
    for extra in extras:
        wanted |= requirement_names(project["optional-dependencies"][extra])
    pinned = pins(lock)
    assert wanted <= set(pinned), f"{lock} lacks {sorted(wanted - set(pinned))}: run scripts/lock.sh"
    unhashed = [name for name, (_, hashes) in pinned.items() if not hashes]
    assert not unhashed, f"{lock}: pins without a sha256: {unhashed}"


def test_the_test_lock_pins_the_run_locks_versions() -> None:
    """./test.sh tests what ./run.sh installs: the same version of every package both have."""
    run, test = pins("run.lock"), pins("test.lock")
    differ = {name: (run[name][0], test[name][0]) for name in run if name in test and run[name][0] != test[name][0]}
    assert not differ, f"run and test locks disagree: {differ}"


def test_the_test_extra_has_every_optional_extra() -> None:
    """./test.sh installs the test extra: the tests of --plot need the plots extra's matplotlib there too."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    test = set(extras["test"])
    missing = {name: sorted(set(wanted) - test) for name, wanted in extras.items() if not set(wanted) <= test}
    assert not missing, f"the test extra lacks {missing}"
