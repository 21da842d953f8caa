"""`vkocr client …`: talk to running agents over gRPC: ocr, stream, watch, health.

Output matches the local `vkocr ocr` (same JSON shape, same readable form). A failed RPC prints its status
code name and details to stderr and exits 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from vkocr.agent.cli.ocr_command import INPUT_HELP, format_text, pdf_dpi
from vkocr.agent.cli.ocr_flags import add_ocr_flags, option_overrides
from vkocr.agent.cli.ocr_inputs import DEFAULT_PDF_DPI, PDF_DPI_RANGE, Inputs
from vkocr.agent.errors import ImageError, OptionsError
from vkocr.agent.serving.call_deadlines import OCR_TIMEOUT_S, SLOW_OCR_TIMEOUT_S

if TYPE_CHECKING:  # grpc and the stubs load when a client command runs, not whenever `vkocr` starts
    from vkocr.agent.serving.client import OcrClient
    from vkocr.v1 import status_pb2

DEFAULT_CALL_TIMEOUT_S: Final = 60.0  # health calls (ocr: OcrClient.ocr_timeout); streams and watches: none
EXIT_RPC_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_UNIT_S: Final = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

EXAMPLES = """\
examples:
  vkocr client ocr --target 10.0.0.7:50051 label.jpg --json
  vkocr client ocr --target 10.0.0.7:50051 scans/ invoice.pdf      # every image and PDF page, as `vkocr ocr`
  cat scan.png | vkocr client ocr --target 10.0.0.7:50051 -
  VKOCR_TARGET=10.0.0.7:50051,10.0.0.8:50051 vkocr client stream shots/
  vkocr client watch --target board7:50051 --interval 2s --count 10
  vkocr client health --target board7:50051 --tls-ca ca.pem --tls-cert me.pem --tls-key me.key
"""


def parse_duration(text: str) -> float:
    """``"500ms"``, ``"2s"``, ``"1.5m"``, ``"1h"`` or plain seconds (``"0.5"``) → seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 500ms, 2s, 1.5m, 0.5)")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2) or "s"]
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the duration must be positive")
    return seconds


