"""Generate the Python stubs of proto/vkocr/v1/*.proto next to them (``*_pb2.py``, ``*_pb2.pyi``,
``*_pb2_grpc.py``). Run after editing a .proto; tests/test_proto.py fails while the stubs are stale.
``--descriptor-set FILE`` writes the compiled protos instead (imports and comments included), for `buf lint`
(scripts/lint.sh): buf cannot compile them itself, as it has no copy of google/rpc/*.proto without the network.

    python scripts/gen_proto.py [--out DIR | --descriptor-set FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"


def proto_files(root: Path = PROTO_ROOT) -> list[Path]:
    return sorted((root / "vkocr" / "v1").glob("*.proto"))


def include_dirs() -> list[str]:
    """grpc_tools' copy of google/protobuf/*.proto and googleapis-common-protos' google/rpc/*.proto."""
    import google.rpc
    import grpc_tools

    return [str(Path(grpc_tools.__file__).parent / "_proto"), str(Path(google.rpc.__path__[0]).parent.parent)]


def generate(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    _protoc(f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}")


def descriptor_set(path: Path, root: Path = PROTO_ROOT) -> None:
    """A FileDescriptorSet of the protos under `root` and everything they import, with source info (buf reports
    lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _protoc(f"--descriptor_set_out={path}", "--include_imports", "--include_source_info", root=root)


def _protoc(*outputs: str, root: Path = PROTO_ROOT) -> None:
    from grpc_tools import protoc

    args = ["protoc", f"-I{root}", *(f"-I{d}" for d in include_dirs()), *outputs,
            *(str(p.relative_to(root)) for p in proto_files(root))]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed (its message is above)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--out", type=Path, default=PROTO_ROOT, help="root to write vkocr/v1/… under")
    target.add_argument("--descriptor-set", type=Path, metavar="FILE",
                        help="write a descriptor set (for buf lint) instead of the stubs")
    args = parser.parse_args(argv)
    if args.descriptor_set is not None:
        descriptor_set(args.descriptor_set)
        print(f"wrote the descriptor set of {len(proto_files())} protos to {args.descriptor_set}")
        return 0
    generate(args.out)
    print(f"generated stubs for {len(proto_files())} protos under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
