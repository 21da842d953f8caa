"""deploy/: the container file, the Kubernetes manifests and the systemd unit agree with each other and with the
image's default configuration. No docker, kubectl or systemd here: each file is parsed and its parts checked."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.paths import ROOT
from vkocr.agent.serving.config import AgentConfig, is_loopback, load_config, split_host_port

DEPLOY = ROOT / "deploy"
IMAGE_CONFIG = DEPLOY / "agent.image.toml"


@dataclass
class Instruction:
    stage: int  # index of the FROM it belongs to
    keyword: str
    args: str


def instructions(path: Path) -> list[Instruction]:
    """A Containerfile's instructions: comments dropped, continuation lines joined, each with its stage."""
    out: list[Instruction] = []
    stage, pending = -1, ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if pending and line.lstrip().startswith("#"):  # a comment inside a continued instruction
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, args = pending.strip().partition(" ")
        pending = ""
        assert keyword.isupper(), f"not an instruction: {keyword!r}"
        if keyword == "FROM":
            stage += 1
        assert stage >= 0, f"{keyword} before the first FROM"
        out.append(Instruction(stage, keyword, " ".join(args.split())))
    assert not pending, "the file ends inside a continued line"
    return out


KNOWN = {"FROM", "RUN", "COPY", "ENV", "WORKDIR", "USER", "VOLUME", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT", "CMD",
         "ARG", "LABEL"}
CONTAINERFILE = instructions(DEPLOY / "Containerfile")
RUNTIME = [i for i in CONTAINERFILE if i.stage == max(j.stage for j in CONTAINERFILE)]


def image_ports(config: AgentConfig) -> dict[str, int]:
    return {"grpc": split_host_port(config.server.listen)[1],
            "health": split_host_port(config.server.health_listen)[1],
            "metrics": split_host_port(config.metrics.listen)[1]}


def test_the_image_config_serves_out_of_the_box_off_loopback_with_health_and_metrics() -> None:
    config = load_config(IMAGE_CONFIG, env={})
    assert not config.tls_enabled and not config.models.store, "no key material or bundle needed to start"
    assert not is_loopback(split_host_port(config.server.listen)[0]), "127.0.0.1 is unreachable outside a container"
    assert config.server.allow_remote_plaintext  # the documented decision (deploy/README.md, "Container")
    assert config.server.health_listen and config.metrics.listen and config.metrics.public
    assert len(set(image_ports(config).values())) == 3


def test_the_image_config_takes_tls_from_the_environment_as_the_readme_says() -> None:
    env = {"VKOCR_TLS_CERT": "/etc/vkocr/tls/tls.crt", "VKOCR_TLS_KEY": "/etc/vkocr/tls/tls.key",
           "VKOCR_TLS_CLIENT_CA": "/etc/vkocr/tls/ca.crt"}
    config = load_config(IMAGE_CONFIG, env=env)
    assert config.tls_enabled and config.tls.client_ca == "/etc/vkocr/tls/ca.crt"
    readme = (DEPLOY / "README.md").read_text()
    assert all(name in readme for name in env), "deploy/README.md names the TLS variables"


def test_the_containerfile_has_a_build_and_a_runtime_stage() -> None:
    assert {i.keyword for i in CONTAINERFILE} <= KNOWN
    froms = [i.args for i in CONTAINERFILE if i.keyword == "FROM"]
    assert len(froms) == 2 and froms[0].endswith(" AS build") and froms[1].endswith(" AS runtime"), froms
    build_runs = " ".join(i.args for i in CONTAINERFILE if i.stage == 0 and i.keyword == "RUN")
    assert "--require-hashes -r requirements/run.lock" in build_runs
    assert "pip wheel" in build_runs and re.search(r"pip install --no-deps \S+\.whl", build_runs)
    everything = " ".join(i.args for i in CONTAINERFILE)
    assert not re.search(r"(^|\s)(-e|--editable)\s", everything), "the image installs a wheel, never editable"