def add_client_parser(subparsers: Any) -> None:
    """Register `vkocr client` and its commands on the top-level subparsers."""
    client = subparsers.add_parser(
        "client", help="talk to a running agent: ocr, stream, watch, health",
        description="Send images to running vkocr agents over gRPC, watch their status, check their health. "
        "Several targets (HOST:PORT,HOST:PORT…) share one channel that spreads calls round-robin over every "
        "agent that is up. A failed call prints its gRPC status code and details and exits 1.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = client.add_subparsers(dest="client_command", metavar="WHAT", required=True)
    common = _common_options()

    ocr = what.add_parser("ocr", parents=[common], help="read text in images, one call per image",
                          description="Recognise each INPUT (as `vkocr ocr` reads them: images, PDF pages, "
                          "directories, -) with one Recognize call, in order. Exit status 1 "
                          "when an image or a call failed (a bad image does not stop the others; an agent that cannot "
                          "answer does).",
                          epilog="example:\n  vkocr client ocr --target 10.0.0.7:50051 a.jpg b.png --json",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    _ocr_options(ocr)
    ocr.set_defaults(func=cmd_ocr)

    stream = what.add_parser("stream", parents=[common], help="read text in images over one stream",
                             description="Send every INPUT (as `vkocr ocr` reads them: images, PDF pages, "
                             "directories, -) over one RecognizeStream and print each answer as it comes (in "
                             "order). Exit status 1 when an image or the stream failed.",
                             epilog="example:\n  vkocr client stream --target 10.0.0.7:50051 shots/*.png",
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    _ocr_options(stream)
    stream.set_defaults(func=cmd_stream)

    watch = what.add_parser("watch", parents=[common], help="stream the agent's status, one line per update",
                            description="Print the agent's state now, on every change and at least every "
                            "--interval: serving state, device, model, queue, latency, counts, GPU memory.",
                            epilog="example:\n  vkocr client watch --target 10.0.0.7:50051 --interval 1s",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    watch.add_argument("--interval", type=parse_duration, metavar="DURATION",
                       help="at least one update this often, e.g. 1s or 500ms (default: the agent's)")
    watch.add_argument("--count", type=int, metavar="N", help="stop after N updates")
    watch.add_argument("--json", action="store_true", help="one JSON object per update, one per line")
    watch.set_defaults(func=cmd_watch)

    health = what.add_parser("health", parents=[common], help="grpc.health.v1 check: exit 0 when SERVING",
                             description="Print the agent's health (SERVING, NOT_SERVING, …) from the "
                             "standard grpc.health.v1 service. Exit status 0 when SERVING, 1 otherwise.",
                             epilog="example:\n  vkocr client health --target 10.0.0.7:50051 --watch",
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    health.add_argument("--service", default="", metavar="NAME",
                        help="the service to ask about, e.g. vkocr.v1.OcrService (default: the whole agent)")
    health.add_argument("--watch", action="store_true", help="print the status now and on every change")
    health.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N updates")
    health.add_argument("--json", action="store_true",
                        help='{"target", "service", "status"} instead of the bare status; with --watch one per '
                        "line")
    health.set_defaults(func=cmd_health)


def _common_options() -> argparse.ArgumentParser:
    env_target = os.environ.get("VKOCR_TARGET")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--target", required=not env_target, default=env_target,
                        metavar="HOST:PORT[,HOST:PORT…]",
                        help="the agent(s); several are used round-robin (default: $VKOCR_TARGET)")
    common.add_argument("--tls-ca", type=Path, metavar="CA.pem",
                        help="use TLS, trusting this CA (default: plaintext)")
    common.add_argument("--tls-cert", type=Path, metavar="CERT.pem",
                        help="client certificate, for mutual TLS")
    common.add_argument("--tls-key", type=Path, metavar="KEY.pem", help="the client certificate's key")
    common.add_argument("--tls-server-name", metavar="NAME",
                        help="the name to check in the agents' certificates (default: the target's host)")
    common.add_argument("--timeout", type=parse_duration, metavar="DURATION",
                        help="deadline per call, e.g. 5s (default for ocr: what the agent's backend needs, "
                        f"{OCR_TIMEOUT_S:g}s on a GPU or the CPU backend, {SLOW_OCR_TIMEOUT_S:g}s on lavapipe or "
                        f"numpy; {DEFAULT_CALL_TIMEOUT_S:g}s for health; none for stream and watches)")
    return common


def _ocr_options(p: argparse.ArgumentParser) -> None:
    add_ocr_flags(p, remote=True, images_help=INPUT_HELP, images_metavar="INPUT")
    p.add_argument("--json", action="store_true",
                   help='one JSON object per image or PDF page, one per line: {"image", "lines": [{"text", '
                   '"score", "box", "angle"}], "timings_ms", "device", "model_version", "request_id"}, as '
                   '`vkocr ocr --json`; an input that failed: {"image", "error"}')
    p.add_argument("--pdf-dpi", type=pdf_dpi, default=DEFAULT_PDF_DPI, metavar="DPI",
                   help=f"resolution PDF pages are rendered at here, before sending, {PDF_DPI_RANGE[0]:g} to "
                   f"{PDF_DPI_RANGE[1]:g} (default {DEFAULT_PDF_DPI:g})")


def _inputs(args: argparse.Namespace) -> Inputs:
    """The command line's inputs, as `vkocr ocr` reads them; a page is rendered within the default pixel bound
    (the agent applies its own)."""
    from vkocr.agent.ocr.options import OcrOptions

    return Inputs(args.images, dpi=args.pdf_dpi, max_pixels=OcrOptions().max_pixels)


def _sendable(readable: Any) -> Any:
    """What OcrClient sends of an input: a path or bytes as they are, a rendered PDF page (a Pillow image) as
    raw RGB pixels."""
    if isinstance(readable, str | bytes):
        return readable
    import numpy as np

    return np.asarray(readable)


# --- commands -----------------------------------------------------------------------------------------------


def cmd_ocr(args: argparse.Namespace) -> int:
    import grpc


    def run(client: OcrClient) -> int:
        options = option_overrides(args)
        timeout = args.timeout or client.ocr_timeout()
        failed = 0
        with _inputs(args) as inputs:
            for item in inputs.items:
                try:
                    resp = client.recognize(_sendable(item.read()), timeout=timeout, **options)
                except (ImageError, OptionsError) as exc:
                    failed += 1
                    _report_failure(args, item.name, str(exc))
                    continue
                except grpc.RpcError as err:
                    failed += 1
                    _report_failure(args, item.name, _describe(err, args))
                    if err.code() is grpc.StatusCode.INVALID_ARGUMENT:
                        continue  # this image's fault; the others may be fine
                    return EXIT_RPC_FAILED  # the agent cannot answer: the rest would fail the same way
                _print_answer(args, item.name, resp)
        return EXIT_RPC_FAILED if failed else 0

    return _with_client(args, run)


def _print_answer(args: argparse.Namespace, image: str, resp: Any) -> None:
    """One image's answer: a JSON line (`vkocr ocr --json`'s shape) or the readable form."""
    from vkocr.agent.serving.wire import response_to_dict, result_from_proto

    if args.json:
        print(json.dumps({"image": image, **response_to_dict(resp)}, ensure_ascii=False), flush=True)
    else:
        print(format_text(image, result_from_proto(resp), resp.device), flush=True)


def cmd_stream(args: argparse.Namespace) -> int:
    from vkocr.agent.ocr.images import read_image_file
    from vkocr.agent.serving.rpc_status import describe_status

    def run(client: OcrClient) -> int:
        failed = 0

        def readable(inputs: Inputs) -> Iterator[tuple[str, Any]]:
            nonlocal failed
            for index, item in enumerate(inputs.items):
                try:  # a file's bytes read here, so that one that cannot be read is reported in its place
                    source = item.read()
                    yield str(index), read_image_file(source) if isinstance(source, str) else _sendable(source)
                except ImageError as exc:  # reported here; the stream carries on with the others
                    failed += 1
                    _report_failure(args, item.name, str(exc))

        with _inputs(args) as inputs:
            for resp in client.recognize_stream(readable(inputs), timeout=args.timeout, **option_overrides(args)):
                name = inputs.items[int(resp.request_id)].name
                if resp.HasField("error"):
                    failed += 1
                    _report_failure(args, name, describe_status(resp.error))
                else:
                    _print_answer(args, name, resp.response)
        return EXIT_RPC_FAILED if failed else 0

    return _with_client(args, run)


def cmd_watch(args: argparse.Namespace) -> int:
    def run(client: OcrClient) -> int:
        for seen, status in enumerate(client.watch_status(args.interval, timeout=args.timeout), start=1):
            if args.json:
                print(json.dumps(status_to_dict(status), ensure_ascii=False), flush=True)
            else:
                print(format_status(status), flush=True)
            if args.count is not None and seen >= args.count:
                break
        return 0

    return _with_client(args, run)


def cmd_health(args: argparse.Namespace) -> int:
    import grpc

    def say(state: str) -> None:
        if args.json:
            print(json.dumps({"target": args.target, "service": args.service, "status": state}), flush=True)
        else:
            print(state, flush=True)

    def run(client: OcrClient) -> int:
        try:
            return check(client)
        except grpc.RpcError as err:
            if args.json:  # a script reading stdout learns why there is no status; stderr says it as always
                print(json.dumps({"target": args.target, "service": args.service, "status": None,
                                  "error": _describe(err, args)}), flush=True)
            raise

    def check(client: OcrClient) -> int:
        if not args.watch:
            state = client.health(args.service, timeout=args.timeout or DEFAULT_CALL_TIMEOUT_S)
            say(state)
            return 0 if state == "SERVING" else 1
        state = "UNKNOWN"
        for seen, state in enumerate(client.watch_health(args.service, timeout=args.timeout), start=1):
            say(state)
            if args.count is not None and seen >= args.count:
                break
        return 0 if state == "SERVING" else 1

    return _with_client(args, run)


def _describe(err: Any, args: argparse.Namespace) -> str:
    """The status line, with a hint when an unreachable agent may just want TLS or a client certificate."""
    import grpc

    from vkocr.agent.serving.rpc_status import describe_rpc_error

    text = describe_rpc_error(err)
    if err.code() is grpc.StatusCode.UNAVAILABLE and "draining" not in text:
        if "CERTIFICATE_VERIFY_FAILED" in text:  # our check of the agent's certificate failed: no client matter
            text += (f" (the agent's certificate is not signed by the CA in --tls-ca {args.tls_ca}, or names "
                     "another host: give the CA that signed it, or --tls-server-name the name it carries)")
        elif not args.tls_ca:
            text += " (if the agent uses TLS, pass --tls-ca; with mutual TLS also --tls-cert and --tls-key)"
        elif not args.tls_cert:
            text += " (if the agent requires client certificates, pass --tls-cert and --tls-key)"
    return text


def _with_client(args: argparse.Namespace, run: Callable[[OcrClient], int]) -> int:
    """Open the channel, run the command, map failures to exit codes and stderr lines."""
    import grpc

    from vkocr.agent.serving.client import OcrClient

    try:
        client = OcrClient(args.target, ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key,
                           server_name_override=args.tls_server_name)
    except ValueError as exc:  # TargetError too: a bad --target or TLS flag combination is a usage error
        print(f"vkocr client: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with client:
            return run(client)
    except grpc.RpcError as err:
        print(f"vkocr client: {_describe(err, args)}", file=sys.stderr)
        return EXIT_RPC_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _report_failure(args: argparse.Namespace, image: str, message: str) -> None:
    """stderr always (the contract: code name and details); with --json also a line on stdout, so every image
    has its line there."""
    print(f"vkocr client: {image}: {message}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"image": image, "error": message}, ensure_ascii=False), flush=True)


def status_to_dict(status: status_pb2.AgentStatus) -> dict[str, Any]:
    """An AgentStatus as a JSON-ready dict in the proto's field order: counters as numbers, enums by the
    agent's names (state "SERVING", backend "vulkan", plans' model "det"), Durations as milliseconds under a
    key that says so (``latency_p99_ms``, ``uptime_ms``), the time as RFC 3339, unknown temperature/power left
    out. The CLI's format, not the wire's."""
    return _jsonable(status)


def _jsonable(message: Any) -> dict[str, Any]:
    from vkocr.agent.serving.durations import ms_of
    from vkocr.agent.serving.proto_enums import enum_name
    from vkocr.v1 import status_pb2

    def plain(field: Any, value: Any) -> Any:
        if field.enum_type is not None:
            try:
                name = enum_name(field.enum_type, value)
            except ValueError:  # a value newer than this client: its number
                return value
            return name.upper() if field.enum_type is status_pb2.ServingState.DESCRIPTOR else name
        if field.message_type is None:
            return value
        if field.message_type.full_name == "google.protobuf.Duration":
            return ms_of(value)
        if field.message_type.full_name == "google.protobuf.Timestamp":
            return value.ToJsonString()
        return _jsonable(value)

    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        is_duration = field.message_type is not None and field.message_type.full_name == "google.protobuf.Duration"
        if field.has_presence and not message.HasField(field.name) and not is_duration:  # unset Duration: 0 ms
            continue
        value = getattr(message, field.name)
        key = f"{field.name}_ms" if is_duration else field.name
        out[key] = [plain(field, v) for v in value] if field.is_repeated else plain(field, value)
    return out


def format_status(status: status_pb2.AgentStatus) -> str:
    """One readable line for an AgentStatus."""
    body = status_to_dict(status)
    state = str(body["state"])
    if status.reason:
        state += f" ({status.reason})"
    when = status.time.ToDatetime().strftime("%H:%M:%S ") if status.HasField("time") else ""
    parts = [
        f"{when}#{status.sequence}",
        state,
        f"{status.device or '?'} ({body['backend'] or '?'})",
        f"model {status.model_version or '?'}",
        f"queue {status.queue_depth}/{status.queue_capacity}",
        f"in flight {status.in_flight}",
        f"p50 {body.get('latency_p50_ms', 0.0):.1f} ms p99 {body.get('latency_p99_ms', 0.0):.1f} ms",
        f"requests {status.requests_total} (errors {status.errors_total}, rejected {status.rejected_total})",
        f"pool {status.pool_used_bytes / 2**20:.1f}/{status.pool_reserved_bytes / 2**20:.1f} MiB",
    ]
    if any(m.plans for m in status.plans):
        counts = " ".join(f"{m['model']} {m['plans']}" for m in body["plans"])
        parts.append(f"plans {counts} ({sum(m.plan_memory_bytes for m in status.plans) / 2**20:.1f} MiB)")
    if status.HasField("temperature_c"):
        parts.append(f"{status.temperature_c:.0f} °C")
    if status.HasField("power_w"):
        parts.append(f"{status.power_w:.0f} W")
    parts.append(f"up {body.get('uptime_ms', 0.0) / 1e3:.0f} s")
    if status.device_rebuilds:
        parts.append(f"rebuilt {status.device_rebuilds}×")
    return "  ".join(parts)
