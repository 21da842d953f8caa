"""vkocr.v1.ModelsService: bundle upload (chunked, resumable), staged activation, rollback, list and delete.

An upload stream that sends no chunk for [models] upload_idle_s is aborted (DEADLINE_EXCEEDED) and what it
had sent is removed: an idle client holds no thread, no file and no disk space for ever.

Thin: every RPC first checks the caller (agent/serving/auth.py), then runs the store's or the activator's blocking
work on the model-management threads (never the event loop, never the GPU worker), and maps what they raise
to a status through the agent's one table (agent/serving/status_table.py). The old version serves every request
until an activation's swap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import timestamp_pb2

from vkocr.agent.bundles.activation import Activated, Activator
from vkocr.agent.bundles.errors import (
    BundleFormatError,
    BundleTooLarge,
    IntegrityError,
    SignatureError,
    StorageError,
    UnsafeEntryError,
    UploadIdle,
    UploadRequestError,
    VersionConflict,
)
from vkocr.agent.bundles.manifest import NAME_PATTERN
from vkocr.agent.bundles.signing import TrustedKeys
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.bundles.stored import BundleInfo
from vkocr.agent.bundles.uploads import Upload, UploadArea, idle_bounded
from vkocr.agent.serving import rpc_status
from vkocr.agent.serving.auth import require_model_admin
from vkocr.agent.serving.config import AgentConfig
from vkocr.agent.serving.status_table import status_for
from vkocr.log import get_logger
from vkocr.v1 import models_pb2, models_pb2_grpc

log = get_logger(__name__)

T = TypeVar("T")
R = TypeVar("R", models_pb2.ActivateResponse, models_pb2.RollbackResponse)
# The store refused the bundle itself (its signature, manifest, entries or sizes, or a version it reuses for
# other content): a complete upload of it is discarded. Other failures of storing it (the agent's trusted keys,
# disk or state) keep the upload for a retry.
BUNDLE_REFUSED: tuple[type[BaseException], ...] = (SignatureError, BundleFormatError, UnsafeEntryError,
                                                  IntegrityError, BundleTooLarge, VersionConflict)
# An idle or too slow stream, and a disk that is full or refuses writes while the bytes arrive: the upload's bytes
# are removed (they would hold the space that is missing), and the client uploads again once the board is fixed.
# A complete upload whose unpacking found the disk full stays: once space is freed, sending its last chunk again
# (an empty one at its end) stores it without sending the bundle again.
DISCARDED_ON: tuple[type[BaseException], ...] = (UploadIdle, StorageError)
ADD_WAIT_S = 600.0  # a finished upload waits this long for an activation in progress before it is stored


def _timestamp(info: BundleInfo) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(info.created)
    return stamp


def _activation_response(done: Activated, response: type[R]) -> R:
    """ActivateResponse or RollbackResponse (the same fields) of an activation."""
    return response(
        active_version=done.version, previous_version=done.previous or "",
        self_tests=[models_pb2.SelfTestResult(image=t.image, expected=t.expected, got=t.got, passed=t.passed)
                    for t in done.self_tests])


class ModelsService(models_pb2_grpc.ModelsServiceServicer):
    def __init__(self, config: AgentConfig, store: ModelStore, activator: Activator, uploads: UploadArea) -> None:
        self.config = config
        self.store = store
        self.activator = activator
        self.uploads = uploads
        self._threads = ThreadPoolExecutor(4, thread_name_prefix="vkocr-models")
        self._closing: set[asyncio.Future[None]] = set()  # uploads being closed after their stream ended

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _submit(self, call: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._threads, call, *args)

    async def _run(self, call: Callable[..., T], *args: Any) -> T:
        """`call` on a model-management thread. A client that goes away does not stop it halfway (an
        activation runs to its end or its failure and logs either)."""
        return await asyncio.shield(self._submit(call, *args))

    async def _close_after(self, last: asyncio.Future[Any], upload: Upload | None) -> None:
        """Close `upload` (None: the Upload that `last`, an open, returns, if it does) on a model-management
        thread once `last`, its latest open or append, is done: a cancelled stream does not stop that work, and
        closing (fsync) while it writes, or on the event loop, must not happen."""
        loop = asyncio.get_running_loop()

        def close(target: Upload) -> None:
            try:
                target.close()
            except Exception as exc:  # noqa: BLE001 - the stream is over either way; the bytes held stay
                log.warning("upload_close_failed", upload_id=target.upload_id, error=f"{type(exc).__name__}: {exc}")

        async def when_done() -> None:
            await asyncio.wait([last])
            target = upload
            if target is None and not last.cancelled() and last.exception() is None:
                target = last.result()
            if target is None:
                return
            try:
                closing = loop.run_in_executor(self._threads, close, target)
            except RuntimeError:  # the service is closing and its threads take no more work
                closing = loop.run_in_executor(None, close, target)
            await closing

        task = asyncio.ensure_future(when_done())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        await asyncio.shield(task)

    async def _abort(self, context: grpc.aio.ServicerContext, exc: BaseException, method: str) -> NoReturn:
        status = status_for(exc)
        log.info("model_rpc_refused", method=method, code=rpc_status.code_name(status.code), reason=status.message)
        await rpc_status.abort_async(context, status)

    async def _version(self, context: grpc.aio.ServicerContext, version: str) -> str:
        if not version or not NAME_PATTERN.match(version):
            await rpc_status.abort_async(context, rpc_status.invalid_argument(
                f"version {version!r} is not a version name (letters, digits and . _ + -, at most 128)",
                [("version", "not a version name")]))
        return version

    # -- upload ---------------------------------------------------------------------------------------------

    async def UploadBundle(self, request_iterator: Any, context: grpc.aio.ServicerContext
                           ) -> models_pb2.UploadBundleResponse:
        who = await require_model_admin(context, self.config, "UploadBundle")
        upload: Upload | None = None
        last: asyncio.Future[Any] | None = None  # the latest open or append: a cancelled stream does not stop it
        handed_on = False  # the upload was closed here and went on to the store
        upload_id = ""
        failure: Exception | None = None
        try:
            async for chunk in idle_bounded(request_iterator, self.config.models.upload_idle_s,
                                            min_bytes_per_s=self.config.models.upload_min_bytes_per_s,
                                            size=lambda chunk: len(chunk.data)):
                if upload is None:
                    opening = self._submit(self.uploads.open, chunk.upload_id, chunk.total_size, chunk.sha256)
                    last = opening
                    upload = await asyncio.shield(opening)
                    upload_id = upload.upload_id
                elif chunk.upload_id and chunk.upload_id != upload.upload_id:
                    raise UploadRequestError(f"chunk names upload {chunk.upload_id!r} in the stream of upload "
                                             f"{upload.upload_id!r}: one upload per stream")
                last = self._submit(upload.append, chunk.offset, chunk.data)
                await asyncio.shield(last)
            if upload is None:
                raise UploadRequestError("the upload stream carried no chunk")
            finished, upload, handed_on = upload, None, True
            await self._run(finished.close)
            info = await self._run(self._store, finished)
        except Exception as exc:  # noqa: BLE001 - every failure leaves as a status, once the upload is closed
            failure = exc
        finally:
            # The stream broke, was refused or cancelled: the bytes received stay, to resume. Closed after the
            # last open or append is done (it may still run when the stream was cancelled), on a thread, and
            # before the refusal is sent: a client that resumes at once must not find its upload still busy.
            if last is not None and not handed_on:
                await self._close_after(last, upload)
        if failure is not None:
            # closed above: now nothing of it stays, unless it was complete (handed on to the store)
            if isinstance(failure, DISCARDED_ON) and upload_id and not handed_on:
                await self._run(self.uploads.discard, upload_id)
                log.info("upload_discarded", upload_id=upload_id, reason=type(failure).__name__)
            await self._abort(context, failure, "UploadBundle")
        log.info("bundle_uploaded", upload_id=finished.upload_id, version=info.version, name=info.name,
                 size=info.size, who=who)
        return models_pb2.UploadBundleResponse(version=info.version, name=info.name, size=info.size, sha256=info.sha256)

    def _reload_trusted_keys(self) -> None:
        """Today's trusted keys, read again before each add and activation, so a key added to or removed
        from [models] trusted_keys counts without a restart (deploy/README.md, key rotation)."""
        self.store.trusted = TrustedKeys.from_paths(map(Path, self.config.models.trusted_keys))

    def _store(self, upload: Upload) -> BundleInfo:
        """Checksum, then the store's own checks (signature, manifest, safe extraction) and the new version."""
        path = self.uploads.finish(upload)
        try:
            self._reload_trusted_keys()
            with self.activator.exclusive(f"storing upload {upload.upload_id}", wait_s=ADD_WAIT_S):
                info = self.store.add(path)
        except BUNDLE_REFUSED:
            self.uploads.discard(upload.upload_id)  # complete and intact, yet refused: keeping it helps nobody
            raise
        # Anything else (busy, a trusted key that cannot be read, …) is not the bundle's fault: the bytes stay, and
        # sending the upload's last chunk again stores it once that is fixed. A full or unwritable disk discards
        # them in UploadBundle (DISCARDED_ON).
        self.uploads.discard(upload.upload_id)
        return info

    async def UploadStatus(self, request: models_pb2.UploadStatusRequest, context: grpc.aio.ServicerContext
                           ) -> models_pb2.UploadStatusResponse:
        await require_model_admin(context, self.config, "UploadStatus")
        try:
            received, total = await self._run(self.uploads.status, request.upload_id)
        except Exception as exc:  # noqa: BLE001
            await self._abort(context, exc, "UploadStatus")
        return models_pb2.UploadStatusResponse(received=received, total_size=total)

    # -- activation -----------------------------------------------------------------------------------------

    async def Activate(self, request: models_pb2.ActivateRequest, context: grpc.aio.ServicerContext
                       ) -> models_pb2.ActivateResponse:
        who = await require_model_admin(context, self.config, "Activate")
        version = await self._version(context, request.version)
        try:
            done = await self._run(self._activate, version, who, request.allow_downgrade)
        except Exception as exc:  # noqa: BLE001
            await self._abort(context, exc, "Activate")
        return _activation_response(done, models_pb2.ActivateResponse)

    def _activate(self, version: str | None, who: str, allow_downgrade: bool = False) -> Activated:
        """Activate `version` (older than the high-water mark only with `allow_downgrade`), or roll back when
        None (an explicit downgrade)."""
        self._reload_trusted_keys()
        if version is None:
            return self.activator.rollback(who=who)
        if allow_downgrade:
            log.warning("activation_downgrade_allowed", version=version, who=who)
        return self.activator.activate(version, allow_downgrade=allow_downgrade, who=who)

    async def Rollback(self, request: models_pb2.RollbackRequest, context: grpc.aio.ServicerContext
                       ) -> models_pb2.RollbackResponse:
        who = await require_model_admin(context, self.config, "Rollback")
        try:
            done = await self._run(self._activate, None, who)
        except Exception as exc:  # noqa: BLE001
            await self._abort(context, exc, "Rollback")
        return _activation_response(done, models_pb2.RollbackResponse)

    # -- the store ------------------------------------------------------------------------------------------

    async def ListBundles(self, request: models_pb2.ListBundlesRequest, context: grpc.aio.ServicerContext
                          ) -> models_pb2.ListBundlesResponse:
        await require_model_admin(context, self.config, "ListBundles")
        try:
            infos, active = await self._run(lambda: (self.store.versions(), self.store.active()))
        except Exception as exc:  # noqa: BLE001
            await self._abort(context, exc, "ListBundles")
        return models_pb2.ListBundlesResponse(active_version=active or "", bundles=[
            models_pb2.BundleInfo(name=i.name, version=i.version, created=_timestamp(i), size=i.size,
                                  sha256=i.sha256, active=i.active, signer=i.signer or "") for i in infos])

    async def DeleteBundle(self, request: models_pb2.DeleteBundleRequest, context: grpc.aio.ServicerContext
                           ) -> models_pb2.DeleteBundleResponse:
        who = await require_model_admin(context, self.config, "DeleteBundle")
        version = await self._version(context, request.version)

        def delete() -> None:
            with self.activator.exclusive(f"deleting {version}"):
                self.store.delete(version)

        try:
            await self._run(delete)
        except Exception as exc:  # noqa: BLE001
            await self._abort(context, exc, "DeleteBundle")
        log.info("bundle_deleted", version=version, who=who)
        return models_pb2.DeleteBundleResponse()
