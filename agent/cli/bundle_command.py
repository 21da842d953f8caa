"""`vkocr bundle keygen|create|sign|verify|inspect`: make, sign and check model bundles.

Each command returns an exit status: 0 on success, 1 with one line `error: …` on stderr when refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vkocr.errors import VkocrError

EPILOG = """\
A bundle (*.vkb) is a gzip-compressed tar: manifest.json (name, version, files with sha256 and size, which file
is det/cls/rec, OCR options, self-tests, signer), manifest.sig (ed25519 over the manifest) and the files.
Agents accept a bundle only when a key in their trusted set signed it.

  vkocr bundle keygen keys/release.key                       # release.key (0600) + release.pub
  vkocr bundle create --default-models --name ppocrv4 --version 1.0.0 \\
      --option box_thresh=0.6 --self-test label.png=LOT-42 --key keys/release.key -o ppocrv4-1.0.0.vkb
  vkocr bundle verify ppocrv4-1.0.0.vkb --trusted keys/release.pub
"""


def _command(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn a refusal into one `error:` line on stderr and exit status 1; with --json also {"bundle", "ok":
    false, "error"} on stdout, so that a script reading stdout sees the refusal too."""

    def wrapped(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except VkocrError as exc:
            return refused(args, str(exc))
        except OSError as exc:  # a path we were given to write or read: say which and why, not a traceback
            return refused(args, f"{exc.filename or ''}: {exc.strerror or exc}")

    return wrapped


def refused(args: argparse.Namespace, message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps({"bundle": str(args.bundle), "ok": False, "error": message}, ensure_ascii=False))
    return 1


def _self_test(text: str) -> tuple[Path, str]:
    image, sep, expect = text.partition("=")
    if not sep or not image or not expect:
        raise argparse.ArgumentTypeError(f"{text!r} is not IMAGE=TEXT")
    return Path(image), expect


@_command
def cmd_keygen(args: argparse.Namespace) -> int:
    from vkocr.agent.bundles.signing import generate_keypair, public_key_path_for, short_fingerprint

    public = args.public or public_key_path_for(args.private)
    fp = generate_keypair(args.private, public, overwrite=args.force)
    print(f"private key: {args.private} (mode 0600: keep it secret)")
    print(f"public key:  {public} (copy it to the agents' trusted keys)")
    print(f"fingerprint: {fp} (short {short_fingerprint(fp)})")
    return 0


@_command
def cmd_create(args: argparse.Namespace) -> int:
    from vkocr.agent.bundles.bundle import create
    from vkocr.agent.bundles.errors import BundleError
    from vkocr.agent.bundles.options import parse_assignment
    from vkocr.agent.bundles.signing import load_private_key, short_fingerprint
    from vkocr.agent.ocr.model_files import missing_or_bad
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.agent.ocr.options import OcrOptions

    given = {role: getattr(args, role) for role in ("det", "cls", "rec") if getattr(args, role)}
    set_options: dict[str, Any] = {"procedure": OcrOptions().procedure}  # the files given alone: 1.4.4's steps
    if args.models or args.default_models:
        chosen = choose_models(args.models)
        known = chosen.known
        if known is not None and missing_or_bad(chosen.paths["det"].parent, known.files):
            raise BundleError(f"model set {known.name}: files missing or damaged in {chosen.paths['det'].parent}; "
                              "run scripts/fetch_models.py")
        if chosen.missing():
            raise BundleError(f"model set {chosen.name}: missing {', '.join(map(str, chosen.missing()))}")
        models = chosen.paths | given  # with the page orientation model when the set's folder has it
        set_options = chosen.options
    else:
        missing = [role for role in ("det", "cls", "rec") if role not in given]
        if missing:
            raise BundleError(f"give --{' --'.join(missing)} (or --models NAME|DIR)")
        models = given
    # the set's procedure (and options) always recorded, so that an agent serves the bundle as the set is read
    options = set_options | dict(parse_assignment(text) for text in args.option)
    key = load_private_key(args.key) if args.key else None
    manifest = create(models, args.name, args.version, args.output, options=options, self_tests=args.self_test,
                      other_files=args.file, private_key=key)
    signed = f"signed by {short_fingerprint(manifest.signer)}" if manifest.signer else "unsigned"
    print(f"{args.output}: {manifest.name} {manifest.version}, {len(manifest.files)} files, "
          f"{manifest.total_size / (1 << 20):.1f} MiB unpacked, {signed}")
    return 0


@_command
def cmd_sign(args: argparse.Namespace) -> int:
    from vkocr.agent.bundles.bundle import sign
    from vkocr.agent.bundles.signing import load_private_key, short_fingerprint

    manifest = sign(args.bundle, load_private_key(args.key))
    print(f"{args.bundle}: {manifest.name} {manifest.version} signed by {short_fingerprint(str(manifest.signer))}")
    return 0


@_command
def cmd_verify(args: argparse.Namespace) -> int:
    from vkocr.agent.bundles.bundle import verify
    from vkocr.agent.bundles.signing import TrustedKeys, short_fingerprint

    manifest = verify(args.bundle, TrustedKeys.from_paths(args.trusted))
    if args.json:
        print(json.dumps({"bundle": str(args.bundle), "ok": True, "name": manifest.name,
                          "version": manifest.version, "signer": manifest.signer,
                          "files": [{"path": f.path, "role": f.role, "size": f.size, "sha256": f.sha256}
                                    for f in manifest.files]}, indent=2, ensure_ascii=False))
        return 0
    print(f"{args.bundle}: ok: {manifest.name} {manifest.version}, signed by "
          f"{short_fingerprint(str(manifest.signer))}, {len(manifest.files)} files match the manifest")
    return 0


@_command
def cmd_inspect(args: argparse.Namespace) -> int:
    from vkocr.agent.bundles.bundle import inspect

    report = inspect(args.bundle)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_inspect(report))
    return 0


