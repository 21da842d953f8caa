"""vkocr's one error tree and its one gRPC boundary.

Every error class of the engine, the agent and postprocessing (found by importing every module) derives from
vkocr.errors.VkocrError through its branch and says when it is raised; one function classifies VkResults; the
table of agent/serving/status_table.py maps only error classes and gives the codes and details clients rely on.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2
from structlog.testing import capture_logs

import vkocr.errors
from vkocr.agent.bundles.errors import (
    ActivationBusy,
    ActivationFailed,
    ChecksumMismatch,
    IntegrityError,
    OffsetMismatch,
    SignatureError,
    UploadBusy,
    VersionNotFound,
)
from vkocr.agent.errors import AgentError, ImageError, OptionsError, RequestError, RequestStopped, ShutdownCancelled
from vkocr.agent.serving import rpc_status
from vkocr.agent.serving.errors import DeadlineDropped, NotServing, QueueFull
from vkocr.agent.serving.status_table import INTERNAL_MESSAGE, STATUS_TABLE, status_for
from vkocr.engine.device import Device
from vkocr.engine.errors import DeviceLost, EngineError, OutOfMemory, VulkanError, vulkan_error
from vkocr.engine.kernels.elementwise import record_unary
from vkocr.engine.loader import check
from vkocr.engine.recorder import Recorder
from vkocr.errors import VkocrError
from vkocr.postproc.errors import CharsetError, PluginConfigError, PostprocError, UnknownPluginError

BRANCHES: dict[str, type[VkocrError]] = {
    "vkocr.engine": EngineError,
    "vkocr.agent": AgentError,
    "vkocr.postproc": PostprocError,
}
RAISED = re.compile(r"\braised (when|by|at|if|only|while)\b", re.IGNORECASE)
ROOT_SOURCE = Path(vkocr.errors.__file__)


def _modules() -> list[ModuleType]:
    """Every module of the three packages, imported (an import that fails fails the test)."""
    modules = []
    for name in BRANCHES:
        package = importlib.import_module(name)
        modules.append(package)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            modules.append(importlib.import_module(info.name))
    return modules


def _error_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of vkocr, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for module in [vkocr.errors, *_modules()]:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{value.__qualname__}"] = value
    return found


ERRORS = _error_classes()


def test_the_walk_finds_the_tree() -> None:
    assert len(ERRORS) >= 50  # 53 classes before the tree was made one
    assert "vkocr.agent.serving.errors.QueueFull" in ERRORS and "vkocr.engine.errors.DeviceLost" in ERRORS


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_every_error_class_is_in_its_branch_of_the_one_tree(name: str) -> None:
    cls = ERRORS[name]
    assert issubclass(cls, VkocrError), f"{name} derives from {[b.__name__ for b in cls.__mro__[1:]]}"
    branch = next((b for prefix, b in BRANCHES.items() if name.startswith(prefix + ".")), VkocrError)
    assert issubclass(cls, branch), f"{name} is outside {branch.__name__}"


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_every_error_class_says_when_it_is_raised(name: str) -> None:
    doc = ERRORS[name].__dict__.get("__doc__") or ""
    assert RAISED.search(doc), f"{name}: docstring {doc!r} does not say when it is raised"


def test_the_root_imports_nothing_of_vkocr() -> None:
    tree = ast.parse(ROOT_SOURCE.read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert [name for name in imported if name.startswith("vkocr")] == []


def test_the_engine_shows_the_same_root() -> None:
    import vkocr.engine.errors

    assert vkocr.engine.errors.VkocrError is VkocrError


@pytest.mark.parametrize(("result", "kind"), [
    ("VK_ERROR_DEVICE_LOST", DeviceLost),
    ("VK_ERROR_OUT_OF_DEVICE_MEMORY", OutOfMemory),
    ("VK_ERROR_OUT_OF_HOST_MEMORY", OutOfMemory),
    ("VK_ERROR_OUT_OF_POOL_MEMORY", OutOfMemory),
    ("VK_TIMEOUT", VulkanError),
    ("VK_ERROR_UNKNOWN", VulkanError),
])
def test_one_function_classifies_every_vkresult(result: str, kind: type[VulkanError]) -> None:
    error = vulkan_error("vkQueueSubmit", result)
    assert type(error) is kind and (error.call, error.result) == ("vkQueueSubmit", result)
    assert str(error) == f"vkQueueSubmit failed: {result}"


def test_raw_vkresults_are_classified_alike() -> None:
    check(0, "vkResetFences")
    with pytest.raises(DeviceLost, match="vkQueueSubmit failed: VK_ERROR_DEVICE_LOST"):
        check(-4, "vkQueueSubmit")
    with pytest.raises(OutOfMemory, match="VK_ERROR_OUT_OF_DEVICE_MEMORY"):
        check(-2, "vkAllocateMemory")
    with pytest.raises(VulkanError, match="vkWaitForFences failed: VK_TIMEOUT") as info:
        check(2, "vkWaitForFences")
    assert type(info.value) is VulkanError


def test_an_injected_submit_failure_is_classified_like_a_real_one(device: Device) -> None:
    x, y = device.upload(np.arange(8, dtype=np.float32)), device.tensor((8,))
    with Recorder(device) as rec:
        record_unary(rec, "relu", x, y)
        rec.end()
        device.inject_submit_failure("VK_ERROR_OUT_OF_DEVICE_MEMORY")
        with pytest.raises(OutOfMemory, match="VK_ERROR_OUT_OF_DEVICE_MEMORY"):
            rec.submit()
        rec.run()
    np.testing.assert_array_equal(device.download(y), np.arange(8, dtype=np.float32))
    device.free(x)
    device.free(y)


# -- the gRPC boundary -----------------------------------------------------------------------------------------


def test_the_table_maps_only_error_classes() -> None:
    known = set(ERRORS.values())
    for kind, rule in STATUS_TABLE.items():
        if kind is asyncio.CancelledError:  # the one foreign exception: the client went away
            continue
        assert kind in known and issubclass(kind, VkocrError), kind
        assert rule.code in code_pb2.Code.values() and rule.code != code_pb2.OK, kind
        assert not rule.field or rule.code == code_pb2.INVALID_ARGUMENT, kind


def _details(status: status_pb2.Status) -> list[object]:
    out: list[object] = []
    for detail in status.details:
        for kind in (error_details_pb2.BadRequest, error_details_pb2.RetryInfo, error_details_pb2.ErrorInfo,
                     error_details_pb2.PreconditionFailure):
            message = kind()
            if detail.Unpack(message):
                out.append(message)
    return out


@pytest.mark.parametrize(("error", "line"), [
    (ImageError("too_large", "image of 9000×9000 pixels is over the limit"),
     "INVALID_ARGUMENT: image of 9000×9000 pixels is over the limit; field image (too_large)"),
    (OptionsError("option det_thresh: 2.0 is above 1"),
     "INVALID_ARGUMENT: option det_thresh: 2.0 is above 1; field options (out_of_range)"),
    (OptionsError("thresh must be within [0, 1], got 2.0", option="thresh"),  # the wire's name for it
     "INVALID_ARGUMENT: thresh must be within [0, 1], got 2.0; field options.det_thresh (out_of_range)"),
    (UnknownPluginError("nope", ["regex_fields"]),  # through its base, PluginError
     "INVALID_ARGUMENT: unknown postprocessing plugin 'nope'; known: regex_fields; field options.plugins.names "
     "(unknown_plugin)"),
    (PluginConfigError("field 'lot': bad pattern", field="lot.pattern", plugin="regex_fields"),
     "INVALID_ARGUMENT: field 'lot': bad pattern; field options.plugins.options.regex_fields.lot.pattern "
     "(bad_plugin_options)"),
    (RequestError("not protobuf", field="request", reason="malformed"),
     "INVALID_ARGUMENT: not protobuf; field request (malformed)"),
    (ShutdownCancelled(), "CANCELLED: agent shutdown: the grace period ended first"),
    (RequestStopped("client", "det"), "CANCELLED: request stopped after its det stage: the client cancelled"),
    (RequestStopped("deadline", "rec"), "DEADLINE_EXCEEDED: request stopped after its rec stage: its deadline passed"),
    (RequestStopped("shutdown", "cls"),
     "CANCELLED: request stopped after its cls stage: the agent's shutdown grace period ended"),
    (QueueFull("queue full (32 requests waiting for the GPU)"),
     "RESOURCE_EXHAUSTED: queue full (32 requests waiting for the GPU); retry after 0.5 s"),
    (NotServing("agent is loading: models"), "UNAVAILABLE: agent is loading: models; retry after 0.5 s"),
    (DeadlineDropped("deadline passed while queued"), "DEADLINE_EXCEEDED: deadline passed while queued"),
    (asyncio.CancelledError(), "CANCELLED: client cancelled"),
    (VersionNotFound("no version 9.9 in the store"), "NOT_FOUND: no version 9.9 in the store"),
    (SignatureError("signed by an untrusted key"), "PERMISSION_DENIED: signed by an untrusted key"),
    (OffsetMismatch("chunk at 10, 20 bytes held", 20), "OUT_OF_RANGE: chunk at 10, 20 bytes held"),
    (UploadBusy("upload u1 is being written"), "ABORTED: upload u1 is being written"),
    (ActivationBusy("the model store is busy"), "ABORTED: the model store is busy"),
    (ChecksumMismatch("sha256 differs"), "INVALID_ARGUMENT: sha256 differs; field sha256 (mismatch)"),
    (IntegrityError("entry det.onnx twice"), "INVALID_ARGUMENT: entry det.onnx twice; field bundle"),
])
def test_the_table_gives_the_codes_clients_rely_on(error: BaseException, line: str) -> None:
    assert rpc_status.describe_status(status_for(error, retry_after_s=0.5)) == line


def test_a_retry_hint_is_sent_only_when_the_service_has_one() -> None:
    status = status_for(NotServing("draining"))
    assert (status.code, list(status.details)) == (code_pb2.UNAVAILABLE, [])


def test_a_failed_activation_names_its_step_and_a_failed_record_is_ours() -> None:
    status = status_for(ActivationFailed("verify", "signature no longer trusted"))
    assert status.code == code_pb2.FAILED_PRECONDITION
    (failure,) = _details(status)
    assert isinstance(failure, error_details_pb2.PreconditionFailure)
    assert [(v.type, v.subject) for v in failure.violations] == [("VERIFY", "activation")]
    with capture_logs() as logs:
        status = status_for(ActivationFailed("record", "cannot write the active pointer"))
    (info,) = _details(status)
    assert (status.code, status.message) == (code_pb2.INTERNAL, "cannot write the active pointer")
    assert isinstance(info, error_details_pb2.ErrorInfo)
    assert [log["incident_id"] for log in logs if log["event"] == "activation_record_failed"] == [
        info.metadata["incident_id"]]


@pytest.mark.parametrize("error", [RuntimeError("boom"), CharsetError("class 7000 not in the dictionary"),
                                   DeviceLost("vkQueueSubmit", "VK_ERROR_DEVICE_LOST")])
def test_anything_unmapped_is_internal_with_an_incident_logged_once(error: BaseException) -> None:
    with capture_logs() as logs:
        status = status_for(error, request_id="req-1")
    (info,) = _details(status)
    assert (status.code, status.message) == (code_pb2.INTERNAL, INTERNAL_MESSAGE)
    assert isinstance(info, error_details_pb2.ErrorInfo) and (info.reason, info.domain) == ("INTERNAL", "vkocr")
    incident = info.metadata["incident_id"]
    assert re.fullmatch(r"[0-9a-f]{12}", incident)
    (logged,) = [log for log in logs if log.get("incident_id") == incident]
    assert logged["event"] == "internal_error" and logged["request_id"] == "req-1"
    assert logged["error"] == f"{type(error).__name__}: {error}"
    assert str(error) not in status.message
