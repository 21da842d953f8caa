"""The generated stubs match the .proto files they come from, and the contract holds the services DESIGN.md
names."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import gen_proto  # noqa: E402  (from scripts/, put on the path just above)


@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None, reason="grpcio-tools is a test dependency")
def test_generated_stubs_are_current(tmp_path: Path) -> None:
    gen_proto.generate(tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert fresh, "protoc wrote nothing"
    stale = [str(rel) for rel in fresh if (tmp_path / rel).read_bytes() != (gen_proto.PROTO_ROOT / rel).read_bytes()]
    assert not stale, f"stale stubs, run `python scripts/gen_proto.py`: {stale}"


def test_services_of_the_contract() -> None:
    from vkocr.v1 import models_pb2, ocr_pb2, status_pb2

    ocr = ocr_pb2.DESCRIPTOR.services_by_name["OcrService"]
    status = status_pb2.DESCRIPTOR.services_by_name["StatusService"]
    models = models_pb2.DESCRIPTOR.services_by_name["ModelsService"]
    assert set(ocr.methods_by_name) == {"Recognize", "RecognizeStream"}
    stream = ocr.methods_by_name["RecognizeStream"]
    assert stream.client_streaming and stream.server_streaming
    assert set(status.methods_by_name) == {"GetStatus", "WatchStatus"}
    assert status.methods_by_name["WatchStatus"].server_streaming
    assert set(models.methods_by_name) == {"UploadBundle", "UploadStatus", "Activate", "Rollback", "ListBundles",
                                           "DeleteBundle"}
    assert models.methods_by_name["UploadBundle"].client_streaming
    assert {ocr_pb2.DESCRIPTOR.package, status_pb2.DESCRIPTOR.package, models_pb2.DESCRIPTOR.package} == {"vkocr.v1"}


BUF = Path(sys.executable).parent / "buf"  # buf-bin, a test dependency


@pytest.mark.skipif(not BUF.exists() or importlib.util.find_spec("grpc_tools") is None,
                    reason="buf-bin and grpcio-tools are test dependencies")
def test_buf_lint_passes_and_would_catch_a_violation(tmp_path: Path) -> None:
    """What scripts/lint.sh runs, once on the contract and once on a copy with an unprefixed enum value and a
    service without the Service suffix: the check must be able to fail."""
    import shutil
    import subprocess

    def lint(proto_root: Path) -> subprocess.CompletedProcess[str]:
        image = tmp_path / f"{proto_root.name}.binpb"
        gen_proto.descriptor_set(image, proto_root)
        return subprocess.run([str(BUF), "lint", str(image), "--path", "vkocr/v1", "--config", str(ROOT / "buf.yaml")],
                              capture_output=True, text=True, cwd=ROOT, timeout=60)

    clean = lint(gen_proto.PROTO_ROOT)
    assert clean.returncode == 0 and not clean.stdout, clean.stdout + clean.stderr
    broken = tmp_path / "broken"
    shutil.copytree(gen_proto.PROTO_ROOT / "vkocr" / "v1", broken / "vkocr" / "v1",
                    ignore=shutil.ignore_patterns("*.py", "*.pyi"))
    ocr = broken / "vkocr" / "v1" / "ocr.proto"
    text = ocr.read_text().replace("PIXEL_LAYOUT_GRAY8 = 1", "GRAY8 = 1").replace("service OcrService", "service Ocr")
    ocr.write_text(text)
    found = lint(broken)
    assert found.returncode != 0
    assert 'Enum value name "GRAY8" should be prefixed with "PIXEL_LAYOUT_"' in found.stdout, found.stdout
    assert 'Service name "Ocr" should be suffixed with "Service"' in found.stdout, found.stdout
