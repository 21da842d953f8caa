"""Where a setting of the agent's configuration comes from, and how it is taken in: a TOML file's tables, a
``VKOCR_<SECTION>_<KEY>`` variable's text, or a flag's value, each checked against the key's type, with the
relative paths of a file made absolute against its folder (agent/serving/config.py has the sections)."""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vkocr.agent.serving.config_throughput import MOVED
from vkocr.agent.serving.errors import ConfigError
from vkocr.log import get_logger

log = get_logger(__name__)

ENV_PREFIX = "VKOCR_"
# The VKOCR_ variables that are not config keys, and who reads them: load_config lets these through and refuses
# any other VKOCR_ name that is no VKOCR_<SECTION>_<KEY> (a misspelt override would be ignored without a word).
OTHER_VARIABLES = {
    "VKOCR_DEVICE": "the device when device.select is empty (agent/ocr/backend_choice.py, vk/devices.py)",
    "VKOCR_MODELS": "the default models' folder (agent/ocr/model_files.py)",
    "VKOCR_CACHE_DIR": "the Vulkan pipeline cache's folder (vk/pipeline_cache.py)",
    "VKOCR_VALIDATION": "1: the Khronos validation layer on every instance (vk/instance.py, test.sh)",
    "VKOCR_COOPMAT": "1: every 1×1 convolution takes cooperative matrices (default: deep, big ones); 0: none",
    "VKOCR_PIPELINE_STATS": "1: the driver's statistics of every pipeline, where offered (vk/device.py)",
    "VKOCR_CHECKOUT": "the checkout scripts/check_coopmat.py's finder imports vkocr from (scripts/ab_models.py)",
    "VKOCR_SHARED": "the workspace's shared/ folder (agent/cli/workspace.py)",
    "VKOCR_TARGET": "the agents `vkocr client` calls (agent/cli/client_command.py)",
    "VKOCR_DEV_BUNDLE": "0: scripts/setup.sh bakes in no development bundle key",
    "VKOCR_RENDER_SEED": "the seed that replays tests/e2e/test_rendered.py's random images",
    "VKOCR_BROKER": "the MQTT broker `vkocr fleet --fleet` talks to (agent/cli/fleet_pull.py)",
    "VKOCR_BROKER_PASSWORD": "the operator's broker password for `vkocr fleet --fleet` (agent/cli/fleet_pull.py)",
    "VKOCR_REGISTRY_PASSWORD": "the registry password of `vkocr bundle push` and `vkocr fleet rollout --fleet`",
}
# [ocr] max_pixels: the one [ocr] option a variable sets, being a limit rather than a way of reading (the agent's
# load_config; `vkocr ocr` reads it too, agent/cli/ocr_command.py).
OCR_MAX_PIXELS_VARIABLE = "VKOCR_OCR_MAX_PIXELS"


# Keys that name files or folders. In a config file, a relative one is relative to that file's folder (so a
# checked-in config works from any working directory); from the environment or a flag, to the working directory.
PATH_KEYS = (("tls", "cert"), ("tls", "key"), ("tls", "client_ca"), ("models", "dir"), ("models", "store"),
             ("models", "trusted_keys"), ("fleet", "ca"), ("fleet", "cert"), ("fleet", "key"),
             ("fleet", "password_file"), ("fleet", "registry_ca"), ("fleet", "registry_password_file"))


def resolve_paths(config: Any, base: Path) -> None:
    """Make the relative paths of PATH_KEYS absolute against `base` (the config file's folder)."""

    def resolve(value: str) -> str:
        return os.path.normpath(base.resolve() / value) if value and not Path(value).is_absolute() else value

    for section, key in PATH_KEYS:
        table = getattr(config, section)
        value = getattr(table, key)
        setattr(table, key, [resolve(v) for v in value] if isinstance(value, list) else resolve(value))


def settable_keys(config: Any) -> list[tuple[str, str]]:
    return [(s.name, f.name) for s in dataclasses.fields(config) if s.name != "ocr"
            for f in dataclasses.fields(getattr(config, s.name))]


def moved_keys() -> list[tuple[str, str, str]]:
    """(old section, key, new section) of the keys that moved out of [server]: still taken, with a warning."""
    return [("server", key, section) for key, section in MOVED.items()]


def env_name(section: str, key: str) -> str:
    """The environment variable that overrides a key: VKOCR_<SECTION>_<KEY>."""
    return f"{ENV_PREFIX}{section}_{key}".upper()


def check_environment(config: Any, env: Mapping[str, str]) -> None:
    """ConfigError for the first VKOCR_ variable that is neither a key's nor one of OTHER_VARIABLES, naming
    the closest of those (difflib, on the names without the common prefix)."""
    keys = {env_name(section, key) for section, key in settable_keys(config)} | {OCR_MAX_PIXELS_VARIABLE}
    keys |= {env_name(old, key) for old, key, _new in moved_keys()}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in keys or name in OTHER_VARIABLES:
            continue
        if name.startswith(env_name("ocr", "")):
            raise ConfigError(f"{name}: [ocr] options come from the config file (or a bundle), not the "
                              "environment")
        known = {n.removeprefix(ENV_PREFIX): n for n in (*keys, *OTHER_VARIABLES)}
        close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), known, n=1)
        hint = f"did you mean {known[close[0]]}?" if close else "`vkocr serve --print-config` shows every key"
        raise ConfigError(f"{name} is neither a configuration key (VKOCR_<SECTION>_<KEY>) nor another variable "
                          f"vkocr reads; {hint}")


def apply_table(config: Any, data: Mapping[str, Any], origin: str) -> None:
    sections = {f.name for f in dataclasses.fields(config)}
    for section, table in data.items():
        if section not in sections:
            raise ConfigError(f"{origin}: unknown section [{section}]; known: {', '.join(sorted(sections))}")
        if not isinstance(table, dict):
            raise ConfigError(f"{origin}: [{section}] must be a table")
        if section == "ocr":
            config.ocr.update(table)
            continue
        for key, value in table.items():
            set_key(config, section, key, value, f"{origin}: [{section}] {key}")


def set_key(config: Any, section: str, key: str, value: Any, origin: str) -> None:
    if section == "server" and key in MOVED:  # the old place: taken, and the new one named
        log.warning("config_key_moved", key=f"[server] {key}", now=f"[{MOVED[key]}] {key}", origin=origin)
        section = MOVED[key]
    if section == "ocr":
        config.ocr[key] = value
        return
    target = getattr(config, section, None)
    known = {f.name: f for f in dataclasses.fields(target)} if dataclasses.is_dataclass(target) else {}
    if key not in known:
        raise ConfigError(f"{origin}: unknown key {section}.{key}")
    expected = type(getattr(target, key))
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigError(f"{origin}: {section}.{key} must be {expected.__name__}, got {value!r}")
    setattr(target, key, value)


def parse_int(name: str, text: str) -> int:
    """A variable's text as an integer (``_`` between digits allowed, as in TOML), or ConfigError naming it."""
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not an integer") from None


def parse_text(config: Any, section: str, key: str, text: str) -> Any:
    """An environment variable's text as the key's type."""
    expected = type(getattr(getattr(config, section), key))
    try:
        if expected is bool:
            if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(text)
            return text.lower() in ("1", "true", "yes")
        if expected is list:
            return [part.strip() for part in text.split(",") if part.strip()]
        return expected(text)
    except ValueError as exc:
        article = "an" if expected.__name__[0] in "aeiou" else "a"
        raise ConfigError(f"{env_name(section, key)}: {text!r} is not {article} {expected.__name__}") from exc
