"""A progress bar for commands that read many inputs: tqdm, on stderr only, so stdout (--json) stays clean.

Shown when asked for (--progress), or on its own when stderr is a terminal and there is more than one input;
never when stderr is a file or a pipe unless asked for, where a bar's carriage returns would be noise.
"""

from __future__ import annotations

import sys
from typing import Any, Self, TextIO


def wants_bar(total: int, *, forced: bool, stream: TextIO) -> bool:
    return forced or (total > 1 and stream.isatty())


class Progress:
    """Counts inputs done; prints result lines to stdout without tearing the bar (tqdm lifts it, writes the
    line, and draws it again below)."""

    def __init__(self, total: int, *, forced: bool = False, unit: str = "image", stream: TextIO | None = None
                 ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._bar: Any = None
        if wants_bar(total, forced=forced, stream=self._stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, file=self._stream, dynamic_ncols=True, leave=True)

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def print(self, line: str, *, err: bool = False) -> None:
        """One line to stdout (stderr with `err`), below the bar."""
        out = sys.stderr if err else sys.stdout
        if self._bar is None:
            print(line, file=out, flush=True)
            return
        self._bar.write(line, file=out)
        out.flush()

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
