"""What the model store (agent/bundles/store.py) says of its versions: a stored version as the Models service
lists it, one as activation and serving read it, its self-tests, and what a recovery cleared."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from vkocr.agent.bundles.manifest import Manifest
from vkocr.agent.ocr.options import OcrOptions


@dataclass(frozen=True)
class BundleInfo:
    """One stored version, as the Models service lists it."""

    name: str
    version: str
    created: datetime  # when the bundle was made (its manifest)
    installed: datetime  # when this store added it
    sequence: int  # order of adding: larger is newer (clocks on boards without an RTC cannot say)
    size: int  # bytes of the bundle file that was added
    sha256: str  # of the bundle file that was added
    signer: str | None
    content_digest: str
    path: Path  # the version's directory
    active: bool = False


@dataclass(frozen=True)
class SelfTestCase:
    image: Path
    expect: str  # text that must appear among the recognised lines


@dataclass(frozen=True)
class InstalledVersion:
    """A stored version as `ModelStore.installed()` read it: everything activating and serving it needs, so
    nobody asks the store again by version string. Its files stay while it is active or the rollback
    target (the store never deletes those)."""

    version: str
    root: Path  # the version's directory, resolved
    manifest: Manifest
    models: Mapping[str, Path]  # {"det", "cls", "rec": absolute path of the ONNX file}
    options: OcrOptions  # the bundle's overrides over the base options it was read with
    self_tests: tuple[SelfTestCase, ...]

    @property
    def overrides(self) -> dict[str, Any]:
        """The OcrOptions overrides the bundle sets (preprocess and postprocess together)."""
        return self.manifest.options()


@dataclass(frozen=True)
class Recovery:
    """What recover() found and did."""

    removed_leftovers: tuple[str, ...]
    removed_incomplete: tuple[str, ...]
    active_before: str | None
    active_after: str | None

    @property
    def active_changed(self) -> bool:
        return self.active_before != self.active_after

    def describe(self) -> str:
        parts = []
        if self.removed_leftovers:
            parts.append(f"removed {len(self.removed_leftovers)} leftover(s) of interrupted changes")
        if self.removed_incomplete:
            parts.append(f"removed incomplete version(s) {', '.join(self.removed_incomplete)}")
        if self.active_changed:
            after = self.active_after or "none (no complete version is stored)"
            parts.append(f"active version {self.active_before} is missing or incomplete: now {after}")
        return "; ".join(parts) or "nothing to recover"
