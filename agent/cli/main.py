"""The `vkocr` command line: the top-level options and which module builds and runs each command."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Final, NoReturn

from vkocr.agent.cli.logs import configure_logging
from vkocr.errors import VkocrError
from vkocr.log import get_logger

log = get_logger(__name__)
AGENT_COMMANDS: Final = ("serve",)  # the process is the agent: falling back to the CPU is a warning
CLOSED_PIPE_EXIT: Final = 141  # 128 + SIGPIPE: what a shell reports when `yes | head -1` ends `yes`

DESCRIPTION = """\
vkocr: PP-OCR text detection, direction classification and recognition on Vulkan compute shaders.

Commands available now:
  serve            run the gRPC agent: OCR, status streaming, health, reflection
  ocr              read text in images and PDFs: detection, direction, recognition (no server)
  client           talk to running agents over gRPC: ocr, stream, watch, health
  devices          list every Vulkan device, its features, and which one vkocr would use and why
  infer            run one ONNX model on one tensor (.npy in, .npy out)
  inspect          what the graph passes and the plan make of a model at one input shape
  debug compare    ours against onnxruntime node by node: the first node that diverges
  models list      the model sets (ppocrv6-small, ppocrv4): which are installed, which is the default
  bench kernels    time the core kernels on the chosen device against measured ceilings
  bench models     time the PP-OCR models: ours, onnxruntime (CPU) and ncnn (Vulkan) in one run
  bench pipeline   the whole OCR pipeline per image against RapidOCR 1.4.4 (CPU)
  bench stream     the pipeline on a stream of distinct images, each once per pass, against RapidOCR 1.4.4
  bench agent      the gRPC agent's throughput and latency at 1, 4 and 16 clients
  bench startup    `vkocr serve` from process start to SERVING and to the first answer, cold and cached
  calibrate        measure which nodes of a model set may store fp16, and write its precision plans
  bundle           model bundles: keygen, create, sign, verify, inspect
  fleet            roll a bundle out to several agents (canary, soak, rollback), or show their versions

Exit status: 0; 1 when an input could not be read or an output not written; 2 for a usage error (one line
names it; `vkocr COMMAND --help` shows the usage); 141 when the reader of the output closed it early
(`vkocr ocr DIR --json | head -1`), quietly, as Unix tools do.
"""


# Each command's parser is built by the module that runs it, and only for the command being run: `vkocr ocr`
# imports nothing of the agent's serving or bundle code. The others get an entry with their one-line help.
REGISTRARS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("serve",), "vkocr.agent.cli.serve_command", "add_serve_parser"),
    (("ocr",), "vkocr.agent.cli.ocr_command", "add_ocr_parser"),
    (("client",), "vkocr.agent.cli.client_command", "add_client_parser"),
    (("devices",), "vkocr.agent.cli.devices_report", "add_devices_parser"),
    (("infer", "inspect", "debug"), "vkocr.agent.cli.onnx_commands", "add_model_parsers"),
    (("models",), "vkocr.agent.cli.models_command", "add_models_parser"),
    (("bench",), "vkocr.agent.cli.bench_command", "add_bench_parser"),
    (("calibrate",), "vkocr.agent.cli.calibrate_command", "add_calibrate_parser"),
    (("bundle",), "vkocr.agent.cli.bundle_command", "add_bundle_parser"),
    (("fleet",), "vkocr.agent.cli.fleet_command", "add_fleet_parser"),
)
SUMMARY = {
    "serve": "run the gRPC agent (OCR, status, health, reflection)",
    "ocr": "read text in images and PDFs, locally",
    "client": "talk to a running agent: ocr, stream, watch, health",
    "devices": "list Vulkan devices and the one vkocr would choose",
    "infer": "run one ONNX model on one tensor",
    "inspect": "nodes, dispatches, weights and planned memory of a model",
    "debug": "debugging tools",
    "models": "model sets: which are installed, which is the default",
    "bench": "benchmarks (run on the machine you want numbers for)",
    "calibrate": "measure which nodes of a model set may store fp16, and write its precision plans",
    "bundle": "model bundles: keygen, create, sign, verify, inspect",
    "fleet": "roll a bundle out to several agents, or show their versions",
}


class OneLineErrors(argparse.ArgumentParser):
    """A parser whose usage errors are one line naming what is wrong (the usage block is for --help); every
    command's parser is one too (argparse builds subparsers of their parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` shows the usage)\n")


