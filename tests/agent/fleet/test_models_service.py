"""The Models service on a real agent over loopback: upload → activate → the new model's text → rollback, and
every way a bundle or an upload can be forged or broken refused, with the old model answering correctly after
each. One agent (its own store, version 1.0.0 active) serves the whole module; the tests that change its active
version put 1.0.0 back."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tests.agent.bundles import craft
from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.conftest import Bundles
from tests.agent.fleet.fleet_agents import (
    MAX_BUNDLE_BYTES,
    WORD,
    WORD_SWAPPED,
    make_bundle,
    read_word,
    seed_store,
    store_agent,
    store_config,
    stored_versions,
)
from vkocr.agent.bundles import bundle as bundles_lib
from vkocr.agent.bundles.manifest import MANIFEST_NAME, SIGNATURE_NAME
from vkocr.agent.fleet.rollout import upload_bundle, upload_id_for
from vkocr.agent.serving.background import BackgroundAgent
from vkocr.agent.serving.client import OcrClient
from vkocr.v1 import models_pb2, status_pb2


@dataclass
class Served:
    agent: BackgroundAgent
    client: OcrClient
    root: Path
    trusted: Path  # the agent's trusted-keys directory


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, release_key: KeyPair, bundles: Bundles) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("store")
    seed_store(root, release_key, bundles.v1)
    trusted = root.parent / "trusted-keys"  # a directory of *.pub files, as on a board
    trusted.mkdir()
    shutil.copy(release_key.public_path, trusted)
    config = store_config(root, release_key, **{"models.trusted_keys": [str(trusted)]})
    with store_agent(config) as background, OcrClient(background.target) as client:
        yield Served(background, client, root, trusted)


def assert_old_model_serves(served: Served, stored: list[str] | None = None) -> None:
    assert read_word(served.client, WORD) == (WORD, "1.0.0")
    active, versions = stored_versions(served.client)
    assert active == "1.0.0" and (served.root / "active").read_text() == "1.0.0\n"
    if stored is not None:
        assert versions == stored
    assert not list((served.root / "staging").iterdir())


def send(client: OcrClient, data: bytes, upload_id: str, *, total_size: int | None = None, sha256: str | None = None,
         chunk: int = 1 << 20, first_offset: int = 0) -> models_pb2.UploadBundleResponse:
    """A raw upload: `data` in chunks from `first_offset`, announcing `total_size` and `sha256` (default:
    the data's own)."""
    total = len(data) if total_size is None else total_size
    digest = hashlib.sha256(data).hexdigest() if sha256 is None else sha256

    def chunks() -> Iterator[models_pb2.UploadBundleRequest]:
        for i, at in enumerate(range(first_offset, max(len(data), first_offset + 1), chunk)):
            yield models_pb2.UploadBundleRequest(upload_id=upload_id, offset=at, data=data[at:at + chunk],
                                         total_size=total if i == 0 else 0, sha256=digest if i == 0 else "")

    result: models_pb2.UploadBundleResponse = client.models.UploadBundle(chunks(), timeout=120)
    return result


def refused(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


# --- the happy path --------------------------------------------------------------------------------------------


def test_upload_activate_serves_the_new_text_then_rollback(served: Served, bundles: Bundles) -> None:
    client = served.client
    assert read_word(client, WORD) == (WORD, "1.0.0")
    uploaded = upload_bundle(client, bundles.v2, chunk_bytes=256 << 10)
    assert (uploaded.version, uploaded.name, uploaded.size) == ("2.0.0", "labels", bundles.v2.stat().st_size)
    assert uploaded.sha256 == hashlib.sha256(bundles.v2.read_bytes()).hexdigest()
    assert stored_versions(client) == ("1.0.0", ["1.0.0", "2.0.0"])
    assert read_word(client, WORD) == (WORD, "1.0.0")  # stored is not active

    # Requests keep flowing during the activation: each is answered, by one model or the other, whole.
    answers: list[tuple[str, str]] = []
    stop = threading.Event()

    def traffic() -> None:
        while not stop.is_set():
            answers.append(read_word(client, WORD))

    reader = threading.Thread(target=traffic)
    reader.start()
    try:
        activated = client.models.Activate(models_pb2.ActivateRequest(version="2.0.0"), timeout=300)
    finally:
        stop.set()
        reader.join()
    assert (activated.active_version, activated.previous_version) == ("2.0.0", "1.0.0")
    assert [(t.image, t.expected, t.got, t.passed) for t in activated.self_tests] == \
        [("selftest/lot0042.png", WORD_SWAPPED, WORD_SWAPPED, True)]
    # Every answer is whole: one model's text. (Not checked: the version label of an answer that finished
    # around the swap; OcrService reads worker.model_version when it builds the response, after the job ran.)
    texts = [text for text, _ in answers]
    assert set(texts) <= {WORD, WORD_SWAPPED}
    assert texts == sorted(texts, key=lambda t: t == WORD_SWAPPED)  # never the old model once the new answered

    assert read_word(client, WORD) == (WORD_SWAPPED, "2.0.0")
    assert client.status(timeout=10).model_version == "2.0.0"
    assert (served.root / "active").read_text() == "2.0.0\n"
    listed = client.models.ListBundles(models_pb2.ListBundlesRequest(), timeout=30)
    assert [(b.version, b.active) for b in listed.bundles] == [("2.0.0", True), ("1.0.0", False)]
    assert listed.bundles[0].signer and listed.bundles[0].created.seconds > 0

    back = client.models.Rollback(models_pb2.RollbackRequest(), timeout=300)
    assert (back.active_version, back.previous_version) == ("1.0.0", "2.0.0")
    assert [t.passed for t in back.self_tests] == [True]
    assert_old_model_serves(served, ["1.0.0", "2.0.0"])

    again = refused(lambda: client.models.Rollback(models_pb2.RollbackRequest(), timeout=60))
    assert again.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "nothing to roll back to" in (again.details() or "")


def test_activating_the_active_version_changes_nothing(served: Served) -> None:
    done = served.client.models.Activate(models_pb2.ActivateRequest(version="1.0.0"), timeout=60)
    assert (done.active_version, done.previous_version, len(done.self_tests)) == ("1.0.0", "1.0.0", 0)
    assert_old_model_serves(served)


# --- activation refused ----------------------------------------------------------------------------------------


def test_a_failing_self_test_is_refused_and_the_old_version_serves(served: Served, bundles: Bundles) -> None:
    client = served.client
    assert upload_bundle(client, bundles.bad_self_test).version == "1.5.0"
    # 1.5.0 is older than 2.0.0, which an earlier test activated (the high-water mark): the downgrade is asked for,
    # so that the self-tests are what refuses it
    err = refused(lambda: client.models.Activate(models_pb2.ActivateRequest(version="1.5.0", allow_downgrade=True),
                                                 timeout=300))
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
    details = err.details() or ""
    assert "activation of 1.5.0 failed at self_tests" in details and "version 1.0.0 is still active" in details
    assert f"expected 'LOT9999', read '{WORD}'" in details
    status = rpc_status.from_call(err)
    assert status is not None
    failure = error_details_pb2.PreconditionFailure()
    assert status.details[0].Unpack(failure)
    assert [(v.type, v.subject) for v in failure.violations] == [("SELF_TEST", "selftest/lot0042.png")]
    assert_old_model_serves(served)
    assert client.status(timeout=10).state == status_pb2.SERVING_STATE_SERVING

    served.client.models.DeleteBundle(models_pb2.DeleteBundleRequest(version="1.5.0"), timeout=60)
    assert "1.5.0" not in stored_versions(client)[1]


def test_models_that_do_not_load_are_refused(served: Served, release_key: KeyPair, selftest_image: Path,
                                            tmp_path: Path) -> None:
    junk = {}
    for role, name in (("det", "det.onnx"), ("cls", "cls.onnx"), ("rec", "rec.onnx")):
        junk[role] = tmp_path / name
        junk[role].write_bytes(b"this is not an ONNX model " * 100)
    path = make_bundle(tmp_path / "junk.vkb", "4.0.0-junk", release_key, selftest_image, WORD, models=junk)
    assert upload_bundle(served.client, path).version == "4.0.0-junk"
    err = refused(lambda: served.client.models.Activate(models_pb2.ActivateRequest(version="4.0.0-junk"),
                                                        timeout=300))
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "activation of 4.0.0-junk failed at load" in (err.details() or "")
    served.client.models.DeleteBundle(models_pb2.DeleteBundleRequest(version="4.0.0-junk"), timeout=60)
    assert_old_model_serves(served)


def test_unknown_and_malformed_versions(served: Served) -> None:
    models = served.client.models
    missing = refused(lambda: models.Activate(models_pb2.ActivateRequest(version="9.9.9"), timeout=30))
    assert missing.code() is grpc.StatusCode.NOT_FOUND and "'9.9.9' is not in the model store" in missing.details()
    bad = refused(lambda: models.Activate(models_pb2.ActivateRequest(version="../1.0.0"), timeout=30))
    assert bad.code() is grpc.StatusCode.INVALID_ARGUMENT
    active = refused(lambda: models.DeleteBundle(models_pb2.DeleteBundleRequest(version="1.0.0"), timeout=30))
    assert active.code() is grpc.StatusCode.FAILED_PRECONDITION and "is active" in (active.details() or "")
    gone = refused(lambda: models.DeleteBundle(models_pb2.DeleteBundleRequest(version="9.9.9"), timeout=30))
    assert gone.code() is grpc.StatusCode.NOT_FOUND
    assert_old_model_serves(served)


# --- uploads refused -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def v3_entries(bundles: Bundles) -> list[craft.Entry]:
    return craft.read_entries(bundles.v3)


Tamper = Callable[[list[craft.Entry]], list[craft.Entry]]


def _flip_in(name: str) -> Tamper:
    def change(entries: list[craft.Entry]) -> list[craft.Entry]:
        data = next(d for i, d in entries if i.name == name)
        assert data is not None
        return craft.replace_data(entries, name, craft.flip_byte(data, len(data) // 2))
    return change


def _forge_manifest(entries: list[craft.Entry]) -> list[craft.Entry]:
    raw = next(d for i, d in entries if i.name == MANIFEST_NAME)
    assert raw is not None and b'"version": "3.0.0"' in raw
    return craft.replace_data(entries, MANIFEST_NAME, raw.replace(b'"version": "3.0.0"', b'"version": "3.0.1"'))


TAMPERED: list[tuple[str, Tamper, grpc.StatusCode, str]] = [
    ("one byte changed in a model", _flip_in("ch_PP-OCRv4_rec_infer.onnx"), grpc.StatusCode.INVALID_ARGUMENT,
     "file ch_PP-OCRv4_rec_infer.onnx: sha256 mismatch"),
    ("one byte changed in the manifest", _forge_manifest, grpc.StatusCode.PERMISSION_DENIED,
     "the manifest signature does not verify with any trusted key"),
    ("file the manifest does not list", lambda e: [*e, craft.regular("extra.bin", b"smuggled")],
     grpc.StatusCode.INVALID_ARGUMENT, "entry 'extra.bin' is not listed in the manifest"),
    ("listed file missing", lambda e: [x for x in e if x[0].name != "ch_ppocr_mobile_v2.0_cls_infer.onnx"],
     grpc.StatusCode.INVALID_ARGUMENT, "is listed in the manifest but missing from the bundle"),
    ("../ entry", lambda e: e[:2] + [craft.regular("../escaped.txt", b"owned")] + e[2:],
     grpc.StatusCode.INVALID_ARGUMENT, "entry '../escaped.txt' escapes the bundle"),
    ("absolute path", lambda e: e[:2] + [craft.regular("/tmp/vkocr-owned.txt", b"owned")] + e[2:],
     grpc.StatusCode.INVALID_ARGUMENT, "entry '/tmp/vkocr-owned.txt' is an absolute path"),
    ("symlink", lambda e: [craft.special(i.name, tarfile.SYMTYPE, "/etc/passwd") if i.name.endswith(".png")
                           else (i, d) for i, d in e],
     grpc.StatusCode.INVALID_ARGUMENT, "is a symbolic link (to '/etc/passwd')"),
    ("unsigned", lambda e: [x for x in e if x[0].name != "manifest.sig"], grpc.StatusCode.PERMISSION_DENIED,
     "is not signed"),
]


@pytest.mark.parametrize("change, code, reason", [t[1:] for t in TAMPERED], ids=[t[0] for t in TAMPERED])
def test_tampered_bundles_are_refused(served: Served, v3_entries: list[craft.Entry], tmp_path: Path,
                                      change: Tamper, code: grpc.StatusCode, reason: str) -> None:
    path = craft.write_entries(tmp_path / "tampered.vkb", change(list(v3_entries)), compresslevel=1)
    err = refused(lambda: send(served.client, path.read_bytes(), "tampered"))
    assert err.code() is code
    assert reason in (err.details() or "")
    assert served.client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="tampered"),
                                             timeout=10).received == 0  # refused bundles are not kept
    assert not Path("/tmp/vkocr-owned.txt").exists()
    assert not any(p.name == "escaped.txt" for p in served.root.parent.rglob("escaped.txt"))
    assert_old_model_serves(served, ["1.0.0", "2.0.0"])


def test_signed_by_a_key_that_is_not_trusted(served: Served, bundles: Bundles, intruder_key: KeyPair,
                                             tmp_path: Path) -> None:
    path = tmp_path / "intruder.vkb"
    path.write_bytes(bundles.v3.read_bytes())
    bundles_lib.sign(path, intruder_key.private)
    err = refused(lambda: send(served.client, path.read_bytes(), "intruder"))
    assert err.code() is grpc.StatusCode.PERMISSION_DENIED
    assert f"signed by key {intruder_key.fingerprint[:16]}, which is not trusted" in (err.details() or "")
    assert_old_model_serves(served, ["1.0.0", "2.0.0"])


def test_a_key_removed_from_the_trusted_keys_counts_at_once(served: Served, bundles: Bundles,
                                                            release_key: KeyPair, tmp_path: Path) -> None:
    """Key rotation without a restart: once the release key's .pub leaves the trusted-keys directory, the
    versions it signed can no longer be activated, and bundles it signed are no longer accepted."""
    moved = shutil.move(served.trusted / release_key.public_path.name, tmp_path)
    try:
        err = refused(lambda: served.client.models.Activate(models_pb2.ActivateRequest(version="2.0.0"),
                                                            timeout=60))
        assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "activation of 2.0.0 failed at verify: stored version 2.0.0 is no longer signed by a trusted key" \
            in (err.details() or "")
        upload = refused(lambda: upload_bundle(served.client, bundles.v3))
        assert upload.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "no trusted keys are configured" in (upload.details() or "")
    finally:
        shutil.move(moved, served.trusted)
    assert_old_model_serves(served, ["1.0.0", "2.0.0"])


def test_a_truncated_bundle_file_is_refused(served: Served, bundles: Bundles) -> None:
    data = bundles.v3.read_bytes()
    err = refused(lambda: send(served.client, data[:len(data) // 2], "cut-short"))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "is truncated or corrupt" in (err.details() or "")
    assert_old_model_serves(served, ["1.0.0", "2.0.0"])


def test_oversize_is_refused_before_a_byte_is_written(served: Served) -> None:
    err = refused(lambda: send(served.client, b"x" * 1000, "huge", total_size=MAX_BUNDLE_BYTES + 1))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "larger than this agent accepts (32.0 MiB, [models] max_bundle_bytes); nothing was written" in \
        (err.details() or "")
    assert not list((served.root / "uploads").glob("huge*"))
    assert_old_model_serves(served, ["1.0.0", "2.0.0"])


def test_a_bundle_that_unpacks_beyond_the_limit_is_refused(served: Served, release_key: KeyPair,
                                                           selftest_image: Path, tmp_path: Path) -> None:
    """A small file that unpacks large: the models plus 24 MiB of zeros, over the 32 MiB limit."""
    zeros = tmp_path / "zeros.bin"
    zeros.write_bytes(bytes(24 << 20))
    path = make_bundle(tmp_path / "bomb.vkb", "5.0.0", release_key, selftest_image, WORD, other_files=(zeros,))
    assert path.stat().st_size < MAX_BUNDLE_BYTES
    err = refused(lambda: upload_bundle(served.client, path))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "unpacks to" in (err.details() or "") and "more than the limit of 32.0 MiB" in (err.details() or "")
    assert_old_model_serves(served, ["1.0.0", "2.0.0"])


def test_damaged_in_transit_is_refused_and_discarded(served: Served, bundles: Bundles) -> None:
    data = bundles.v3.read_bytes()
    err = refused(lambda: send(served.client, data, "damaged", sha256=hashlib.sha256(b"other").hexdigest()))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "was damaged on the way; upload it again" in (err.details() or "")
    assert served.client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="damaged"),
                                             timeout=10).received == 0
    assert_old_model_serves(served, ["1.0.0", "2.0.0"])


def test_a_truncated_upload_is_refused_then_resumes(served: Served, bundles: Bundles) -> None:
    """The stream ends halfway: refused, nothing stored, the half kept; a chunk from the wrong offset is
    refused; the upload then resumes from where the agent says and the bundle is stored (not activated)."""
    data = bundles.v3.read_bytes()
    half = len(data) // 2
    digest = hashlib.sha256(data).hexdigest()
    err = refused(lambda: send(served.client, data[:half], "resumable", total_size=len(data), sha256=digest))
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert f"upload resumable is incomplete: {half} of {len(data)} bytes received; send the rest from offset " \
           f"{half}" in (err.details() or "")
    held = served.client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="resumable"), timeout=10)
    assert (held.received, held.total_size) == (half, len(data))
    assert_old_model_serves(served, ["1.0.0", "2.0.0"])

    gap = refused(lambda: send(served.client, data, "resumable", first_offset=half + 4096))
    assert gap.code() is grpc.StatusCode.OUT_OF_RANGE
    assert f"chunk starts at offset {half + 4096} but the agent holds {half} bytes; resume from offset {half}" \
        in (gap.details() or "")

    done = send(served.client, data, "resumable", first_offset=half)
    assert (done.version, done.sha256) == ("3.0.0", digest)
    assert served.client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="resumable"),
                                             timeout=10).received == 0
    assert_old_model_serves(served, ["1.0.0", "2.0.0", "3.0.0"])


