"""Generate the Python stubs of proto/vkocr/v1/*.proto next to them (``*_pb2.py``, ``*_pb2.pyi``,
``*_pb2_grpc.py``). Run after editing a .proto; tests/test_proto.py fails while the stubs are stale.

    python scripts/gen_proto.py [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"


def proto_files() -> list[Path]:
    return sorted((PROTO_ROOT / "vkocr" / "v1").glob("*.proto"))


def include_dirs() -> list[str]:
    """grpc_tools' copy of google/protobuf/*.proto and googleapis-common-protos' google/rpc/*.proto."""
    import google.rpc
    import grpc_tools

    return [str(Path(grpc_tools.__file__).parent / "_proto"), str(Path(google.rpc.__path__[0]).parent.parent)]


def generate(out: Path) -> None:
    from grpc_tools import protoc

    out.mkdir(parents=True, exist_ok=True)
    args = ["protoc", f"-I{PROTO_ROOT}", *(f"-I{d}" for d in include_dirs()),
            f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}",
            *(str(p.relative_to(PROTO_ROOT)) for p in proto_files())]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed (its message is above)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=PROTO_ROOT, help="root to write vkocr/v1/… under")
    args = parser.parse_args(argv)
    generate(args.out)
    print(f"generated stubs for {len(proto_files())} protos under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
