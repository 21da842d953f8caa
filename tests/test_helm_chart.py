"""deploy/helm/vkocr: `helm lint --strict` passes, and what `helm template` renders for several values sets holds
together: the kinds each set asks for, the ports (the config's, the container's, the probes', the Service's, the
NetworkPolicy's), TLS, the GPU, the mounts, and an agent config that the agent's own loader accepts. helm is the
pinned binary that `scripts/setup.sh test` puts in build/tools/helm (scripts/fetch_helm.sh); without it these
tests skip, except in CI on x86-64, where they fail: there the set-up must have installed it."""

from __future__ import annotations

import os
import platform
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import ROOT
from tests.test_deploy import IMAGE_CONFIG, RUNTIME, image_ports
from vkocr.agent.serving.config import AgentConfig, load_config, split_host_port
from vkocr.agent.serving.errors import ConfigError
from vkocr.agent.serving.server import HEALTH_SERVICES, LIVENESS_SERVICE

HELM = ROOT / "build" / "tools" / "helm"
CHART = ROOT / "deploy" / "helm" / "vkocr"
NAMESPACE = "vkocr"

# TLS (mutual), a GPU, the model store and a ServiceMonitor: every switch the defaults leave off.
FULL: dict[str, Any] = {
    "tls": {"enabled": True, "secretName": "vkocr-tls"},
    "gpu": {"enabled": True},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "modelStore": {"enabled": True, "trustedKeysConfigMap": "vkocr-trusted-keys",
                   "allowedSubjects": ["fleet-operator"]},
    "device": "0",
    "extraEnv": [{"name": "VKOCR_SERVER_QUEUE_SIZE", "value": "64"}],
}


