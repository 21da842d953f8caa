"""deploy/agent.example.toml lists every config key, and nothing else: each section's keys are its dataclass's
fields (agent/serving/config.py) and [ocr]'s, commented out at their defaults, OcrOptions' fields."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from tests.paths import ROOT
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.serving.config import AgentConfig, load_config
from vkocr.agent.serving.config_sources import settable_keys

EXAMPLE = ROOT / "deploy" / "agent.example.toml"
COMMENTED_KEY = re.compile(r"# ([a-z_]+ = .*)")  # "# text_score = 0.5   # why": a key left at its default


def commented_ocr(path: Path) -> dict[str, object]:
    """[ocr]'s commented-out keys, uncommented and read as TOML (the last section: [ocr] runs to the end)."""
    section = path.read_text().split("\n[ocr]\n", 1)[1]
    uncommented = [m[1] for line in section.splitlines() if (m := COMMENTED_KEY.fullmatch(line))]
    return tomllib.loads("\n".join(uncommented))


def test_the_example_has_every_section_and_key_of_the_schema_and_no_other() -> None:
    example = tomllib.loads(EXAMPLE.read_text())
    assert list(example) == [f.name for f in dataclasses.fields(AgentConfig)]  # every section, in order
    listed = {(section, key) for section, table in example.items() if section != "ocr" for key in table}
    schema = set(settable_keys(AgentConfig()))
    assert sorted(schema - listed) == [], "config keys the example does not list"
    assert sorted(listed - schema) == [], "keys in the example that are no config keys"


def test_the_example_lists_every_ocr_option_at_its_default() -> None:
    live, commented = tomllib.loads(EXAMPLE.read_text())["ocr"], commented_ocr(EXAMPLE)
    options = [f.name for f in dataclasses.fields(OcrOptions)]
    assert sorted({*live, *commented} ^ set(options)) == [], "OcrOptions fields missing, or keys that are none"
    assert not set(live) & set(commented), "an option both set and commented out"
    assert OcrOptions().replace(**commented) == OcrOptions(), "a commented-out value is not the default"


def test_the_example_loads_as_a_config() -> None:
    config = load_config(EXAMPLE, env={})
    assert config.tls_enabled and config.models.store == "/var/lib/vkocr/models"
