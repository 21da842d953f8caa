"""How the GPU worker opens its pipeline again after the device failed (agent/serving/worker.py): the failed one is
closed, a new one is opened a few times with a growing pause between tries, and when none opens, the CPU backend
takes over if the deployment allows it (device.cpu_fallback)."""

from __future__ import annotations

import time
from collections.abc import Callable

from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.log import get_logger

log = get_logger(__name__)

PipelineFactory = Callable[[], OcrPipeline]
REBUILD_ATTEMPTS = 3
REBUILD_BACKOFF_S = 0.5


def reopen(failed: OcrPipeline | None, open_pipeline: PipelineFactory, cpu_fallback: PipelineFactory | None,
           reason: str) -> OcrPipeline | None:
    """Close `failed`, then a new pipeline from `open_pipeline` (REBUILD_ATTEMPTS tries), else from
    `cpu_fallback`; None when neither opens (every failure is logged)."""
    if failed is not None:
        try:
            failed.close()
        except Exception as exc:  # noqa: BLE001 - a lost device may refuse even its destruction
            log.warning("failed_pipeline_close", error=str(exc))
    for attempt in range(1, REBUILD_ATTEMPTS + 1):
        try:
            return open_pipeline()
        except Exception as exc:  # noqa: BLE001
            log.error("device_rebuild_failed", attempt=attempt, error=str(exc))
            time.sleep(REBUILD_BACKOFF_S * attempt)
    if cpu_fallback is not None:
        log.warning("falling_back_to_cpu", reason=reason)
        try:
            return cpu_fallback()
        except Exception as exc:  # noqa: BLE001
            log.error("cpu_fallback_failed", error=str(exc))
    return None
