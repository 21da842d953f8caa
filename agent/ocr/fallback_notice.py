"""Who hears that the CPU backend serves because no GPU is usable (agent/ocr/backend_choice.py says it).

The agent (a board whose GPU is missing or denied) says it as a warning, once per process however often it
rebuilds. A local command (`vkocr ocr`, the benches: `quiet_without_gpu`) warns only when a GPU is there but
unusable: on a machine without any GPU the CPU is what it expects, and `vkocr devices` says why; the event is
then info. Imports nothing, so the CLI can set it before it knows whether the command opens a backend.
"""

from __future__ import annotations

from typing import Literal


class FallbackNotice:
    def __init__(self) -> None:
        self.quiet_without_gpu = False  # set by the CLI for every command that is not the agent
        self.warned = False

    def level(self, *, has_gpu: bool) -> Literal["info", "warning"]:
        """The log level of this process's next `cpu_backend_chosen`; `has_gpu`: the machine has a GPU (not
        only CPU implementations of Vulkan), unusable."""
        if self.warned or (self.quiet_without_gpu and not has_gpu):
            return "info"
        self.warned = True
        return "warning"


FALLBACK_NOTICE = FallbackNotice()
