"""The offline vision models' two runtimes side by side: CenterNet and the selfie segmentation (people's
masks) under Node (tfjs wasm, the models as published) and the same graphs converted to ONNX and run by
onnxruntime (the default), on the memory stages that run them.

    nice -n 5 .venv/bin/python bench/detector_runtime.py [--stages frames,objects] [VIDEO ...]

For each clip (default: every shared clip that is not reserved) the given stages are built twice
into scratch libraries by one process with warm models, each time with the same settings and
models except the runtime of those two (the detector a pool of one copy per core either way). Printed
per clip: indexing speed (video seconds per wall second) each way, the detections each way and how
many are the same (time, class, box to 0.1 px, score) and of those how many have the same mask, and
tracks and objects per category.
"""

from __future__ import annotations

import argparse
import os
import logging
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_library import shared_clips  # noqa: E402
from less_work import Build, CountingReader, build, categories  # noqa: E402

from vidagent.config import Settings  # noqa: E402
from vidagent.perception.caching import CachingDetector  # noqa: E402
from vidagent.perception.describer import DetectorDescriber  # noqa: E402
from vidagent.perception.masks import decode_mask  # noqa: E402
from vidagent.perception.detector import CenterNetNodeDetector  # noqa: E402
from vidagent.perception.detector_pool import DetectorPool  # noqa: E402
from vidagent.perception.segmenter import GrabCutSegmenter, OfflineSegmenter  # noqa: E402
from vidagent.perception.selfie import SelfieNodeSegmenter  # noqa: E402
from vidagent.perception.suite import Perception  # noqa: E402
from vidagent.perception.text_screen import ScreenedTextReader  # noqa: E402
from vidagent.video.video import Video  # noqa: E402

log = logging.getLogger("detector_runtime")
RUNTIMES = ("node", "onnx")


def suites(settings: Settings) -> tuple[list[Perception], CountingReader, dict[str, Perception]]:
    """One set of models with each detector runtime in front of the same describer's other models."""
    base = Perception.offline(settings)
    counter = CountingReader(base.reader)
    describer = base.describer
    if not isinstance(describer, DetectorDescriber):
        raise SystemExit("this bench compares the offline describer; unset VIDAGENT_CAPTIONER")
    reader = ScreenedTextReader(counter) if settings.screen_text else counter
    copies = settings.detector_workers or os.cpu_count() or 1
    node = CachingDetector(DetectorPool(lambda: CenterNetNodeDetector(settings.models_dir), copies))

    def with_detector(detector: CachingDetector) -> Perception:
        return replace(base, detector=detector, describer=DetectorDescriber(
            detector, reader, classifier=describer.classifier, pose=describer.pose))

    node_suite = replace(with_detector(node), segmenter=OfflineSegmenter(GrabCutSegmenter(),
                                                                         SelfieNodeSegmenter(settings.models_dir)))
    return [base, node_suite], counter, {"node": node_suite, "onnx": with_detector(base.detector)}  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("videos", nargs="*", type=Path)
    parser.add_argument("--stages", default="frames,objects", help="stages built (comma-separated)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    paths = args.videos or shared_clips()
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    settings = Settings.from_env()
    owned, counter, by_runtime = suites(settings)
    results: list[tuple[Video, dict[str, Build]]] = []
    try:
        for runtime in RUNTIMES:  # warm each runtime up (not counted)
            build(Video(paths[0]), by_runtime[runtime], counter, settings, stages)
        for path in paths:
            video = Video(path)
            results.append((video, {runtime: build(video, by_runtime[runtime], counter, settings, stages)
                                    for runtime in RUNTIMES}))
            log.warning("%s done", path.name)
    finally:
        for perception in owned:
            perception.close()
    report(results)
    return 0


def mask_iou(first: str, second: str, video: Video) -> float:
    """The IoU of two run-length masks over ``video``'s displayed frame (1.0 for two empty ones)."""
    width, height = video.info.width, video.info.height
    a, b = (decode_mask(mask, width, height) if mask else np.zeros((height, width), bool) for mask in (first, second))
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


def report(results: list[tuple[Video, dict[str, Build]]]) -> None:
    print("| clip | video s | speed node / onnx (video s per wall s) | detections node / onnx (same; same mask; "
          "the lowest IoU of the masks that differ) | "
          "tracks per category node / onnx | objects per category node / onnx |")
    print("|---|---|---|---|---|---|")
    seconds, wall = 0.0, {runtime: 0.0 for runtime in RUNTIMES}
    found = {runtime: 0 for runtime in RUNTIMES}
    same_total = same_objects = same_masks_total = 0
    lowest_total = 1.0
    for video, builds in results:
        node, onnx = builds["node"], builds["onnx"]
        seconds += video.duration_s
        for runtime, b in builds.items():
            wall[runtime] += b.wall_s
            found[runtime] += len(b.found)
        common = set(node.found) & set(onnx.found)
        same, same_masks = len(common), sum(node.masks[key] == onnx.masks[key] for key in common)
        same_total += same
        same_masks_total += same_masks
        lowest_iou = min([mask_iou(node.masks[key], onnx.masks[key], video) for key in common
                          if node.masks[key] != onnx.masks[key]], default=1.0)
        lowest_total = min(lowest_total, lowest_iou)
        same_objects += node.objects == onnx.objects
        mark = lambda a, b: "same: " if a == b else ""  # noqa: E731
        print(f"| {video.path.name} | {video.duration_s:.1f} | {video.duration_s / node.wall_s:.2f} / "
              f"{video.duration_s / onnx.wall_s:.2f} | {len(node.found)} / {len(onnx.found)} ({same}; {same_masks}; "
              f"lowest IoU of the others {lowest_iou:.4f}) | "
              f"{mark(node.tracks, onnx.tracks)}{categories(node.tracks)} / {categories(onnx.tracks)} | "
              f"{mark(node.objects, onnx.objects)}{categories(node.objects)} / {categories(onnx.objects)} |")
    print(f"| all ({len(results)} clips; objects per category the same on {same_objects}) | {seconds:.1f} | "
          f"{seconds / wall['node']:.2f} / {seconds / wall['onnx']:.2f} | {found['node']} / {found['onnx']} "
          f"({same_total}; {same_masks_total}; lowest IoU of the others {lowest_total:.4f}) | | |")


if __name__ == "__main__":
    sys.exit(main())
