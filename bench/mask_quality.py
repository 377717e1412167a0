"""Object masks: quality on the generated shapes clip, and their cost on real clips, eager against lazy.

    .venv/bin/python bench/mask_quality.py [VIDEO ...] [--grabcut SIDE:ITERATIONS ...] [--people]

1. The generated clip (``tests/shapes_clip.py``: three shapes moving over a textured background, masks known):
   J, F and J&F (``vidagent.eval.jf``, each shape a sequence) of the offline segmenter (GrabCut; the person
   model has no people to see there) and of the boxes themselves, from boxes loosened as a detector's are,
   and the time per box.
2. Real clips (the shared test videos; default three): frames sampled as the objects stage samples them
   (2 fps, longer side 768), CenterNet's detections, then, in CPU seconds of the process and its Node
   workers (a shared machine's wall seconds mislead), beside decoding and detecting the same frames:
   * eager (what the objects stage does): every detection segmented as its frame is measured, the cost per
     sampled frame and per mask, people (selfie model) and things (GrabCut) apart;
   * lazy (the alternative: segment one object when a tool first asks for it): decoding again the frames
     the object was sampled in, plus segmenting its boxes, per tracked object.
3. ``--people``: GrabCut where no mask is known on real frames, scored against the person model (MediaPipe's
   selfie segmentation, a trained segmenter): every person CenterNet finds (score 0.5 or more, 48 px or more on
   its longer side) in one frame a second of the shared non-reserved clips, the IoU of GrabCut's mask with the
   person model's, and the wall ms a box.

``--grabcut SIDE:ITERATIONS`` (repeatable) adds GrabCut settings to parts 1 and 3 beside the default.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
VIDEOS = Path(os.environ.get("VIDAGENT_TEST_DATA", ROOT.parent / "shared" / "data")) / "videos"
DEFAULT_VIDEOS = ["github_sam2/01_dog.mp4", "github_Ask-Anything/hitting_baseball.mp4", "github_VideoAgent/boats.mp4"]


def loosened(box: tuple[float, float, float, float], rng: np.random.Generator) -> tuple[float, ...]:
    """A detector's box: the tight box grown by 5 % a side, each edge then moved by up to 10 %."""
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    jitter = rng.uniform(-0.1, 0.1, 4) * [w, h, w, h]
    return x1 - 0.05 * w + jitter[0], y1 - 0.05 * h + jitter[1], x2 + 0.05 * w + jitter[2], y2 + 0.05 * h + jitter[3]


def grabcut_settings(extra: list[str]) -> list[Any]:
    """The default GrabCut and one per ``SIDE:ITERATIONS`` asked for."""
    from vidagent.perception.segmenter import GrabCutSegmenter

    made = [GrabCutSegmenter()]
    for spec in extra:
        side, _, iterations = spec.partition(":")
        made.append(GrabCutSegmenter(max_side=int(side), iterations=int(iterations or 3)))
    return made


def generated_clip(segmenters: list[Any]) -> None:
    import shapes_clip as shapes

    from vidagent.eval.jf import mean_scores, score_sequence
    from vidagent.perception.masks import box_mask

    truths: dict[str, list[np.ndarray]] = defaultdict(list)
    boxes: dict[str, list[np.ndarray]] = defaultdict(list)
    rows = []
    for index, segmenter in enumerate(segmenters):
        rng = np.random.default_rng(0)  # the same loosened boxes for every setting
        made: dict[str, list[np.ndarray]] = defaultdict(list)
        seconds, count = 0.0, 0
        for t in np.arange(0.0, shapes.SECONDS, 0.1):
            image, truth = shapes.frame(float(t)), shapes.truth(float(t))
            given = [loosened(item.box, rng) for item in truth]
            started = time.process_time()
            masks = segmenter.segment(image, given, [item.shape.label for item in truth])
            seconds += time.process_time() - started
            count += len(given)
            for item, box, mask in zip(truth, given, masks):
                made[item.shape.name].append(mask)
                if index == 0:
                    boxes[item.shape.name].append(box_mask(box, shapes.WIDTH, shapes.HEIGHT))
                    truths[item.shape.name].append(item.mask)
        rows.append((segmenter.name, made, f"{1000 * seconds / count:.1f}"))
    rows.append(("the boxes", boxes, "-"))
    print(f"## Generated clip ({len(truths)} shapes x {len(next(iter(truths.values())))} frames, loosened boxes)\n")
    print("| masks | J | F | J&F | CPU ms a box |\n|---|---|---|---|---|")
    for label, predicted, ms in rows:
        scores = mean_scores(score_sequence(predicted[name], truths[name]) for name in truths)
        print(f"| {label} | {scores['j']:.3f} | {scores['f']:.3f} | {scores['jf']:.3f} | {ms} |")
    print()


