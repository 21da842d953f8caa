"""The Helm chart takes the model as an OCI reference (modelStore.bundle): an init container runs `vkocr bundle pull`
with the agent's own config and mounts, before the agent starts."""

from __future__ import annotations

from typing import Any

from tests.test_helm_chart import FULL, Helm, helm, pod, refusal, render  # noqa: F401  (helm: the fixture)
from vkocr.agent.cli.main import build_parser

REFERENCE = "registry.example.com/ocr/labels@sha256:" + "ab" * 32


def with_bundle(reference: str) -> dict[str, Any]:
    return {**FULL, "modelStore": {**FULL["modelStore"], "bundle": reference}}


def test_the_bundle_reference_becomes_an_init_container_that_pulls_it(helm: Helm) -> None:  # noqa: F811
    spec = pod(render(helm, with_bundle(REFERENCE)))
    (init,) = [c for c in spec["initContainers"] if c["name"] == "model-bundle"]
    agent = [c for c in spec["containers"] if c["name"] == "agent"][0]
    assert init["args"] == ["bundle", "pull", REFERENCE, "--config", "/etc/vkocr/agent.toml", "--activate"]
    parsed = build_parser("bundle").parse_args(init["args"])  # the image's entrypoint is `vkocr`
    assert (parsed.reference, str(parsed.config), parsed.activate) == (REFERENCE, "/etc/vkocr/agent.toml", True)
    # the store, its trusted keys and the config lie where the agent finds them
    agent_mounts = {m["mountPath"]: m["name"] for m in agent["volumeMounts"]}
    init_mounts = {m["mountPath"]: m["name"] for m in init["volumeMounts"]}
    for path in ("/var/lib/vkocr", "/etc/vkocr/agent.toml"):
        assert init_mounts[path] == agent_mounts[path]
    assert "trusted-keys" in init_mounts.values() and init["env"] == FULL["extraEnv"]
    assert init["securityContext"]["readOnlyRootFilesystem"] is True


def test_without_a_reference_there_is_no_pull(helm: Helm) -> None:  # noqa: F811
    assert [c["name"] for c in pod(render(helm, FULL))["initContainers"]] == ["state-owner"]


def test_a_reference_by_tag_is_refused_naming_the_value(helm: Helm) -> None:  # noqa: F811
    assert "/modelStore/bundle" in refusal(helm, with_bundle("registry.example.com/ocr/labels:2.0.0"))
