"""The fenced blocks of a Markdown page, and the one bash session that runs its examples (docs/setup.md, "The tests").

A ```sh block is run as it stands, a ```python block by the session's `python`, both in the page's order; every
other block is shown only and carries, on the line just before its fence, `<!-- output -->` (an example's output)
or `<!-- not run: REASON -->`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN = ("sh", "python")
SHOWN_ONLY_NOTE = re.compile(r"<!-- (output|not run: \S.*) -->")
FENCE = re.compile(r"```(\w*)\s*")
PYTHON_END = "README_PYTHON_BLOCK_END"  # the heredoc's delimiter: no example may hold this line


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # the opening fence's line, 1-based
    language: str
    text: str
    note: str | None  # the HTML comment on the line before the fence, if any

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUN


def blocks(root: Path, page: str) -> list[Block]:
    """Every fenced block of root/page (fences at the start of a line; ```` ```sh ```` within a line is text)."""
    lines = (root / page).read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.fullmatch(lines[i])
        if opening is None:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if FENCE.fullmatch(lines[j]) and lines[j].strip() == "```"),
                   None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: a fenced block that is never closed")
        previous = lines[i - 1].strip() if i > 0 else ""
        note = previous if previous.startswith("<!--") else None
        found.append(Block(page, i + 1, opening.group(1), "\n".join(lines[i + 1:end]), note))
        i = end + 1
    return found


def session_script(blocks_to_run: list[Block], cwd: Path) -> str:
    """One bash script: each block in turn, announced by a `### page:line` line, stopping at the first failure."""
    parts = ["set -eo pipefail", f"cd '{cwd}'"]
    for block in blocks_to_run:
        parts.append(f"echo '### {block.where} ({block.language})'")
        if block.language == "sh":
            parts.append(block.text)
        else:
            parts.append(f"python - <<'{PYTHON_END}'\n{block.text}\n{PYTHON_END}")
    return "\n".join(parts) + "\n"
