"""Set-up step: a development signing key, a signed bundle of the default model set (its files and procedure),
and a model store seeded with it, so `vkocr serve` has something to activate on a fresh machine.

    state/keys/dev.key, dev.pub                        the development key pair (made once; never for production)
    state/bundles/ppocrv6-small-default-<version>.vkb  the default set + one self-test image, signed
    state/models/                                      the model store; the bundle is activated if none is

Idempotent: an existing key is kept, a bundle that still verifies is reused, a stored version is not added
twice, and an active version is left active. The version (`dev-3.10.0-<content hash>`) is derived from the
content, so it changes exactly when the models or the self-test do; being no release, it sorts before every one.

The self-test image is RapidOCR's issue_170.png (which it reads as "TEST") when ../shared/compat is present;
otherwise a word rendered here with Pillow.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

from vkocr.agent.bundles.atomic_files import write_atomic
from vkocr.agent.bundles.bundle import BUNDLE_SUFFIX, create, verify
from vkocr.agent.bundles.errors import BundleError
from vkocr.agent.bundles.signing import (
    TrustedKeys,
    generate_keypair,
    load_private_key,
    public_pem,
    short_fingerprint,
)
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.cli.logs import configure_logging
from vkocr.agent.ocr.model_files import DEFAULT_SET, missing_or_bad, models_dir, sha256_of
from vkocr.agent.ocr.model_sets import known_set

ROOT = Path(__file__).resolve().parent.parent
BUNDLE_NAME = f"{DEFAULT_SET.name}-default"
# "dev-" and the RapidOCR release whose models and procedure these are. No leading release number, so it sorts
# before every release (agent/bundles/high_water.py): a bundle an operator makes, whatever its version (the
# deploy guide's 2.3.0), is newer than the development one and activates without --allow-downgrade.
BASE_VERSION = "dev-" + DEFAULT_SET.wheel.partition("==")[2]
COMPAT_IMAGE, COMPAT_TEXT = "issue_170.png", "TEST"
RENDERED_TEXT = "HELLO"
FONTS = (Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
         Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"))


def say(message: str) -> None:
    print(f"dev-bundle: {message}", flush=True)


def render_word(text: str, out: Path) -> Path:
    """Black text on white, large and plain: a case any working pipeline reads."""
    from PIL import Image, ImageDraw, ImageFont

    font_path = next((f for f in FONTS if f.is_file()), None)
    if font_path is None:
        raise SystemExit(f"dev-bundle: no font to render the self-test with (looked for {', '.join(map(str, FONTS))})")
    font = ImageFont.truetype(str(font_path), 64)
    left, top, right, bottom = font.getbbox(text)
    image = Image.new("RGB", (int(right - left) + 80, int(bottom - top) + 60), "white")
    ImageDraw.Draw(image).text((40 - left, 30 - top), text, fill="black", font=font)
    image.save(out)
    return out


def ensure_key(keys_dir: Path) -> tuple[Path, Path]:
    private, public = keys_dir / "dev.key", keys_dir / "dev.pub"
    if not private.exists():
        fp = generate_keypair(private, public)
        say(f"new development key {private} (fingerprint {short_fingerprint(fp)})")
    elif not public.exists():
        write_atomic(public, public_pem(load_private_key(private).public_key()))
        say(f"wrote the missing public key {public}")
    return private, public


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state", type=Path, default=ROOT / "state", help="state directory (default state/)")
    parser.add_argument("--models", type=Path, default=None,
                        help=f"folder with the default set's ({DEFAULT_SET.name}) files (default: the models folder)")
    parser.add_argument("--compat", type=Path, default=ROOT.parent / "shared" / "compat" / "rapidocr-1.4.4",
                        help="RapidOCR's compatibility images, for the self-test image")
    args = parser.parse_args(argv)
    configure_logging("warning")  # the progress lines below are the output; library events only on trouble
    models = args.models or models_dir()
    if missing_or_bad(models):
        say(f"the default set ({DEFAULT_SET.name}) is missing or damaged in {models}: "
            "run scripts/fetch_models.py first")
        return 1
    private, public = ensure_key(args.state / "keys")
    trusted = TrustedKeys.from_paths([public])
    with tempfile.TemporaryDirectory() as tmp:
        compat_image = args.compat / "images" / COMPAT_IMAGE
        if compat_image.is_file():
            image, expect = compat_image, COMPAT_TEXT
        else:
            image, expect = render_word(RENDERED_TEXT, Path(tmp) / "hello.png"), RENDERED_TEXT
            say(f"self-test is a rendered {RENDERED_TEXT!r} (RapidOCR's {COMPAT_IMAGE} comes from a workspace's "
                "shared/compat, which a clone does not have)")
        content = hashlib.sha256()
        chosen = known_set(DEFAULT_SET, models)
        options = repr(sorted(chosen.options.items()))  # the procedure: the bundle changes when it does
        for part in (*(m.sha256 for m in DEFAULT_SET.files), sha256_of(image), expect, options):
            content.update(part.encode() + b"\n")
        version = f"{BASE_VERSION}-{content.hexdigest()[:8]}"
        bundle = args.state / "bundles" / f"{BUNDLE_NAME}-{version}{BUNDLE_SUFFIX}"
        try:
            verify(bundle, trusted)
            say(f"{bundle.name} present and verified")
        except BundleError as exc:
            if bundle.exists():
                say(f"rebuilding {bundle.name}: {exc}")
            create(chosen.required_paths(), BUNDLE_NAME, version, bundle, options=chosen.options,
                   self_tests=[(image, expect)], private_key=load_private_key(private))
            say(f"built {bundle} (self-test: {image.name} must read {expect!r})")
    store = ModelStore(args.state / "models", trusted)
    recovery = store.recover()
    if recovery.removed_leftovers or recovery.removed_incomplete or recovery.active_changed:
        say(f"model store recovered: {recovery.describe()}")
    stored = {info.version for info in store.versions()}
    store.add(bundle)
    say(f"model store {store.root}: {version} " + ("already stored" if version in stored else "added"))
    active = store.active()
    if active is None:
        store.set_active(version)
        say(f"activated {version}")
    else:
        say(f"active version is {active} (left as it is)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
