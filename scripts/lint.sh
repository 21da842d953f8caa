#!/usr/bin/env bash
# Lint and type checks, run by ./test.sh before the tests: buf (buf.yaml: STANDARD lint rules and buf's format)
# on the wire contract proto/, ruff (pyproject.toml [tool.ruff]) on the whole checkout, then mypy (pyproject.toml [tool.mypy]; strict on the engine and postprocessing) on the vkocr
# package. mypy cannot follow setup.py's folder mapping through the editable install's import hook, so it reads
# a tree of links laid out as the installed package (build/typecheck/vkocr/…), made anew here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=.venv/bin

# buf compiles no proto that imports google/rpc/*.proto without the network: it lints what protoc compiled
"$venv/python" scripts/gen_proto.py --descriptor-set build/proto.binpb >/dev/null
"$venv/buf" lint build/proto.binpb --path vkocr/v1 --config buf.yaml
"$venv/buf" format -d --exit-code

"$venv/ruff" check --quiet .

tree=build/typecheck
rm -rf "$tree"
"$venv/python" - "$tree" <<'PY'
import sys
from pathlib import Path

sys.path.insert(0, ".")
from setup import FOLDERS  # the one list of folders → packages

tree = Path(sys.argv[1])
for name, folder in FOLDERS.items():
    link = tree.joinpath(*name.split("."))
    if name == "vkocr":  # a real folder: the other packages' links go inside it, beside its own files
        link.mkdir(parents=True)
        for entry in Path(folder).iterdir():
            (link / entry.name).symlink_to(entry.resolve())
    else:
        link.symlink_to(Path(folder).resolve(), target_is_directory=True)
PY
(cd "$tree" && "../../$venv/mypy" --config-file ../../pyproject.toml --python-executable "../../$venv/python" \
    --no-error-summary -p vkocr) || { echo "mypy failed (paths are under $tree/vkocr/, i.e. the mapped folders)"; exit 1; }