def people_against_the_person_model(segmenters: list[Any]) -> None:
    from index_library import shared_clips

    from vidagent.config import Settings
    from vidagent.perception.detections import class_names
    from vidagent.perception.detector import CenterNetDetector
    from vidagent.perception.masks import box_mask
    from vidagent.perception.segmenter import MIN_PERSON_SIDE
    from vidagent.perception.selfie import SelfieSegmenter
    from vidagent.video.video import Video

    settings = Settings.from_env()
    detector, person_model = CenterNetDetector(settings.models_dir), SelfieSegmenter(settings.models_dir)
    ious: dict[str, list[float]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    try:
        for clip in shared_clips():
            video = Video(clip)
            frames = list(video.frames_at(list(np.arange(0.5, video.duration_s, 1.0)), max_side=768))
            for frame, found in zip(frames, detector.detect([f.image for f in frames])):
                height, width = frame.image.shape[:2]
                for box, label, score in zip(found.xyxy, class_names(found), found.confidence):
                    if label != "person" or score < 0.5 or max(box[2] - box[0], box[3] - box[1]) < MIN_PERSON_SIDE:
                        continue
                    reference = person_model.segment(frame.image, [box], [label])[0]
                    if reference.sum() < 50:
                        continue
                    candidates = {"the box": box_mask(box, width, height)}
                    for segmenter in segmenters:
                        started = time.perf_counter()
                        candidates[segmenter.name] = segmenter.segment(frame.image, [box], [label])[0]
                        seconds[segmenter.name] += time.perf_counter() - started
                    for name, mask in candidates.items():
                        ious[name].append(float((mask & reference).sum() / max(1, (mask | reference).sum())))
    finally:
        detector.close()
        person_model.close()
    count = len(ious["the box"])
    print(f"## People on real frames against the person model ({count} boxes)\n")
    print("| masks | mean IoU | median IoU | better than the default on | wall ms a box |\n|---|---|---|---|---|")
    default = np.array(ious[segmenters[0].name])
    for name, values in ious.items():
        better = int((np.array(values) > default + 1e-9).sum())
        print(f"| {name} | {np.mean(values):.3f} | {np.median(values):.3f} | {better} of {count} | "
              f"{_ms(seconds[name], count) if name in seconds else '-'} |")
    print()


def real_clips(names: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from proc_stats import tree_cpu_s

    from vidagent.config import Settings
    from vidagent.perception.detections import class_names
    from vidagent.perception.detector import CenterNetDetector
    from vidagent.perception.segmenter import MIN_PERSON_SIDE, PERSON_LABELS, build_segmenter
    from vidagent.perception.tracking import ByteTracker, track_frames
    from vidagent.video.video import Video

    settings = Settings.from_env()
    detector = CenterNetDetector(settings.models_dir)
    segmenter = build_segmenter(None, settings.models_dir)
    assert segmenter is not None
    me = os.getpid()

    def cpu_of(work) -> tuple[float, float]:
        """CPU seconds of this process and its Node workers, and wall seconds, that ``work()`` took."""
        cpu, wall = tree_cpu_s(me), time.perf_counter()
        work()
        return tree_cpu_s(me) - cpu, time.perf_counter() - wall

    print(f"## Real clips: {segmenter.name}\n")
    print("CPU seconds (Python and its Node workers; the machine was shared, so wall seconds mislead) per sampled "
          "frame, per mask and per object.\n")
    print("| video | frames | detections: people (big enough for the person model), things | decode CPU ms a frame | "
          "detector CPU ms a frame | eager masks CPU ms a frame | a person | a thing | objects | lazy CPU ms an "
          "object (decode + masks) | lazy, all objects, against eager |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    try:
        for name in names:
            video = Video(VIDEOS / name)
            fps = 2.0
            times = [round(i / fps, 3) for i in range(max(1, int(video.duration_s * fps)))]
            frames: list = []
            decode_cpu, _ = cpu_of(lambda: frames.extend(video.frames_at(times, max_side=768)))
            found: list = []
            detect_cpu, _ = cpu_of(lambda: found.extend(detector.detect([f.image for f in frames])))
            segmenter.segment(frames[0].image, [(0, 0, 60, 120)], ["person"])  # the person model's worker is up
            people, things = [], []
            for frame, detections in zip(frames, found):
                labels = class_names(detections)
                for box, label in zip(detections.xyxy, labels):
                    big = max(box[2] - box[0], box[3] - box[1]) >= MIN_PERSON_SIDE
                    (people if label in PERSON_LABELS and big else things).append((frame.image, box, label))
            person_cpu, _ = cpu_of(lambda: [segmenter.segment(i, [b], [l]) for i, b, l in people])
            thing_cpu, _ = cpu_of(lambda: [segmenter.segment(i, [b], [l]) for i, b, l in things])
            tracked = track_frames(ByteTracker(fps), found, times)
            by_object: dict[int, list[tuple[int, np.ndarray, str]]] = defaultdict(list)
            for index, detections in enumerate(tracked):
                for box, label, track in zip(detections.xyxy, class_names(detections), detections.tracker_id):
                    if track >= 0:
                        by_object[int(track)].append((index, box, label))

            def lazily() -> None:
                for sightings in by_object.values():
                    wanted = sorted({times[index] for index, _, _ in sightings})
                    images = {round(f.time_s, 3): f.image for f in video.frames_at(wanted, max_side=768)}
                    for index, box, label in sightings:
                        segmenter.segment(images[round(times[index], 3)], [box], [label])

            lazy_cpu, _ = cpu_of(lazily)
            eager_cpu = person_cpu + thing_cpu
            n = len(frames)
            print(f"| {name} | {n} | {len(people)}, {len(things)} | {1000 * decode_cpu / n:.0f} | "
                  f"{1000 * detect_cpu / n:.0f} | {1000 * eager_cpu / n:.0f} | "
                  f"{_ms(person_cpu, len(people))} | {_ms(thing_cpu, len(things))} | {len(by_object)} | "
                  f"{_ms(lazy_cpu, len(by_object))} | {lazy_cpu:.1f} s against {eager_cpu:.1f} s |")
    finally:
        detector.close()
        close = getattr(segmenter, "close", None)
        if callable(close):
            close()


def _ms(seconds: float, count: int) -> str:
    return f"{1000 * seconds / count:.0f}" if count else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("videos", nargs="*", default=DEFAULT_VIDEOS)
    parser.add_argument("--no-real", action="store_true", help="the generated clip only")
    parser.add_argument("--grabcut", action="append", default=[], metavar="SIDE:ITERATIONS")
    parser.add_argument("--people", action="store_true", help="also GrabCut on people against the person model")
    args = parser.parse_args()
    segmenters = grabcut_settings(args.grabcut)
    generated_clip(segmenters)
    if args.people:
        people_against_the_person_model(segmenters)
    if not args.no_real:
        real_clips(args.videos)
    return 0


if __name__ == "__main__":
    sys.exit(main())