def _top_level(*, add_help: bool) -> argparse.ArgumentParser:
    from vkocr import __version__

    parser = OneLineErrors(prog="vkocr", description=DESCRIPTION, add_help=add_help,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"vkocr {__version__}")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                        help="log events at this level and above go to stderr (default: warning; `vkocr serve`: "
                        "its [logging] level, info)")
    parser.add_argument("--log-json", action="store_true",
                        help="log as JSON lines (the commands log key/value lines; `vkocr serve` logs JSON "
                        "unless its [logging] json is false)")
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names: its first word after the top-level options, if it is a command."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)  # its value
        elif not word.startswith("-"):
            return word if word in SUMMARY else None
    return None


def build_parser(command: str | None) -> argparse.ArgumentParser:
    """The parser: `command`'s arguments in full, and a one-line entry for every other command."""
    from vkocr import __version__

    parser = _top_level(add_help=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for names, module, function in REGISTRARS:
        if command in names:
            getattr(importlib.import_module(module), function)(sub)
            for name in names:
                add_version_everywhere(sub.choices[name], f"vkocr {__version__}")
        else:
            for name in names:
                sub.add_parser(name, help=SUMMARY[name])
    return parser


def add_version_everywhere(parser: argparse.ArgumentParser, version: str) -> None:
    """`--version` on `parser` and every command under it (`vkocr ocr --version`, `vkocr client health
    --version`), except where the command has a --version of its own (`bundle create`: the bundle's), whose
    help then says how to get vkocr's."""
    own = parser._option_string_actions.get("--version")  # argparse keeps no public index of its options
    if own is None:
        parser.add_argument("--version", action="version", version=version, help="print vkocr's version and exit")
    elif own.help is not None and not isinstance(own, argparse._VersionAction):
        own.help += " (vkocr's own version: `vkocr --version`)"
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # a command's aliases share one parser
                add_version_everywhere(child, version)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # gRPC core's own info lines (a failed handshake) are noise
    parser = build_parser(command_of(argv))
    args = parser.parse_args(argv)
    configure_logging(args.log_level or "warning", json=args.log_json)
    if args.command not in AGENT_COMMANDS:
        from vkocr.agent.ocr.fallback_notice import FALLBACK_NOTICE

        FALLBACK_NOTICE.quiet_without_gpu = True  # a local command: on a machine without a GPU, the CPU is expected
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except VkocrError as exc:
        print(f"vkocr: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return closed_pipe()
    except KeyboardInterrupt:
        return 130  # as a shell reports Ctrl-C (128 + SIGINT), without Python's traceback
    except OSError as exc:  # an output file or folder that cannot be written, a device file, …
        print(f"vkocr: error: {os_error_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug of ours: one line, the traceback in the debug log
        log.debug("command_failed", exc_info=True)
        print(f"vkocr: error: {type(exc).__name__}: {exc} (a bug: `vkocr --log-level debug …` shows where; "
              "please report it)", file=sys.stderr)
        return 70  # EX_SOFTWARE (sysexits.h): an internal error


def closed_pipe() -> int:
    """The reader of stdout went away (`vkocr ocr DIR --json | head -1`): stop quietly, as Unix tools do, with
    141 (128 + SIGPIPE, what a shell reports for them). Stdout now points at /dev/null, so the interpreter's
    flush at exit finds nobody to complain to."""
    try:
        stdout = sys.stdout.fileno()
    except (OSError, ValueError):  # no file descriptor (a caller's replaced stdout): nothing left to flush
        return CLOSED_PIPE_EXIT
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stdout)
    os.close(devnull)
    return CLOSED_PIPE_EXIT


def os_error_line(exc: OSError) -> str:
    """`[Errno 2] No such file or directory: 'x'` as `x: no such file or directory`."""
    what = exc.strerror.lower() if exc.strerror else str(exc)
    return f"{exc.filename}: {what}" if exc.filename is not None else what


if __name__ == "__main__":
    sys.exit(main())