@dataclass
class Helm:
    """The pinned helm binary, run with its own empty home (no repositories or plugins of the user's)."""

    env: dict[str, str]

    def run(self, *args: str, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        """`helm ARGS… CHART --values -`, the values given on stdin."""
        return subprocess.run([str(HELM), *args, str(CHART), "--values", "-"], input=yaml.safe_dump(values or {}),
                              capture_output=True, text=True, timeout=60, env=self.env)


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    if not os.access(HELM, os.X_OK):
        if os.environ.get("CI") == "true" and platform.machine() == "x86_64":
            pytest.fail(f"{HELM} is missing: scripts/setup.sh test installs it (scripts/fetch_helm.sh)")
        pytest.skip(f"no helm at {HELM}: `scripts/setup.sh test` installs it on x86-64 (scripts/fetch_helm.sh)")
    home = tmp_path_factory.mktemp("helm-home")
    homes = {f"HELM_{kind}_HOME": str(home / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}
    return Helm({**os.environ, **homes})


def render(helm: Helm, values: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The rendered objects by kind (each kind appears once in this chart)."""
    done = helm.run("template", "agents", "--namespace", NAMESPACE, values=values)
    assert done.returncode == 0, done.stderr
    objects = [o for o in yaml.safe_load_all(done.stdout) if o is not None]
    by_kind = {o["kind"]: o for o in objects}
    assert len(by_kind) == len(objects), [o["kind"] for o in objects]
    return by_kind


def refusal(helm: Helm, values: dict[str, Any]) -> str:
    """What helm says when it refuses to render `values` (the test fails if it renders them)."""
    done = helm.run("template", "agents", values=values)
    assert done.returncode != 0, f"rendered {values}"
    return done.stderr


def random_ports() -> dict[str, int]:
    grpc, health, metrics = random.sample(range(1024, 65536), 3)
    return {"grpc": grpc, "health": health, "metrics": metrics}


def pod(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = objects["DaemonSet"]["spec"]["template"]["spec"]
    return spec


def agent(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (container,) = pod(objects)["containers"]
    assert container["name"] == "agent"
    return container


def agent_config(objects: dict[str, dict[str, Any]], tmp_path: Path) -> AgentConfig:
    """The ConfigMap's agent.toml as the agent loads it, with the container's environment (extraEnv included):
    an unknown key, a misspelt VKOCR_ variable or a bad value fails here as it would at the agent's start."""
    path = tmp_path / "agent.toml"
    path.write_text(objects["ConfigMap"]["data"]["agent.toml"])
    env = {e["name"]: e["value"] for e in agent(objects)["env"]}
    return load_config(path, env=env)


def config_ports(config: AgentConfig) -> dict[str, int]:
    ports = {"grpc": split_host_port(config.server.listen)[1],
             "health": split_host_port(config.server.health_listen)[1]}
    if config.metrics.listen:
        ports["metrics"] = split_host_port(config.metrics.listen)[1]
    return ports


@pytest.mark.parametrize("values", [{}, FULL], ids=["defaults", "tls-gpu-store-servicemonitor"])
def test_helm_lint_strict_passes(helm: Helm, values: dict[str, Any]) -> None:
    done = helm.run("lint", "--strict", values=values)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize(("values", "kinds"), [
    ({}, {"ConfigMap", "DaemonSet", "Service", "NetworkPolicy"}),
    (FULL, {"ConfigMap", "DaemonSet", "Service", "NetworkPolicy", "ServiceMonitor"}),
    ({"networkPolicy": {"enabled": False}}, {"ConfigMap", "DaemonSet", "Service"}),
], ids=["defaults", "full", "no-networkpolicy"])
def test_each_values_set_renders_its_kinds_all_in_the_release_namespace(
        helm: Helm, values: dict[str, Any], kinds: set[str]) -> None:
    objects = render(helm, values)
    assert set(objects) == kinds
    for obj in objects.values():
        assert obj["metadata"]["namespace"] == NAMESPACE and obj["metadata"]["name"].startswith("agents-vkocr")


def test_the_default_ports_are_the_images_and_the_default_config_serves_plaintext(
        helm: Helm, tmp_path: Path) -> None:
    objects = render(helm)
    config = agent_config(objects, tmp_path)
    assert config_ports(config) == image_ports(load_config(IMAGE_CONFIG, env={}))
    assert not config.tls_enabled and config.server.allow_remote_plaintext and not config.models.store
    assert config.device.select == "" and config.metrics.public
    names = {v["name"] for v in pod(objects)["volumes"]}
    assert "tls" not in names and "trusted-keys" not in names


@pytest.mark.parametrize("values", [{}, FULL], ids=["defaults", "full"])
def test_the_ports_of_the_config_container_probes_service_and_policy_agree(
        helm: Helm, tmp_path: Path, values: dict[str, Any]) -> None:
    ports = random_ports()
    objects = render(helm, {**values, "ports": ports})
    assert config_ports(agent_config(objects, tmp_path)) == ports
    container = agent(objects)
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == ports
    (grpc_port,) = [p for p in container["ports"] if p["name"] == "grpc"]
    assert grpc_port["hostPort"] == ports["grpc"], "vkocr fleet addresses agents as <node>:<grpc port>"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["grpc"]["port"] == ports["health"], f"{probe} does not ask the health port"
    service = objects["Service"]["spec"]
    assert {p["name"]: p["port"] for p in service["ports"]} == {"grpc": ports["grpc"], "metrics": ports["metrics"]}
    assert {p["targetPort"] for p in service["ports"]} <= {p["name"] for p in container["ports"]}
    rules = objects["NetworkPolicy"]["spec"]["ingress"]
    allowed = {r["ports"][0]["port"]: r["from"] for r in rules}
    assert allowed == {
        ports["grpc"]: [{"namespaceSelector": {"matchLabels": {"vkocr.io/controller": "true"}}}],
        ports["metrics"]: [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}


def test_without_host_port_the_grpc_port_is_the_pods_alone(helm: Helm) -> None:
    ports = agent(render(helm, {"hostPort": False}))["ports"]
    assert not any("hostPort" in p for p in ports), ports


def test_without_metrics_no_port_anywhere_serves_them(helm: Helm, tmp_path: Path) -> None:
    ports = random_ports()
    objects = render(helm, {"metrics": {"enabled": False}, "ports": ports})
    config = agent_config(objects, tmp_path)
    assert not config.metrics.listen
    assert "metrics" not in {p["name"] for p in agent(objects)["ports"]}
    assert [p["name"] for p in objects["Service"]["spec"]["ports"]] == ["grpc"]
    assert [r["ports"][0]["port"] for r in objects["NetworkPolicy"]["spec"]["ingress"]] == [ports["grpc"]]


def test_the_probes_ask_the_agents_liveness_and_whole_agent_health_services(helm: Helm) -> None:
    container = agent(render(helm))
    assert container["livenessProbe"]["grpc"]["service"] == LIVENESS_SERVICE
    assert container["startupProbe"]["grpc"]["service"] == LIVENESS_SERVICE
    readiness = container["readinessProbe"]["grpc"]["service"]
    assert readiness == "" and readiness in HEALTH_SERVICES, "the whole agent: follows the device and the models"


def test_tls_mounts_the_secret_where_the_config_turns_tls_on(helm: Helm, tmp_path: Path) -> None:
    secret = f"tls-{random.randrange(10**6)}"
    for mutual in (True, False):
        objects = render(helm, {"tls": {"enabled": True, "secretName": secret, "mutual": mutual}})
        config = agent_config(objects, tmp_path)
        assert config.tls_enabled and not config.server.allow_remote_plaintext
        assert bool(config.tls.client_ca) == mutual
        volumes = {v["name"]: v for v in pod(objects)["volumes"]}
        assert volumes["tls"]["secret"]["secretName"] == secret
        (mount,) = [m for m in agent(objects)["volumeMounts"] if m["name"] == "tls"]
        assert mount["readOnly"]
        for path in filter(None, (config.tls.cert, config.tls.key, config.tls.client_ca)):
            assert Path(path).parent == Path(mount["mountPath"]), f"{path} is not in the Secret's mount"
        # The Secret's keys are the files' names: tls.crt, tls.key, ca.crt (deploy/README.md's command).
        assert {Path(p).name for p in (config.tls.cert, config.tls.key)} == {"tls.crt", "tls.key"}


def test_the_model_store_and_trusted_keys_lie_on_mounted_volumes(helm: Helm, tmp_path: Path) -> None:
    objects = render(helm, FULL)
    config, container = agent_config(objects, tmp_path), agent(objects)
    assert config.server.queue_size == 64, "extraEnv reaches the agent"
    assert config.auth.allowed_subjects == ["fleet-operator"] and config.tls.client_ca
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod(objects)["volumes"]}
    for path in (config.models.store, *config.models.trusted_keys, config.tls.cert):
        (mount,) = [m for m in mounts if path == m or path.startswith(m + "/")]
        assert mounts[mount] in volumes, f"{path}: mount without a volume"
    assert volumes["trusted-keys"]["configMap"]["name"] == "vkocr-trusted-keys"
    assert volumes["state"]["hostPath"]["path"] == "/var/lib/vkocr"
    args = container["args"]
    config_mount = args[args.index("--config") + 1]
    assert volumes[mounts[config_mount]]["configMap"]["name"] == objects["ConfigMap"]["metadata"]["name"]


def test_the_gpu_is_a_limit_only_when_enabled_and_the_device_reaches_the_agent(
        helm: Helm, tmp_path: Path) -> None:
    default = render(helm)
    assert not any("/" in name for name in agent(default)["resources"]["limits"]), "no GPU unless asked"
    assert "runtimeClassName" not in pod(default)
    count, device = random.randint(1, 16), f"{random.randrange(8)}"
    objects = render(helm, {"gpu": {"enabled": True, "count": count}, "device": device})
    assert agent(objects)["resources"]["limits"]["nvidia.com/gpu"] == count
    assert agent(objects)["resources"]["limits"]["memory"] == "3Gi", "the GPU adds to the limits"
    assert pod(objects)["runtimeClassName"] == "nvidia"
    assert agent_config(objects, tmp_path).device.select == device
    mesa = render(helm, {"gpu": {"enabled": True, "resource": "gpu.intel.com/i915", "runtimeClassName": "",
                                 "supplementalGroups": [count + 100]}})
    limits = agent(mesa)["resources"]["limits"]
    assert limits["gpu.intel.com/i915"] == 1 and "nvidia.com/gpu" not in limits
    assert "runtimeClassName" not in pod(mesa) and pod(mesa)["securityContext"]["supplementalGroups"] == [count + 100]


def test_the_agent_runs_as_the_images_user_without_privileges_on_a_read_only_root(helm: Helm) -> None:
    objects = render(helm, FULL)
    (user,) = [i.args for i in RUNTIME if i.keyword == "USER"]
    uid, gid = (int(part) for part in user.split(":"))
    context = pod(objects)["securityContext"]
    assert context["runAsNonRoot"] and (context["runAsUser"], context["runAsGroup"]) == (uid, gid)
    container = agent(objects)["securityContext"]
    assert container["readOnlyRootFilesystem"] and not container["allowPrivilegeEscalation"]
    assert container["capabilities"]["drop"] == ["ALL"]
    assert "/tmp" in {m["mountPath"] for m in agent(objects)["volumeMounts"]}, "a writable /tmp"
    assert pod(objects)["nodeSelector"] and pod(objects)["tolerations"]


def test_the_selectors_pick_this_releases_agents(helm: Helm) -> None:
    objects = render(helm, FULL)
    pod_labels = objects["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
    assert objects["DaemonSet"]["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert objects["Service"]["spec"]["selector"].items() <= pod_labels.items()
    assert objects["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    monitor = objects["ServiceMonitor"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= objects["Service"]["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]


def test_a_changed_config_changes_the_pods_checksum(helm: Helm) -> None:
    def checksum(values: dict[str, Any]) -> str:
        annotations = render(helm, values)["DaemonSet"]["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/config"])
    assert checksum({}) != checksum({"logging": {"level": "debug"}})


def test_a_misspelt_agent_variable_in_extra_env_fails_the_agents_loader(helm: Helm, tmp_path: Path) -> None:
    misspelt = "VKOCR_SERVER_QUEUE_SIZE"[:-1]  # built, so that the checkout's scan of VKOCR_ names passes it by
    objects = render(helm, {"extraEnv": [{"name": misspelt, "value": "64"}]})
    with pytest.raises(ConfigError, match="VKOCR_SERVER_QUEUE_SIZE"):
        agent_config(objects, tmp_path)


@pytest.mark.parametrize(("values", "says"), [
    ({"ports": {"grpc": "50051"}}, "/ports/grpc"),
    ({"ports": {"metrics": 70000}}, "/ports/metrics"),
    ({"tls": {"enabeld": True}}, "enabeld"),
    ({"gpu": {"count": 0}}, "/gpu/count"),
    ({"gpu": {"resource": "gpu"}}, "/gpu/resource"),
    ({"logging": {"level": "verbose"}}, "/logging/level"),
    ({"device": 0}, "/device"),
    ({"serviceMonitor": {"interval": "often"}}, "/serviceMonitor/interval"),
], ids=["string-port", "port-range", "unknown-key", "gpu-count", "gpu-resource", "log-level", "device-number",
        "interval"])
def test_the_schema_refuses_a_bad_value_naming_it(helm: Helm, values: dict[str, Any], says: str) -> None:
    assert says in refusal(helm, values)


@pytest.mark.parametrize(("values", "says"), [
    ({"tls": {"enabled": True}}, "tls.enabled needs tls.secretName"),
    ({"modelStore": {"enabled": True, "trustedKeysConfigMap": "k", "allowedSubjects": ["op"]}},
     "modelStore.enabled needs tls.enabled and tls.mutual"),
    ({**FULL, "modelStore": {"enabled": True, "allowedSubjects": ["op"]}}, "needs modelStore.trustedKeysConfigMap"),
    ({**FULL, "modelStore": {"enabled": True, "trustedKeysConfigMap": "k"}}, "needs modelStore.allowedSubjects"),
    ({"serviceMonitor": {"enabled": True}, "metrics": {"enabled": False}}, "serviceMonitor.enabled needs metrics"),
    ({"ports": {"grpc": 9464}}, "must differ"),
], ids=["tls-without-secret", "store-without-tls", "store-without-keys", "store-without-operators",
        "monitor-without-metrics", "same-port"])
def test_values_that_do_not_go_together_are_refused_with_what_to_set(
        helm: Helm, values: dict[str, Any], says: str) -> None:
    assert says in refusal(helm, values)
