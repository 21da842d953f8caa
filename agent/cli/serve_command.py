"""`vkocr serve`: run the agent until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vkocr.agent.cli.logs import configure_logging
from vkocr.agent.serving.config import load_config
from vkocr.agent.serving.config_toml import to_toml

EPILOG = """\
examples:
  vkocr serve                                   # loopback, plaintext, default models, best GPU else the CPU
  vkocr serve --config /etc/vkocr/agent.toml    # TLS, model store, metrics: see deploy/agent.example.toml
  vkocr serve --listen 127.0.0.1:0 --device cpu # any free port, the CPU backend (onnxruntime)
  vkocr serve --print-config                    # every key's value in effect ([ocr] too), then exit
  vkocr serve --metrics 127.0.0.1:9464          # Prometheus on loopback; another address needs --metrics-public

Every config key can also come from the environment as VKOCR_<SECTION>_<KEY>, e.g.
VKOCR_SERVER_QUEUE_SIZE=64 or VKOCR_TLS_CLIENT_CA=/etc/vkocr/clients.pem. Any other VKOCR_ variable is
refused, naming the closest key, except the few that are not config keys (VKOCR_DEVICE, VKOCR_MODELS,
VKOCR_CACHE_DIR, VKOCR_VALIDATION, …: OTHER_VARIABLES in agent/serving/config.py).
"""


def add_serve_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve", help="run the gRPC agent (OCR, status, health, reflection)",
        description="Run the OCR agent: gRPC services vkocr.v1.OcrService, vkocr.v1.StatusService, "
        "grpc.health.v1.Health and server reflection, one GPU worker behind a bounded queue. SIGTERM drains "
        "in-flight requests and stops. Logs: JSON lines on stderr at info, one per request among them, however the "
        "agent starts; [logging] json = false (VKOCR_LOGGING_JSON=false) for key/value lines, [logging] level "
        "or `vkocr --log-level LEVEL serve` for another level.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--config", type=Path, metavar="FILE", help="TOML configuration file")
    serve.add_argument("--listen", metavar="HOST:PORT", help="address to listen on (default 127.0.0.1:50051)")
    serve.add_argument("--device", metavar="SEL", help="Vulkan device (index, UUID, name part; lavapipe "
                       "only by name), 'cpu' (onnxruntime) or 'numpy' (reference executor); default: the best "
                       "ranked usable GPU, else 'cpu'")
    serve.add_argument("--metrics", metavar="HOST:PORT",
                       help="serve Prometheus metrics here (plaintext, no authentication: loopback unless "
                       "--metrics-public)")
    serve.add_argument("--metrics-public", action="store_true",
                       help="allow --metrics on a non-loopback address (config: metrics.public = true)")
    serve.add_argument("--print-config", action="store_true",
                       help="print the configuration in effect (file, environment, flags over the defaults: every "
                       "section and key, [ocr]'s options included) and exit")
    serve.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    if args.listen:
        overrides["server.listen"] = args.listen
    if args.device:
        overrides["device.select"] = args.device
    if args.metrics:
        overrides["metrics.listen"] = args.metrics
    if args.metrics_public:
        overrides["metrics.public"] = True
    if getattr(args, "log_level", None):  # `vkocr --log-level debug serve`: over the config's level
        overrides["logging.level"] = args.log_level
    if getattr(args, "log_json", False):
        overrides["logging.json"] = True
    config = load_config(args.config, overrides=overrides)
    if args.print_config:
        print(to_toml(config), end="")
        return 0
    configure_logging(config.logging.level, json=config.logging.json)
    from vkocr.agent.serving.server import Agent, serve
    from vkocr.agent.serving.state import ServingState, StateSnapshot

    def on_listening(agent: Agent) -> None:
        target = f"{config.server.listen.rpartition(':')[0]}:{agent.port}"
        security = "mutual TLS" if config.tls.client_ca else "TLS" if config.tls_enabled else "plaintext"
        print(f"vkocr agent listening on {target} ({security}); loading models…", flush=True)
        announced = False

        def on_state(snapshot: StateSnapshot) -> None:
            nonlocal announced
            if snapshot.state is ServingState.SERVING and not announced:
                announced = True
                tls_flags = " --tls-ca CA.pem" if config.tls_enabled else ""
                print(f"serving {snapshot.model_version} on {snapshot.device}. Send it an image:\n"
                      f"  vkocr client ocr IMAGE --target {target}{tls_flags}", flush=True)
            elif snapshot.state is ServingState.FAILED:
                print(f"error: {snapshot.reason}", file=sys.stderr, flush=True)

        agent.state.subscribe(on_state)
        on_state(agent.state.get())  # the models may have loaded before the subscription

    return serve(config, on_listening=on_listening)