def test_the_runtime_stage_has_no_compilers_no_source_and_no_root() -> None:
    runs = " ".join(i.args for i in RUNTIME if i.keyword == "RUN")
    for tool in ("build-essential", "gcc", "python3-dev", "python3-pip", "scripts/setup.sh"):
        assert tool not in runs, f"{tool} in the runtime stage"
    copies = [i.args.split() for i in RUNTIME if i.keyword == "COPY"]
    assert all(c[0] == "--from=build" or c[0].startswith("deploy/") for c in copies), copies
    users = [i.args for i in RUNTIME if i.keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert users[-1].split(":")[0].isdigit(), "numeric, for Kubernetes' runAsNonRoot"


def test_no_development_key_goes_into_the_image() -> None:
    env = " ".join(i.args for i in RUNTIME if i.keyword == "ENV")
    assert "VKOCR_DEV_BUNDLE=0" in env
    sources = [i.args.split()[0] for i in CONTAINERFILE if i.keyword == "COPY"]
    assert not any(s.rstrip("/") in (".", "state", "models", ".venv") for s in sources), sources
    assert not any("make_dev_bundle" in i.args for i in CONTAINERFILE)


def test_expose_healthcheck_and_cmd_agree_with_the_baked_in_config() -> None:
    config = load_config(IMAGE_CONFIG, env={})
    exposed = {int(p.split("/")[0]) for i in RUNTIME if i.keyword == "EXPOSE" for p in i.args.split()}
    assert exposed == set(image_ports(config).values())
    (healthcheck,) = [i.args for i in RUNTIME if i.keyword == "HEALTHCHECK"]
    check = json.loads(healthcheck.split(" CMD ", 1)[1])  # exec form: a JSON array
    assert check[:3] == ["vkocr", "client", "health"]
    assert check[check.index("--target") + 1] == f"127.0.0.1:{image_ports(config)['health']}"
    (entrypoint,) = [json.loads(i.args) for i in RUNTIME if i.keyword == "ENTRYPOINT"]
    (cmd,) = [json.loads(i.args) for i in RUNTIME if i.keyword == "CMD"]
    command = entrypoint + cmd
    config_path = command[command.index("--config") + 1]
    baked = {c.split()[-1]: c.split()[-2] for c in (i.args for i in RUNTIME if i.keyword == "COPY")}
    assert baked.get(config_path) == str(IMAGE_CONFIG.relative_to(ROOT)), f"{config_path} is not the image config"


def k8s_objects() -> list[dict[str, Any]]:
    objects = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return objects


def k8s_object(kind: str) -> dict[str, Any]:
    (found,) = [o for o in k8s_objects() if o["kind"] == kind]
    return found


def test_every_manifest_object_is_named_and_typed() -> None:
    objects = k8s_objects()
    for obj in objects:
        assert obj.get("apiVersion") and obj.get("kind") and obj.get("metadata", {}).get("name"), obj
    kinds = {o["kind"] for o in objects}
    assert {"Namespace", "ConfigMap", "DaemonSet", "Service", "NetworkPolicy", "ServiceMonitor"} <= kinds
    assert {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"} == {"vkocr"}


def cluster_config(tmp_path: Path) -> AgentConfig:
    path = tmp_path / "agent.toml"
    path.write_text(k8s_object("ConfigMap")["data"]["agent.toml"])
    return load_config(path, env={})


def agent_container() -> dict[str, Any]:
    (container,) = k8s_object("DaemonSet")["spec"]["template"]["spec"]["containers"]
    return container


def test_the_daemonset_ports_and_probes_agree_with_the_image(tmp_path: Path) -> None:
    image = image_ports(load_config(IMAGE_CONFIG, env={}))
    assert image_ports(cluster_config(tmp_path)) == image
    container = agent_container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == image
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        port = container[probe]["grpc"]["port"]
        assert port == image["health"], f"{probe} asks {port}, not the health port"
    assert container["readinessProbe"]["grpc"]["service"] == "vkocr.v1.OcrService"
    assert container["livenessProbe"]["grpc"]["service"] == "vkocr.liveness"


def test_the_daemonset_mounts_what_the_cluster_config_names(tmp_path: Path) -> None:
    config, container = cluster_config(tmp_path), agent_container()
    pod = k8s_object("DaemonSet")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] and pod["tolerations"], "GPU nodes: selector and tolerations"
    args = container["args"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_mount = mounts[args[args.index("--config") + 1]]
    assert volumes[config_mount["name"]]["configMap"]["name"] == k8s_object("ConfigMap")["metadata"]["name"]
    for path in (config.tls.cert, config.tls.key, config.tls.client_ca, *config.models.trusted_keys,
                 config.models.store):
        assert any(path == m or path.startswith(m + "/") for m in mounts), f"{path} is not mounted"


def test_service_servicemonitor_and_networkpolicy_use_the_right_ports() -> None:
    image = image_ports(load_config(IMAGE_CONFIG, env={}))
    service = k8s_object("Service")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"grpc": image["grpc"],
                                                                         "metrics": image["metrics"]}
    assert all(p["targetPort"] in {q["name"] for q in agent_container()["ports"]} for p in service["spec"]["ports"])
    monitor = k8s_object("ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    rules = k8s_object("NetworkPolicy")["spec"]["ingress"]
    allowed = {r["ports"][0]["port"]: r["from"][0]["namespaceSelector"]["matchLabels"] for r in rules}
    assert allowed == {image["grpc"]: {"vkocr.io/controller": "true"},
                       image["metrics"]: {"kubernetes.io/metadata.name": "monitoring"}}


def systemd_unit() -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for line in (DEPLOY / "vkocr.service").read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def test_the_systemd_unit_is_notify_with_a_watchdog() -> None:
    unit = systemd_unit()
    assert unit["Type"] == ["notify"] and unit["NotifyAccess"] == ["main"]
    assert re.fullmatch(r"\d+s", unit["WatchdogSec"][0]), "a watchdog in seconds"
    assert "AF_UNIX" in unit["RestrictAddressFamilies"][0].split(), "the notify socket is a unix socket"
    command = shlex.split(unit["ExecStart"][0])
    assert command[1:3] == ["serve", "--config"]
    assert tomllib.loads((DEPLOY / "agent.example.toml").read_text())  # the file it is installed from
