"""The offline models with ``onnx_folds.fold``'s rewrites against the models as shipped, side by side (issue 53).

    .venv/bin/python bench/model_folds.py [--every 6]

On the frames the ``frames`` stage describes (the middle of each 2-s segment) of the shared non-reserved clips, and
on a frame every ``--every`` seconds of the 20-minute video ``index_library.py`` builds, each model is run folded and
unfolded, alternating in blocks of 10 frames on one thread: OCR (the reader as the stages run it, both passes) and the
CenterNet detector. Reported: CPU seconds of each and their ratio, frames whose text differs (with the texts), and
detections that differ (label, a box moved by more than half a pixel, a score by more than 1e-4).
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_library import SCRATCH, make_long_video, shared_clips  # noqa: E402

BLOCK = 10


def frames(every: float) -> list[np.ndarray]:
    from vidagent.video.video import Video

    out: list[np.ndarray] = []
    for path in shared_clips():
        video = Video(path)
        out.extend(frame.image for frame in video.frames_at([t + 1.0 for t in np.arange(0, video.duration_s - 1, 2.0)]))
    long = Video(make_long_video(20))
    out.extend(frame.image for frame in long.frames_at(list(np.arange(1.0, long.duration_s, every))))
    return out


@contextmanager
def unfolded() -> Iterator[None]:
    """Models built inside run as shipped (the rewrites patched out where the OCR and the converter call them)."""
    from vidagent.perception import ocr, tfjs_graph

    keep_ocr, keep_tfjs = ocr._folded_model, tfjs_graph.fold
    ocr._folded_model = lambda source, cache_dir: source
    tfjs_graph.fold = lambda model: None
    try:
        yield
    finally:
        ocr._folded_model, tfjs_graph.fold = keep_ocr, keep_tfjs


def side_by_side(images: list[np.ndarray], folded: Callable[[np.ndarray], Any],
                 shipped: Callable[[np.ndarray], Any]) -> tuple[list[Any], list[Any], float, float]:
    """Both callables over ``images`` in alternating blocks: their results and CPU seconds."""
    results: dict[str, list[Any]] = {"folded": [], "shipped": []}
    seconds = {"folded": 0.0, "shipped": 0.0}
    for start in range(0, len(images), BLOCK):
        block = images[start:start + BLOCK]
        order = [("folded", folded), ("shipped", shipped)]
        for name, run in order if (start // BLOCK) % 2 == 0 else order[::-1]:
            began = time.thread_time()
            results[name].extend(run(image) for image in block)
            seconds[name] += time.thread_time() - began
    return results["folded"], results["shipped"], seconds["folded"], seconds["shipped"]


def compare_ocr(images: list[np.ndarray]) -> None:
    from vidagent.perception.ocr import RapidTextReader

    folded = RapidTextReader(copies=1, threads=1)
    folded.load()
    with unfolded():
        shipped = RapidTextReader(copies=1, threads=1, cache_dir=SCRATCH / "ocr-shipped")
        shipped.load()
    a, b, seconds_a, seconds_b = side_by_side(images, folded.read, shipped.read)
    differ = [(i, [x.text for x in one], [x.text for x in two]) for i, (one, two) in enumerate(zip(a, b))
              if [x.text for x in one] != [x.text for x in two]]
    with_text = sum(1 for one in b if one)
    print(f"OCR: folded {seconds_a:.1f} s, shipped {seconds_b:.1f} s (ratio {seconds_a / seconds_b:.2f}); "
          f"{len(images)} frames, {with_text} with text, {len(differ)} read differently")
    for index, one, two in differ:
        print(f"  frame {index}: folded {one} shipped {two}")


def compare_detector(images: list[np.ndarray]) -> None:
    from vidagent.config import Settings
    from vidagent.perception.detector import CenterNetDetector

    models = Settings.from_env().models_dir
    folded = CenterNetDetector(models)
    with unfolded():
        shipped = CenterNetDetector(models)
        shipped.detect(images[:1])  # the session is made (converted) while the rewrites are patched out
    a, b, seconds_a, seconds_b = side_by_side(images, lambda im: folded.detect([im])[0],
                                              lambda im: shipped.detect([im])[0])
    total = sum(len(d) for d in b)
    differ = 0
    for one, two in zip(a, b):
        if len(one) != len(two) or not np.array_equal(one.class_id, two.class_id):
            differ += max(len(one), len(two))
            continue
        moved = np.abs(one.xyxy - two.xyxy).max(axis=1) > 0.5 if len(one) else np.zeros(0, bool)
        rescored = np.abs(one.confidence - two.confidence) > 1e-4 if len(one) else np.zeros(0, bool)
        differ += int(np.sum(moved | rescored))
    print(f"CenterNet: folded {seconds_a:.1f} s, shipped {seconds_b:.1f} s (ratio {seconds_a / seconds_b:.2f}); "
          f"{total} detections, {differ} differ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=float, default=6.0, help="seconds between the long video's frames")
    args = parser.parse_args()
    images = frames(args.every)
    print(f"{len(images)} frames")
    compare_detector(images)
    compare_ocr(images)


if __name__ == "__main__":
    main()
