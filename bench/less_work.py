"""Less model work per indexed second (issue 28, item 3): the memory built with and without the text
screen and the change-following detector, side by side in one run.

    nice -n 5 .venv/bin/python bench/less_work.py [--all] [--stages frames,objects] [VIDEO ...]

For each clip, the given stages (default: the two frame stages, ``frames`` and ``objects``, the
only ones these change) are built twice into scratch libraries by one process with warm models:
"before" with ``screen_text`` and ``detector_follows_change`` off, "after" with both on (the text
screen is on by default, the change-following detector is not). Printed per clip: indexing speed (video seconds per wall second), OCR calls, the frames the
detector ran on (the cache in front of it counts them: the describer's and the objects stage's frames
together), and the tables: the texts of ``text_in_frame`` (which were lost or gained), detections,
and tracks and objects per category. Without arguments: a few shared clips (those with on-screen
text, those with still stretches, and the longest); ``--all``: every shared clip that is not reserved.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_library import shared_clips  # noqa: E402
from index_speed import VIDEOS  # noqa: E402

from vidagent.config import Settings  # noqa: E402
from vidagent.memory.builder import MemoryBuilder  # noqa: E402
from vidagent.memory.store import Library  # noqa: E402
from vidagent.perception.base import TextBox, TextReader  # noqa: E402
from vidagent.perception.describer import DetectorDescriber  # noqa: E402
from vidagent.perception.suite import Perception  # noqa: E402
from vidagent.perception.text_screen import ScreenedTextReader  # noqa: E402
from vidagent.video.video import Video  # noqa: E402

log = logging.getLogger("less_work")

DEFAULT_CLIPS = ["github_LLaMA-Factory/1.mp4", "github_LLaMA-Factory/3.mp4", "github_VideoAgent/boats.mp4",
                 "github_Video-LLaVA/sample_demo_1.mp4", "debian_opencv-doc/box.mp4", "github_Ask-Anything/yoga.mp4",
                 "github_Video-LLaMA/boat.mp4", "github_Ask-Anything/playing_guitar.mp4", "github_mmaction2/demo.mp4",
                 "github_Video-LLaVA/sample_demo_22.mp4"]


class CountingReader:
    """A ``TextReader`` that counts the images it reads."""

    def __init__(self, reader: TextReader) -> None:
        self.reader = reader
        self.name = reader.name
        self.calls = 0

    def read(self, image: np.ndarray) -> list[TextBox]:
        self.calls += 1
        return self.reader.read(image)


@dataclass
class Build:
    """One build of one clip: its time, the model work it did and its tables."""

    wall_s: float
    ocr_calls: int
    detector_frames: int
    reused: dict[str, int]
    texts: Counter = field(default_factory=Counter)
    detections: int = 0
    tracks: Counter = field(default_factory=Counter)
    objects: Counter = field(default_factory=Counter)
    found: list[tuple] = field(default_factory=list)  # each detection: time, category, box (0.1 px), score
    masks: dict[tuple, str] = field(default_factory=dict)  # each detection's mask (run-length text) by the above


def perceptions(settings: Settings) -> tuple[Perception, CountingReader, dict[bool, Perception]]:
    """One set of models, described through the plain reader (before) and the screened one (after)."""
    base = Perception.offline(settings)
    counter = CountingReader(base.reader)
    describer = base.describer
    if not isinstance(describer, DetectorDescriber):
        raise SystemExit("this bench compares the offline describer; unset VIDAGENT_CAPTIONER")

    def with_reader(reader: TextReader) -> Perception:
        return replace(base, describer=DetectorDescriber(base.detector, reader, classifier=describer.classifier,
                                                         pose=describer.pose))

    return base, counter, {False: with_reader(counter), True: with_reader(ScreenedTextReader(counter))}


def build(video: Video, perception: Perception, counter: CountingReader, settings: Settings,
          stages: list[str]) -> Build:
    detector = perception.detector
    detector.clear()  # type: ignore[attr-defined]
    misses, calls = detector.misses, counter.calls  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as scratch:
        local = replace(settings, home=Path(scratch))
        with Library(local.library_path) as library:
            builder = MemoryBuilder(library, perception, local)
            started = time.perf_counter()
            builder.build(video, stages, progress=False)
            result = Build(time.perf_counter() - started, counter.calls - calls,
                           detector.misses - misses, dict(builder.last_reused))  # type: ignore[attr-defined]
            video_id = video.content_hash
            rows = lambda sql: library.rows(sql, (video_id,))  # noqa: E731
            result.texts = Counter(text for (text,) in rows("SELECT text FROM text_in_frame WHERE video_id=?"))
            result.detections = rows("SELECT COUNT(*) FROM detections WHERE video_id=?")[0][0] if "objects" in stages else 0
            if "objects" in stages:
                result.tracks = Counter(c for (c,) in rows("SELECT category FROM tracks WHERE video_id=?"))
                result.objects = Counter(c for (c,) in rows("SELECT category FROM objects WHERE video_id=?"))
                for t, c, x1, y1, x2, y2, score, mask in rows(
                        "SELECT time_s, category, x1, y1, x2, y2, score, mask FROM detections "
                        "WHERE video_id=? ORDER BY time_s, category, x1, y1"):
                    key = (t, c, round(x1, 1), round(y1, 1), round(x2, 1), round(y2, 1), score)
                    result.found.append(key)
                    result.masks[key] = mask or ""
    return result


def categories(counts: Counter) -> str:
    return " ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "-"


def text_change(before: Counter, after: Counter) -> str:
    """Which texts were lost or gained (rows each), or "same" and how many rows."""
    lost, gained = before - after, after - before
    if not lost and not gained:
        return f"same ({sum(before.values())} rows)"
    parts = [f"lost {text!r} x{n}" for text, n in sorted(lost.items())]
    parts += [f"gained {text!r} x{n}" for text, n in sorted(gained.items())]
    return "; ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("videos", nargs="*", type=Path)
    parser.add_argument("--all", action="store_true", help="every shared clip that is not reserved")
    parser.add_argument("--stages", default="frames,objects", help="stages built (comma-separated)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    paths = args.videos or (shared_clips() if args.all else [VIDEOS / clip for clip in DEFAULT_CLIPS])
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    settings = Settings.from_env()
    base, counter, suites = perceptions(settings)
    modes = {False: replace(settings, screen_text=False, detector_follows_change=False),
             True: replace(settings, screen_text=True, detector_follows_change=True)}
    try:
        build(Video(paths[0]), suites[False], counter, modes[False], stages)  # warm the models up (not counted)
        results: list[tuple[Video, dict[bool, Build]]] = []
        for path in paths:
            video = Video(path)
            results.append((video, {after: build(video, suites[after], counter, modes[after], stages)
                                    for after in (False, True)}))
            log.warning("%s done", path.name)
    finally:
        base.close()
    report(results)
    return 0


def report(results: list[tuple[Video, dict[bool, Build]]]) -> None:
    print("| clip | video s | speed before / after (video s per wall s) | OCR calls before / after | "
          "detector frames before / after | objects-stage frames reused after | text_in_frame | detections before / after | "
          "tracks per category before / after | objects per category before / after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    total = {False: [0.0, 0, 0], True: [0.0, 0, 0]}
    seconds = 0.0
    for video, builds in results:
        before, after = builds[False], builds[True]
        seconds += video.duration_s
        for mode, b in builds.items():
            total[mode][0] += b.wall_s
            total[mode][1] += b.ocr_calls
            total[mode][2] += b.detector_frames
        same = lambda a, b: "same: " if a == b else ""  # noqa: E731
        print(f"| {video.path.name} | {video.duration_s:.1f} | {video.duration_s / before.wall_s:.2f} / "
              f"{video.duration_s / after.wall_s:.2f} | {before.ocr_calls} / {after.ocr_calls} | "
              f"{before.detector_frames} / {after.detector_frames} | {after.reused.get('objects', 0)} | "
              f"{text_change(before.texts, after.texts)} | {before.detections} / {after.detections} | "
              f"{same(before.tracks, after.tracks)}{categories(before.tracks)} / {categories(after.tracks)} | "
              f"{same(before.objects, after.objects)}{categories(before.objects)} / {categories(after.objects)} |")
    print(f"| all | {seconds:.1f} | {seconds / total[False][0]:.2f} / {seconds / total[True][0]:.2f} | "
          f"{total[False][1]} / {total[True][1]} | {total[False][2]} / {total[True][2]} | | | | | |")


if __name__ == "__main__":
    sys.exit(main())
