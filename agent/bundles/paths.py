"""Which paths a bundle may hold: plain relative POSIX paths that stay inside the extraction directory."""

from __future__ import annotations

MAX_PATH = 1024
MAX_COMPONENT = 255


def check_relative_path(path: str) -> str | None:
    """None when `path` is safe to create under a directory; otherwise why not, naming the path. Components
    starting with '.' are refused too: they would hide files and could clash with the store's own names."""
    shown = repr(path)
    if not path:
        return "'' is empty"
    if path.startswith("/"):
        return f"{shown} is an absolute path"
    if "\\" in path:
        return f"{shown} contains a backslash"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return f"{shown} contains a control character"
    parts = path.split("/")
    if ".." in parts:
        return f"{shown} escapes the bundle"
    if any(p in ("", ".") for p in parts):
        return f"{shown} is not a normalised relative path (empty or '.' component)"
    if any(p.startswith(".") for p in parts):
        return f"{shown} names a hidden file or directory"
    if len(path) > MAX_PATH or any(len(p) > MAX_COMPONENT for p in parts):
        return f"{shown} is too long"
    return None
