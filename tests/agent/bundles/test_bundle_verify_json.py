"""`vkocr bundle verify --json`: what a script reads on stdout, for a bundle that verifies and for one refused
(the refusal also stays on stderr, as without --json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agent.bundles.conftest import BundleFactory, KeyPair
from vkocr.agent.cli.main import main


def verify(capsys: pytest.CaptureFixture[str], bundle: Path, trusted: Path) -> tuple[int, dict[str, Any], str]:
    code = main(["bundle", "verify", str(bundle), "--trusted", str(trusted), "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_a_verified_bundle_is_described(make_bundle: BundleFactory, key: KeyPair,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path, manifest = make_bundle("2.1")
    code, report, err = verify(capsys, path, key.public_path)
    assert code == 0 and err == ""
    assert report == {"bundle": str(path), "ok": True, "name": "ocr", "version": "2.1", "signer": key.fingerprint,
                      "files": [{"path": f.path, "role": f.role, "size": f.size, "sha256": f.sha256}
                                for f in manifest.files]}
    assert {f["role"] for f in report["files"]} >= {"det", "cls", "rec"}


def test_a_refused_bundle_says_why_on_both(make_bundle: BundleFactory, other_key: KeyPair,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = make_bundle("2.2")
    code, report, err = verify(capsys, path, other_key.public_path)
    assert code == 1
    assert report["ok"] is False and report["bundle"] == str(path)
    assert "which is not trusted" in str(report["error"])
    assert err == f"error: {report['error']}\n"
