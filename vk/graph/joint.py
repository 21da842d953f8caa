"""Several plans of one model in one submission (DESIGN.md, "Precision": fewer barriers).

A small batch leaves most of a GPU idle: rec's plan of one line at 320 px runs 117 dispatches, each behind a
barrier, and takes as long as four lines. Plans of different shapes cannot share one batch (their tensors
differ), but they can share one submission: plan 0 runs in its model's memory, plan i in copy i of it (the
recipe's commands moved there and packed, vk/commands.py `packing` and `relocate`: a placement made for the
model's largest shape spreads a small plan's tensors over all of it), and their commands interleave behind
shared barriers (`interleave`), so the dispatches of one run beside the others'. On an H100, six rec batches of
1 to 4 lines at six widths took 4.7 ms of GPU time together against 9.4 ms one after another.

Only plans that take their input from a prologue and hand their outputs to an epilogue run here (their hooks
read and write buffers the caller owns, one set per plan: `moves` says where each plan's are); the copies hold
activations alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Self

from vkocr.engine.commands import Commands, interleave, packing, relocate
from vkocr.engine.errors import ModelError
from vkocr.engine.graph.plan import DEFAULT_TIMEOUT_S, Plan
from vkocr.engine.graph.shared_memory import SharedMemory
from vkocr.engine.memory import BufferView
from vkocr.engine.recorder import Recorder

if TYPE_CHECKING:
    from vkocr.engine.graph.model import Model
    from vkocr.engine.streams import Stream


class JointRuns:
    """Up to `width` plans of `model` at once, in one submission on `stream`. Copies of the activation memory
    are made as plans need them and grow like the model's own (vk/graph/shared_memory.py). A plan in a copy takes
    only what its own tensors hold (`commands.packing`: a placement made for the model's largest shape spreads a
    small one's tensors over all of it); one that would need more than `copy_limit_bytes` there is refused."""

    def __init__(self, model: Model, width: int, *, copy_limit_bytes: int, stream: Stream | None = None) -> None:
        if model.device is None or model.shared is None:
            raise ModelError("joint runs record GPU work: the CPU backend has none")
        if width < 1 or copy_limit_bytes < 0:
            raise ValueError(f"width must be ≥ 1 and copy_limit_bytes ≥ 0, got {width} and {copy_limit_bytes}")
        self.model, self.width, self.copy_limit_bytes, self.stream = model, width, copy_limit_bytes, stream
        self._copies = [SharedMemory(model.device) for _ in range(width - 1)]
        self._packed: dict[int, tuple[Plan, Commands, list[tuple[BufferView, int]], int]] = {}  # by id(plan)

    def fits(self, plan: Plan) -> bool:
        """Whether `plan` runs in a copy: its tensors, packed, take at most `copy_limit_bytes` (what was worked
        out here serves the next `run`)."""
        return self._pack(plan)[3] <= self.copy_limit_bytes

    def _pack(self, plan: Plan) -> tuple[Plan, Commands, list[tuple[BufferView, int]], int]:
        found = self._packed.get(id(plan))
        if found is None or found[0] is not plan:
            if len(self._packed) >= 2 * self.width:  # asked of plans that never ran: forget them
                self._packed.clear()
            assert self.model.shared is not None and self.model.device is not None
            commands = self.model.commands_of(plan)
            clusters, need = packing(commands, self.model.shared.region("device").view, self.model.device.alignment)
            found = self._packed[id(plan)] = (plan, commands, clusters, need)
        return found

    @property
    def nbytes(self) -> int:
        """Device memory the copies hold now."""
        return sum(c.nbytes for c in self._copies)

    def run(self, plans: Sequence[Plan], moves: Sequence[Sequence[tuple[BufferView, BufferView]]],
            timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Run `plans` (this model's, current, at most `width`) as one submission: plan 0 in the model's own
        memory, plan i in copy i (put the largest first), its hooks' buffers moved as ``moves[i]`` says
        (``(theirs, plan i's own)`` pairs; ``moves[0]`` is normally empty). Returns once the GPU is done; the
        epilogues' readbacks then hold every plan's results. Nothing runs when one is refused (ModelError)."""
        if not 1 <= len(plans) <= self.width or len(moves) != len(plans):
            raise ValueError(f"1 to {self.width} plans, a list of moves each; got {len(plans)} and {len(moves)}")
        device = self.model.device
        assert self.model.shared is not None and device is not None
        recordings = []
        for i, (plan, plan_moves) in enumerate(zip(plans, moves)):
            if plan.has_host_io:
                raise ModelError("a plan in a joint run takes its input from a prologue and reads no outputs back")
            if plan.stale:
                raise ModelError("a stale plan (its model's memory was replaced) cannot run")
            if i:
                _, commands, clusters, need = self._pack(plan)
                if need > self.copy_limit_bytes:
                    raise ModelError(f"a plan whose tensors take {need} B runs in the model's own memory only "
                                     f"(copies hold at most {self.copy_limit_bytes} B)")
                copy = self._copies[i - 1]
                copy.reserve(need)
                into = copy.region("device").view
                packed = [(old, BufferView(into.buffer, into.offset + at, old.size)) for old, at in clusters]
                commands = relocate(commands, [*packed, *plan_moves])
            else:
                found = self._packed.get(id(plan))
                commands = found[1] if found is not None and found[0] is plan else self.model.commands_of(plan)
                if plan_moves:
                    commands = relocate(commands, plan_moves)
            recordings.append(commands)
        self._packed.clear()  # worked out for this run's plans only: they may be closed or stale after it
        with Recorder(device, stream=self.stream) as rec:
            rec.end_with(interleave(recordings))
            rec.submit()
            rec.wait(timeout_s)

    def close(self) -> None:
        for copy in self._copies:
            copy.close()
        self._copies = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
