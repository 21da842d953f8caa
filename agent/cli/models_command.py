"""`vkocr models list`: the model sets vkocr knows, which are installed (every file present with its sha256) in
the models folder, their procedure and reference, and which one is the default."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from vkocr.agent.errors import AgentError


def sets_report(directory: Path) -> list[dict[str, Any]]:
    """One entry per known set: name, default, procedure, reference wheel, installed, and each file's state
    ("ok", "missing" or "sha256 differs")."""
    from vkocr.agent.ocr.model_files import DEFAULT_SET, MODEL_SETS, sha256_of

    report = []
    for model_set in MODEL_SETS.values():
        files = []
        for m in model_set.files:
            path = directory / m.filename
            state = "missing" if not path.is_file() else "ok" if sha256_of(path) == m.sha256 else "sha256 differs"
            files.append({"role": m.role, "path": str(path), "state": state})
        report.append({"name": model_set.name, "default": model_set is DEFAULT_SET,
                       "procedure": model_set.procedure, "reference": model_set.wheel,
                       "installed": all(f["state"] == "ok" for f in files), "files": files})
    return report


def format_sets(report: list[dict[str, Any]], directory: Path) -> str:
    lines = [f"model sets in {directory}:"]
    for entry in report:
        mark = " (default)" if entry["default"] else ""
        state = "installed" if entry["installed"] else "not installed"
        lines.append(f"  {entry['name']}{mark}: {state}; procedure {entry['procedure']}, files of "
                     f"{entry['reference']}")
        lines += [f"    {f['role']}  {f['state']:<14}  {f['path']}" for f in entry["files"]]
    if not all(e["installed"] for e in report):
        lines.append("scripts/fetch_models.py installs every set (checked by sha256)")
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
    from vkocr.agent.ocr.model_files import models_dir

    directory = args.dir or models_dir()
    if args.dir is not None and not args.dir.is_dir():  # the default folder may not exist yet: nothing installed
        raise AgentError(f"--dir {args.dir}: no such folder")
    report = sets_report(directory)
    if args.json:
        print(json.dumps({"dir": str(directory), "sets": report}, indent=2))
    else:
        print(format_sets(report, directory))
    return 0


def add_models_parser(sub: Any) -> None:
    models = sub.add_parser("models", help="model sets: which are installed, which is the default")
    models_sub = models.add_subparsers(dest="models_command", metavar="WHAT", required=True)
    listing = models_sub.add_parser(
        "list", help="the model sets, installed or not, and the default",
        description="List the model sets vkocr knows (`vkocr ocr --models NAME`), whether each is installed in "
        "the models folder (VKOCR_MODELS, else ~/.local/share/vkocr/models): every file present with its "
        "sha256, its procedure (whose steps between the networks it follows) and the default set.")
    listing.add_argument("--dir", type=Path, metavar="DIR", help="look in this folder instead")
    listing.add_argument("--json", action="store_true", help="print as JSON")
    listing.set_defaults(func=cmd_list)