def format_inspect(report: dict[str, Any]) -> str:
    signer = report["signer"][:16] if report["signed"] and report["signer"] else "unsigned"
    lines = [
        f"bundle:   {report['path']} ({report['bundle_size']} bytes, sha256 {report['bundle_sha256'][:16]}…)",
        f"name:     {report['name']}",
        f"version:  {report['version']} (created {report['created']}, format {report['format']})",
        f"signer:   {signer} (not verified here: use `vkocr bundle verify`)",
        "files:",
        *(f"  {f['role']:<15} {f['path']}  {f['size']} bytes  sha256 {f['sha256'][:16]}…" for f in report["files"]),
        f"options:  preprocess {json.dumps(report['preprocess'])}, postprocess {json.dumps(report['postprocess'])}",
        f"procedure: {report['postprocess'].get('procedure', 'rapidocr-1.4.4 (none recorded: the default)')}",
        "self-tests:",
        *(f"  {t['image']} must read {t['expect']!r}" for t in report["self_tests"]),
    ]
    if not report["self_tests"]:
        lines.append("  none")
    return "\n".join(lines)


def add_bundle_parser(subparsers: Any) -> None:
    """Register `vkocr bundle …` on the top-level subparsers."""
    bundle = subparsers.add_parser(
        "bundle", help="model bundles: keygen, create, sign, verify, inspect, push, pull",
        description="Make, sign and check model bundles: the signed files that carry models, OCR options and "
        "self-tests to agents.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = bundle.add_subparsers(dest="bundle_command", metavar="WHAT", required=True)

    keygen = sub.add_parser("keygen", help="make an ed25519 signing key pair",
                            description="Write a new ed25519 private key (PEM, mode 0600) and its public key "
                            "(PEM, default: the same path with .pub), and print the fingerprint.")
    keygen.add_argument("private", type=Path, metavar="PRIVATE.key", help="where to write the private key")
    keygen.add_argument("--public", type=Path, metavar="PUBLIC.pub", help="where to write the public key")
    keygen.add_argument("--force", action="store_true", help="replace existing key files")
    keygen.set_defaults(func=cmd_keygen)

    create = sub.add_parser("create", help="package models, options and self-tests into a bundle",
                            description="Package the det, cls and rec ONNX models with OCR options and self-test "
                            "images into one bundle, signed when --key is given.")
    for role, what in (("det", "text detection"), ("cls", "direction classifier"), ("rec", "recognition")):
        create.add_argument(f"--{role}", type=Path, metavar="FILE.onnx", help=f"the {what} model")
    create.add_argument("--models", metavar="NAME|DIR",
                        help="a model set (ppocrv6-small, ppocrv4: `vkocr models list`) or a folder holding one: "
                        "its files, and its procedure recorded among the options (a --det/--cls/--rec given "
                        "replaces one file)")
    create.add_argument("--default-models", action="store_true", help="the default set (as --models ppocrv6-small)")
    create.add_argument("--name", required=True, help="bundle name, e.g. ppocrv4-labels")
    create.add_argument("--version", required=True, help="version string, unique per content, e.g. 1.2.0")
    create.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an OCR option the agent applies with these models (see agent/ocr/options.py), e.g. "
                        "box_thresh=0.6, use_dilation=false, plugins=merge_lines; repeatable")
    create.add_argument("--self-test", action="append", default=[], type=_self_test, metavar="IMAGE=TEXT",
                        help="an image the agent reads before activating the bundle, and text that must appear "
                        "among its lines; repeatable")
    create.add_argument("--file", action="append", default=[], type=Path, metavar="FILE",
                        help="another file to carry (role 'other'), e.g. a licence; repeatable")
    create.add_argument("--key", type=Path, metavar="PRIVATE.key", help="sign with this private key")
    create.add_argument("-o", "--output", required=True, type=Path, metavar="OUT.vkb", help="the bundle to write")
    create.set_defaults(func=cmd_create)

    sign = sub.add_parser("sign", help="sign a bundle (replacing any signature)",
                          description="Check the bundle's files against its manifest, set the signer and write "
                          "the signature; the bundle is rewritten atomically.")
    sign.add_argument("bundle", type=Path, metavar="BUNDLE.vkb")
    sign.add_argument("--key", required=True, type=Path, metavar="PRIVATE.key", help="the private key")
    sign.set_defaults(func=cmd_sign)

    verify = sub.add_parser("verify", help="check the signature and every file, as an agent does",
                            description="Check that a trusted key signed the manifest and that every entry is a "
                            "regular file the manifest lists, with its size and sha256. Exit status 1 if not.")
    verify.add_argument("bundle", type=Path, metavar="BUNDLE.vkb")
    verify.add_argument("--trusted", required=True, action="append", type=Path, metavar="PATH",
                        help="a public key file, or a directory of *.pub files; repeatable")
    verify.add_argument("--json", action="store_true",
                        help='print {"bundle", "ok": true, "name", "version", "signer" (the full fingerprint), '
                        '"files": [{"path", "role", "size", "sha256"}]}, or {"bundle", "ok": false, "error"}')
    verify.set_defaults(func=cmd_verify)

    inspect = sub.add_parser("inspect", help="show what a bundle says about itself (unverified)",
                             description="Print the manifest: name, version, signer, files, options and "
                             "self-tests. Nothing is verified: use `vkocr bundle verify` for that.")
    inspect.add_argument("bundle", type=Path, metavar="BUNDLE.vkb")
    inspect.add_argument("--json", action="store_true", help="print as JSON")
    inspect.set_defaults(func=cmd_inspect)

    from vkocr.agent.cli.bundle_oci import add_oci_parsers

    add_oci_parsers(sub)
