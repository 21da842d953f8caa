"""[throughput] and [experimental] of the agent's configuration (agent/serving/config.py), and what resolves their
"automatic" values into numbers. Plain numbers and dataclasses: loading the configuration imports no runtime.

`ThroughputConfig` is what the flow reads (agent/serving/flow.py), as it is: the lanes, the batching and the
image slots they hold. `ExperimentalConfig` holds the switches that exist to measure what something buys (the
overlap, decode processes, several device queues): they serve, but a deployment has no reason to change them.
These keys were [server]'s; a file, a variable or a flag that still says `[server] detect_lanes` is taken, with
one warning naming the new place (`MOVED`)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Final

from vkocr.agent.serving.errors import ConfigError

MAX_LANES = 8  # detect_lanes' and read_lanes' range (each holds its own plans of its models)
MAX_BATCH_REQUESTS = 64  # batch_requests' range
MAX_BATCH_WAIT_MS = 50.0  # batch_wait_ms' range (from 0)
MAX_BATCH_LINES = 64  # batch_lines' range: the GPU stages' largest batch
MAX_JOINT_BATCHES = 8  # joint_batches' range (each beyond the first holds a copy of rec's activations, ≤ 128 MiB)
MAX_IMAGE_SLOTS = 256  # image_slots' range (from 0: automatic)
MAX_DECODE_PROCESSES = 64  # decode_processes' range (from 0: decode on the decode threads)
AUTO_DECODE_THREADS = 16  # server.decode_threads = 0: one per core, at most this many


@dataclass
class ThroughputConfig:
    # The lanes (agent/serving/flow.py), each a thread with a stream (queue) of the device to itself: detection
    # lanes run a request's image, detection and DB; reading lanes classify and recognise the crops of every
    # request that is ready, together. The CPU backend runs one lane for both (onnxruntime uses every core).
    detect_lanes: int = 2
    read_lanes: int = 2  # 0 (resolved, never configured): the detection lane reads too, one request at a time
    batch_requests: int = 8  # requests one reading lane reads together, at most
    # how long a reading lane with fewer waits for more, while others are in detection (never for a lone request)
    batch_wait_ms: float = 2.0
    batch_lines: int = 16  # crops of one width in one recogniser submission, at most (batch sizes: powers of two)
    # recogniser batches of different widths in one submission, side by side (vk/graph/joint.py): a batch of a
    # few lines leaves most of a GPU idle between its barriers; 1: one submission each. 1 by default: the joint
    # recording is made per round on the host, and on an H100 at 16 clients the agent answered 96.5 images/s with
    # 1, 89.1 with 4 and 83.1 with 6 (BENCHMARKS.md, session 27)
    joint_batches: int = 1
    # images held on the device at once, from a request's detection to its reading (2048² RGB each, 12 MiB);
    # 0: enough for the lanes and batches above, as many as the device binds
    image_slots: int = 0

    @property
    def lanes(self) -> tuple[int, int]:
        """(detection, reading) lanes."""
        return self.detect_lanes, self.read_lanes

    @property
    def batch_wait_s(self) -> float:
        return self.batch_wait_ms / 1e3

    def validate(self) -> None:
        for name, low, high in (("detect_lanes", 1, MAX_LANES), ("read_lanes", 1, MAX_LANES),
                                ("batch_requests", 1, MAX_BATCH_REQUESTS), ("batch_wait_ms", 0, MAX_BATCH_WAIT_MS),
                                ("batch_lines", 1, MAX_BATCH_LINES), ("joint_batches", 1, MAX_JOINT_BATCHES),
                                ("image_slots", 0, MAX_IMAGE_SLOTS)):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"[throughput]: {name} must be {low} to {high}, got {value}")


@dataclass
class ExperimentalConfig:
    # false: one lane runs each request's every step, plugins included, one request at a time (only to measure
    # what the overlap and the batching buy)
    overlap: bool = True
    # processes that decode images, so that Pillow's decoding does not hold the agent's GIL
    # (agent/serving/decode_processes.py); 0: decode on the decode threads. On the H200 host 8 gave 1.2x the
    # images/s at 64 clients and cost a lone request 16 ms (BENCHMARKS.md)
    decode_processes: int = 0
    # device queues the lanes' streams submit to. On the H200, 2 to 6 queues ran no more work than one (the GPU
    # took their submissions one at a time, and each took 20 % longer: BENCHMARKS.md), so the lanes share one;
    # a GPU that runs queues side by side may gain from more
    gpu_queues: int = 1

    def validate(self) -> None:
        if not 0 <= self.decode_processes <= MAX_DECODE_PROCESSES:
            raise ConfigError(f"[experimental]: decode_processes must be 0 (decode on threads) to "
                              f"{MAX_DECODE_PROCESSES}, got {self.decode_processes}")
        if not 1 <= self.gpu_queues <= 2 * MAX_LANES:
            raise ConfigError(f"[experimental]: gpu_queues must be 1 to {2 * MAX_LANES}, got {self.gpu_queues}")


# [server] keys that moved, by their new section
MOVED: Final = {**{key: "throughput" for key in (f.name for f in dataclasses.fields(ThroughputConfig))},
                **{key: "experimental" for key in (f.name for f in dataclasses.fields(ExperimentalConfig))}}


@dataclass(frozen=True)
class Resolved:
    """What the agent serves with where the configuration says "automatic" (0) or leaves it to the backend:
    worked out once, at start-up (`resolve`), and logged (`config_resolved`)."""

    throughput: ThroughputConfig  # the lanes as they run: one lane reads too with the overlap off
    decode_threads: int
    gpu_queues: int
    cpu_threads: int

    def log_fields(self) -> dict[str, int]:
        t = self.throughput
        return {"decode_threads": self.decode_threads, "detect_lanes": t.detect_lanes, "read_lanes": t.read_lanes,
                "image_slots": t.image_slots, "gpu_queues": self.gpu_queues, "cpu_threads": self.cpu_threads}


def decode_thread_count(configured: int) -> int:
    """server.decode_threads as the agent runs it: 0 means one per core, at most AUTO_DECODE_THREADS."""
    return configured or min(AUTO_DECODE_THREADS, os.cpu_count() or 1)


def resolve(throughput: ThroughputConfig, experimental: ExperimentalConfig, decode_threads: int, cpu_threads: int
            ) -> Resolved:
    """Every "automatic" of the configuration as a number: the lanes with the overlap off (one, reading too),
    the image slots (enough for the lanes and their batches), the device queues (no more than the lanes), the
    decode threads (one per core, at most AUTO_DECODE_THREADS), the CPU backend's threads (every core this
    process may run on)."""
    lanes = throughput if experimental.overlap else dataclasses.replace(throughput, detect_lanes=1, read_lanes=0)
    detect, read = lanes.lanes
    slots = throughput.image_slots or detect + read * throughput.batch_requests + 2
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return Resolved(dataclasses.replace(lanes, image_slots=slots), decode_thread_count(decode_threads),
                    min(experimental.gpu_queues, detect + read), cpu_threads or cores)
