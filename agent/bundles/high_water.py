"""Anti-rollback: the newest version a model store has ever activated, persisted, and the order it is judged by.

    <store>/high_water.json   {"version": "2.3.0", "created": "2025-01-31T12:00:00Z"}, replaced atomically

Order: the release number a version starts with (`2.3.0` in `2.3.0-3f2a9c1d`, compared number by number, so
`1.10.0` is newer than `1.9.0`), then the manifest's creation time. What follows the release number (a build
hash, a suffix) is not ordered: `1.4.4-78e017d5` and `1.4.4-3f2a9c1d` are told apart by their creation time.
A version with no leading number sorts before every numbered one.

Activating a version older than the mark is a downgrade: refused unless the operator asks for it (Rollback, or
Activate with allow_downgrade). An allowed downgrade leaves the mark where it is, so a stolen old bundle stays
refused afterwards too. Re-activating the mark's own version (same release, same creation time) is no downgrade.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from vkocr.agent.bundles.atomic_files import write_atomic
from vkocr.agent.bundles.errors import DowngradeRefused, HighWaterUnreadable
from vkocr.agent.bundles.manifest import Manifest, format_time

FILE_NAME: Final = "high_water.json"
_RELEASE = re.compile(r"^[0-9]+(?:\.[0-9]+)*")


def release_numbers(version: str) -> tuple[int, ...]:
    """`2.3.0-rc1` → (2, 3, 0); `dev` → ()."""
    match = _RELEASE.match(version)
    return tuple(int(part) for part in match[0].split(".")) if match else ()


@dataclass(frozen=True)
class VersionMark:
    version: str
    created: datetime

    @classmethod
    def of(cls, manifest: Manifest) -> VersionMark:
        return cls(manifest.version, manifest.created)

    @property
    def order(self) -> tuple[tuple[int, ...], datetime]:
        return release_numbers(self.version), self.created

    def older_than(self, other: VersionMark) -> bool:
        return self.order < other.order

    def describe(self) -> str:
        return f"{self.version} (created {format_time(self.created)})"


class HighWater:
    """The mark of one store. Not locked itself: the store calls it inside its own change lock."""

    def __init__(self, store_root: Path) -> None:
        self.path = Path(store_root) / FILE_NAME

    def read(self) -> VersionMark | None:
        """The mark; None when none was written yet. HighWaterUnreadable when the file is damaged."""
        try:
            doc = json.loads(self.path.read_bytes())
            return VersionMark(str(doc["version"]), datetime.fromisoformat(str(doc["created"])))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise HighWaterUnreadable(
                f"the model store's high-water mark {self.path.name} is unreadable ({type(exc).__name__}); "
                "activations are refused until an operator activates a version with allow_downgrade (which "
                "rewrites it)") from None

    def check(self, candidate: VersionMark, *, allow_downgrade: bool) -> None:
        """DowngradeRefused when `candidate` is older than the mark and no downgrade was asked for."""
        if allow_downgrade:
            return
        mark = self.read()
        if mark is not None and candidate.older_than(mark):
            raise DowngradeRefused(
                f"version {candidate.describe()} is older than {mark.describe()}, the newest version this board "
                "has activated; a downgrade needs an explicit operator action: Rollback, or Activate with "
                "allow_downgrade (vkocr fleet rollout --allow-downgrade)")

    def raise_to(self, candidate: VersionMark) -> VersionMark:
        """Record `candidate` when it is newer than the mark (or the mark is missing or damaged); the mark."""
        try:
            mark = self.read()
        except HighWaterUnreadable:
            mark = None
        if mark is not None and not mark.older_than(candidate):
            return mark
        doc = {"version": candidate.version, "created": format_time(candidate.created)}
        write_atomic(self.path, json.dumps(doc).encode() + b"\n")
        return candidate
