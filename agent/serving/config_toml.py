"""The merged configuration as TOML, each key with its field's comments: what `vkocr serve --print-config`
prints, and a file that reads back as the same configuration (agent/serving/config.py)."""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import tokenize
from pathlib import Path
from typing import Any

from vkocr.agent.errors import OptionsError
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.serving.config import AgentConfig
from vkocr.agent.serving.errors import ConfigError

# What [ocr]'s values mean, above them in --print-config: the other sections' comments are their fields'.
OCR_SECTION_NOTE = ("OcrOptions (agent/ocr/options.py): this deployment's defaults; a served bundle's options apply",
                    "over them, and a request's over both")


def to_toml(config: AgentConfig) -> str:
    """The merged configuration as TOML (what --print-config shows): first what "automatic" resolves to here,
    then every key of every section with the value in effect, [ocr] as the OcrOptions the agent serves with
    (its defaults, and without a bundle store its model set's own, included), each key with its field's comments.
    Read back as a config file, it serves the same."""
    resolved = config.resolved().log_fields()
    lines = ["# what serves here where a key below says 0 (automatic), or the overlap is off (config_resolved):",
             "# " + ", ".join(f"{key} = {value}" for key, value in resolved.items()), ""]
    for section, table in config.to_dict().items():
        lines.append(f"[{section}]")
        if section == "ocr":
            lines.extend(f"# {line}" for line in (*OCR_SECTION_NOTE, *served_note(config)))
            table = dataclasses.asdict(served_options(config))
        notes = field_comments(OcrOptions if section == "ocr" else type(getattr(config, section)))
        for key, value in table.items():
            above, trailing = notes.get(key, ((), ""))
            lines.extend(f"# {line}" for line in above)
            line = f"{toml_key(key)} = {toml_value(value)}"
            lines.append(f"{line}  # {trailing}" if trailing else line)
        lines.append("")
    return "\n".join(lines)


def served_options(config: AgentConfig) -> OcrOptions:
    """The options that serve: without a bundle store, the model set's own under [ocr] (ppocrv6-small's
    procedure is RapidOCR 3.10's); with one, [ocr] under which the active bundle's options apply."""
    if config.models.store:
        active = active_bundle(config)
        return active[1] if active is not None else config.ocr_options()
    try:
        return config.served_options()
    except ConfigError:  # no model set serves: served_note says why
        return config.ocr_options()


def active_bundle(config: AgentConfig) -> tuple[str, OcrOptions] | None:
    """The store's active version and its options over [ocr], read from its manifest (nothing verified or
    created: the agent checks the signature when it starts); None without one."""
    from vkocr.agent.bundles.errors import BundleError
    from vkocr.agent.bundles.manifest import MANIFEST_NAME, Manifest

    root = Path(config.models.store)
    try:
        version = (root / "active").read_text().strip()
        manifest = Manifest.from_bytes((root / "versions" / version / MANIFEST_NAME).read_bytes())
        return version, manifest.ocr_options(config.ocr_options())
    except (OSError, ValueError, BundleError, ConfigError, OptionsError):
        return None


def served_note(config: AgentConfig) -> list[str]:
    """What the model set served without a bundle store sets itself, where [ocr] does not set it (its procedure:
    ppocrv6-small serves RapidOCR 3.10's, not OcrOptions' default). Independent of [ocr], so that the printed
    file reads back as the same."""
    if config.models.store:
        active = active_bundle(config)
        if active is None:
            return ["with a bundle store and no active version (or none readable), nothing serves yet"]
        return [f"the store's active version {active[0]} serves: its bundle's options apply over this section's "
                "(shown with them)"]
    try:
        chosen = config.chosen_models()
        own = chosen.ocr_options({})
    except (ConfigError, OptionsError) as exc:
        return [f"without a bundle store nothing serves: {exc}"]
    defaults = OcrOptions()
    changed = [f"  {f.name} = {toml_value(getattr(own, f.name))}" for f in dataclasses.fields(OcrOptions)
               if getattr(own, f.name) != getattr(defaults, f.name)]
    head = f"without a bundle store, model set {chosen.name} serves"
    return [f"{head}, with its own options where this section does not set them (below):", *changed] if changed \
        else [head]


FieldComments = dict[str, tuple[tuple[str, ...], str]]
_field_comments: dict[str, FieldComments] = {}


def field_comments(section: type) -> FieldComments:
    """The comments of a config dataclass's fields, from its source: (the comment lines right above the field,
    the comment at the end of its line). Empty when the source is not installed."""
    if section.__qualname__ not in _field_comments:
        _field_comments[section.__qualname__] = read_field_comments(section)
    return _field_comments[section.__qualname__]


def read_field_comments(section: type) -> FieldComments:
    try:
        source = inspect.getsource(section)
    except (OSError, TypeError):
        return {}
    comments: FieldComments = {}
    above: list[str] = []
    words: list[tokenize.TokenInfo] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.NEWLINE, tokenize.NL):
            if token.type not in (tokenize.INDENT, tokenize.DEDENT):
                words.append(token)
            continue
        if len(words) == 1 and words[0].type == tokenize.COMMENT:
            above.append(words[0].string.lstrip("#").strip())
        elif len(words) > 2 and words[0].type == tokenize.NAME and words[1].string == ":":
            trailing = words[-1].string.lstrip("#").strip() if words[-1].type == tokenize.COMMENT else ""
            comments[words[0].string] = (tuple(above), trailing)
            above = []
        else:
            above = []
        words = []
    return comments


def toml_key(key: str) -> str:
    """A bare key when TOML allows one, else a quoted one."""
    return key if key and all(c.isascii() and (c.isalnum() or c in "-_") for c in key) else toml_value(key)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a valid TOML basic string