def test_an_upload_the_agent_cannot_check_for_its_own_reasons_is_kept(served: Served, release_key: KeyPair,
                                                                       selftest_image: Path, tmp_path: Path) -> None:
    """A trusted-keys directory with a key file that cannot be read is the operator's to fix, not the bundle's
    fault: the complete upload stays, and once the key file is fixed its last chunk again stores it."""
    path = make_bundle(tmp_path / "kept.vkb", "6.0.0", release_key, selftest_image, WORD)
    data = path.read_bytes()
    broken = served.trusted / "broken.pub"
    broken.write_text("not a key\n")
    try:
        err = refused(lambda: send(served.client, data, "kept"))
        assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert f"{broken} is not a PEM public key" in (err.details() or "")
        held = served.client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="kept"), timeout=10)
        assert (held.received, held.total_size) == (len(data), len(data))
    finally:
        broken.unlink()
    try:
        done = send(served.client, data, "kept", first_offset=len(data))
        assert done.version == "6.0.0"
        assert served.client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="kept"),
                                                 timeout=10).received == 0
    finally:
        served.client.models.DeleteBundle(models_pb2.DeleteBundleRequest(version="6.0.0"), timeout=60)
    assert_old_model_serves(served)


def test_a_cancelled_upload_is_closed_after_its_last_chunk_and_resumes(served: Served, release_key: KeyPair,
                                                                     selftest_image: Path, tmp_path: Path) -> None:
    """The client cancels the stream after its first chunk: the agent closes the upload once that chunk is
    written (releasing its id), and the upload resumes from what the agent holds."""
    path = make_bundle(tmp_path / "cancelled.vkb", "7.0.0", release_key, selftest_image, WORD)
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    upload_id = upload_id_for(digest)
    first = len(data) // 3
    release = threading.Event()

    def chunks() -> Iterator[models_pb2.UploadBundleRequest]:
        yield models_pb2.UploadBundleRequest(upload_id=upload_id, offset=0, data=data[:first], total_size=len(data),
                                     sha256=digest)
        release.wait(60)

    call = served.client.models.UploadBundle.future(chunks(), timeout=120)
    try:
        for _ in range(600):
            status = served.client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id=upload_id),
                                                       timeout=10)
            if status.received == first:
                break
            time.sleep(0.05)
        assert status.received == first
        assert call.cancel()
    finally:
        release.set()
    try:
        done = upload_bundle(served.client, path)
        assert (done.version, done.sha256) == ("7.0.0", digest)
        assert served.client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id=upload_id),
                                                 timeout=10).received == 0
    finally:
        served.client.models.DeleteBundle(models_pb2.DeleteBundleRequest(version="7.0.0"), timeout=60)
    assert_old_model_serves(served)


def test_a_validly_signed_manifest_with_a_duplicate_key_is_refused(served: Served, v3_entries: list[craft.Entry],
                                                                   release_key: KeyPair, tmp_path: Path) -> None:
    """JSON lets the last of two equal keys win: a signer's tool and the agent could then read different
    manifests from the same signed bytes. Refused, even when the signature verifies."""
    raw = next(d for i, d in v3_entries if i.name == MANIFEST_NAME)
    assert raw is not None and b'"version": "3.0.0",' in raw
    doubled = raw.replace(b'"version": "3.0.0",', b'"version": "3.0.0", "version": "9.9.9",', 1)
    entries = craft.replace_data(list(v3_entries), MANIFEST_NAME, doubled)
    entries = craft.replace_data(entries, SIGNATURE_NAME, release_key.private.sign(doubled))
    path = craft.write_entries(tmp_path / "doubled.vkb", entries, compresslevel=1)
    err = refused(lambda: send(served.client, path.read_bytes(), "doubled"))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "appears twice" in (err.details() or "")
    assert_old_model_serves(served)
