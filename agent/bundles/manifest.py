"""A bundle's manifest: what it holds, which file is which model, the OCR options and the self-tests.

`manifest.json` is UTF-8 JSON; `manifest.sig` is the raw 64-byte ed25519 signature over its exact bytes, so
the manifest is parsed exactly as signed (`Manifest.raw`) and never re-serialised before checking. A key twice in
one object, and a field this agent does not know (at any level), are refused: the signed bytes mean one thing.

    {
      "format": 1,
      "name": "ppocrv4-default",
      "version": "1.4.4-3f2a9c1d",
      "created": "2025-01-31T12:00:00Z",
      "files": [{"path": "ch_PP-OCRv4_det_infer.onnx", "sha256": "…", "size": 4745517, "role": "det"}, …],
      "models": {"det": "ch_PP-OCRv4_det_infer.onnx", "cls": "…", "rec": "…"},
      "preprocess": {"limit_side_len": 736},
      "postprocess": {"box_thresh": 0.5},
      "self_tests": [{"image": "selftest/issue_170.png", "expect": "TEST"}],
      "signer": "<sha256 of the signing key's raw public bytes, hex>" or null
    }
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from vkocr.agent.bundles.errors import BundleFormatError
from vkocr.agent.bundles.options import check_sections
from vkocr.agent.bundles.paths import check_relative_path
from vkocr.agent.ocr.options import OcrOptions

FORMAT_VERSION: Final = 1
MANIFEST_NAME: Final = "manifest.json"
MAX_NESTING: Final = 32  # arrays and objects within each other; the format itself needs 4
SIGNATURE_NAME: Final = "manifest.sig"
MODEL_ROLES: Final = ("det", "cls", "rec")
OPTIONAL_MODEL_ROLES: Final = ("ori",)  # the page orientation model (agent/ocr/orientation.py), when carried
FILE_ROLES: Final = (*MODEL_ROLES, *OPTIONAL_MODEL_ROLES, "selftest-image", "other")
MAX_FILES: Final = 1000

# Names and versions become directory names in the model store: keep them plain.
NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FIELDS = ("format", "name", "version", "created", "files", "models", "preprocess", "postprocess", "self_tests",
           "signer")


@dataclass(frozen=True)
class FileEntry:
    path: str
    sha256: str
    size: int
    role: str


@dataclass(frozen=True)
class SelfTest:
    image: str  # path inside the bundle
    expect: str  # text that must appear among the recognised lines


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Manifest:
    name: str
    version: str
    created: datetime
    files: tuple[FileEntry, ...]
    models: dict[str, str]
    preprocess: dict[str, Any]
    postprocess: dict[str, Any]
    self_tests: tuple[SelfTest, ...] = ()
    signer: str | None = None
    format: int = FORMAT_VERSION
    raw: bytes = field(default=b"", compare=False, repr=False)  # the exact bytes this was parsed from

    def to_bytes(self) -> bytes:
        doc = {
            "format": self.format,
            "name": self.name,
            "version": self.version,
            "created": format_time(self.created),
            "files": [{"path": f.path, "sha256": f.sha256, "size": f.size, "role": f.role} for f in self.files],
            "models": {role: self.models[role] for role in (*MODEL_ROLES, *OPTIONAL_MODEL_ROLES)
                       if role in self.models},
            "preprocess": self.preprocess,
            "postprocess": self.postprocess,
            "self_tests": [{"image": t.image, "expect": t.expect} for t in self.self_tests],
            "signer": self.signer,
        }
        return json.dumps(doc, indent=2, ensure_ascii=False).encode() + b"\n"

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        """Parse and check every field; anything malformed is a BundleFormatError naming the field."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BundleFormatError(f"manifest.json is not UTF-8 JSON ({exc})") from None
        _check_nesting(text)
        try:
            doc = json.loads(text, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as exc:
            raise BundleFormatError(f"manifest.json is not UTF-8 JSON ({exc})") from None
        manifest = _parse(doc)
        return replace(manifest, raw=bytes(data))

    def with_signer(self, signer: str | None) -> Manifest:
        return replace(self, signer=signer, raw=b"")

    def file(self, path: str) -> FileEntry:
        for entry in self.files:
            if entry.path == path:
                return entry
        raise KeyError(path)

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    def options(self) -> dict[str, Any]:
        """The OcrOptions overrides this bundle sets: preprocess and postprocess together."""
        return {**self.preprocess, **self.postprocess}

    def ocr_options(self, base: OcrOptions | None = None) -> OcrOptions:
        return (base or OcrOptions()).replace(**self.options())

    def content_digest(self) -> str:
        """sha256 over what the bundle does (files, roles, options, self-tests), not when or by whom it was
        signed: two bundles with the same digest serve identically."""
        doc = json.loads(self.to_bytes())
        for transient in ("created", "signer"):
            doc.pop(transient)
        return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _check_nesting(text: str) -> None:
    """Refuse a document nested deeper than MAX_NESTING before json.loads recurses into it (100,000 levels would
    end in a RecursionError). Brackets inside strings (a plugin's patterns) do not count."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                raise BundleFormatError(f"manifest.json nests deeper than {MAX_NESTING} levels")
        elif char in "]}":
            depth -= 1


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads keeps the last of two equal keys; a manifest that says two things (one the signer reviewed,
    one a reader acts on) is refused instead, in every object at any depth."""
    doc: dict[str, Any] = {}
    for key, value in pairs:
        if key in doc:
            raise BundleFormatError(f"manifest: key {key[:64]!r} appears twice in one object")
        doc[key] = value
    return doc


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise BundleFormatError(f"manifest: {message}")


def _text(doc: dict[str, Any], key: str) -> str:
    value = doc.get(key)
    _require(isinstance(value, str) and bool(value), f"{key} must be a non-empty string")
    return str(value)


def _parse(doc: Any) -> Manifest:
    _require(isinstance(doc, dict), "must be a JSON object")
    fmt = doc.get("format")
    _require(isinstance(fmt, int) and not isinstance(fmt, bool), "format must be an integer")
    if fmt != FORMAT_VERSION:
        raise BundleFormatError(f"bundle format {fmt} is not understood by this agent (it reads format "
                                f"{FORMAT_VERSION}); upgrade vkocr or rebuild the bundle")
    unknown = sorted(set(doc) - set(_FIELDS))
    _require(not unknown, f"unknown field(s) {', '.join(map(repr, unknown))}")
    missing = [k for k in _FIELDS if k not in doc]
    _require(not missing, f"missing field(s) {', '.join(map(repr, missing))}")
    name, version = _text(doc, "name"), _text(doc, "version")
    _require(bool(NAME_PATTERN.match(name)), f"name {name!r} must be letters, digits and . _ + - (at most 128)")
    _require(bool(NAME_PATTERN.match(version)),
             f"version {version!r} must be letters, digits and . _ + - (at most 128)")
    try:
        created = datetime.fromisoformat(_text(doc, "created"))
    except ValueError:
        created = None
    _require(created is not None and created.utcoffset() is not None,
             f"created {doc['created']!r} must be a UTC time like 2025-01-31T12:00:00Z")
    assert created is not None
    files = _parse_files(doc["files"])
    by_path = {f.path: f for f in files}
    models = doc["models"]
    _require(isinstance(models, dict) and set(MODEL_ROLES) <= set(models) <= {*MODEL_ROLES, *OPTIONAL_MODEL_ROLES},
             f"models must name exactly the files for {', '.join(MODEL_ROLES)} (and optionally "
             f"{', '.join(OPTIONAL_MODEL_ROLES)})")
    for role in models:
        entry = by_path.get(models[role]) if isinstance(models[role], str) else None
        _require(entry is not None, f"models.{role} names {models[role]!r}, which is not in files")
        assert entry is not None
        _require(entry.role == role, f"models.{role} names {entry.path!r}, whose role is {entry.role!r}")
    for entry in files:
        if entry.role in (*MODEL_ROLES, *OPTIONAL_MODEL_ROLES) and models.get(entry.role) != entry.path:
            raise BundleFormatError(f"manifest: {entry.path!r} has role {entry.role!r} but models.{entry.role} "
                                    f"is {models.get(entry.role)!r}: one file per model role")
    for section in ("preprocess", "postprocess"):
        _require(isinstance(doc[section], dict), f"{section} must be an object of OCR options")
    check_sections(doc["preprocess"], doc["postprocess"])
    self_tests = _parse_self_tests(doc["self_tests"], by_path)
    signer = doc["signer"]
    _require(signer is None or (isinstance(signer, str) and bool(_SHA256.match(signer))),
             "signer must be null or a key fingerprint (64 lowercase hex digits)")
    return Manifest(name=name, version=version, created=created, files=files, models=dict(models),
                    preprocess=dict(doc["preprocess"]), postprocess=dict(doc["postprocess"]),
                    self_tests=self_tests, signer=signer, format=fmt)


def _parse_files(raw: Any) -> tuple[FileEntry, ...]:
    _require(isinstance(raw, list) and 0 < len(raw) <= MAX_FILES, f"files must be a list of 1 to {MAX_FILES}")
    seen: set[str] = set()
    entries = []
    for i, item in enumerate(raw):
        where = f"files[{i}]"
        _require(isinstance(item, dict) and set(item) == {"path", "sha256", "size", "role"},
                 f"{where} must have exactly path, sha256, size and role")
        path, digest, size, role = item["path"], item["sha256"], item["size"], item["role"]
        _require(isinstance(path, str), f"{where}.path must be a string")
        problem = check_relative_path(path)
        _require(problem is None, f"{where}.path {problem}")
        _require(path not in (MANIFEST_NAME, SIGNATURE_NAME), f"{where}.path {path!r} is a reserved name")
        _require(path not in seen, f"{where}.path {path!r} is listed twice")
        _require(isinstance(digest, str) and bool(_SHA256.match(digest)),
                 f"{where}.sha256 must be 64 lowercase hex digits")
        _require(isinstance(size, int) and not isinstance(size, bool) and size >= 0,
                 f"{where}.size must be a non-negative integer")
        _require(role in FILE_ROLES, f"{where}.role {role!r} is not one of {', '.join(FILE_ROLES)}")
        seen.add(path)
        entries.append(FileEntry(path, digest, size, role))
    return tuple(entries)


def _parse_self_tests(raw: Any, by_path: dict[str, FileEntry]) -> tuple[SelfTest, ...]:
    _require(isinstance(raw, list), "self_tests must be a list")
    tests = []
    for i, item in enumerate(raw):
        where = f"self_tests[{i}]"
        _require(isinstance(item, dict) and set(item) == {"image", "expect"},
                 f"{where} must have exactly image and expect")
        image, expect = item["image"], item["expect"]
        entry = by_path.get(image) if isinstance(image, str) else None
        _require(entry is not None, f"{where}.image {image!r} is not in files")
        assert entry is not None
        _require(entry.role == "selftest-image", f"{where}.image {image!r} has role {entry.role!r}, "
                 "not 'selftest-image'")
        _require(isinstance(expect, str) and bool(expect.strip()), f"{where}.expect must be non-empty text")
        tests.append(SelfTest(image, expect))
    return tuple(tests)
