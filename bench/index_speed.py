"""Benchmark indexing, before and after side by side in one run.

    .venv/bin/python bench/index_speed.py [--base COMMIT] [VIDEO ...]
    .venv/bin/python bench/index_speed.py --perception all [VIDEO ...]   # extra perception off vs on
    .venv/bin/python bench/index_speed.py --masks [VIDEO ...]            # objects' masks off vs on

For each video, every stage in one build into a scratch library, warm models (load time not
counted), by the code at ``--base`` (default: fd675dc, before issue 12; taken with ``git archive``)
and by this checkout (with ``--perception SOURCES``: this checkout without and with those extra
perception sources, ``VIDAGENT_PERCEPTION``; with ``--masks``: this checkout without masks,
``VIDAGENT_SEGMENTER=none``, and with the default segmenter), each in its own process: video seconds per wall second, CPU utilisation
of the process tree (Python + Node detector workers; 200 % = both cores busy) and its peak
resident memory. Then, in this checkout, each model's isolated time on the same inputs (one at a
time, warm): the detector on one Node worker over every frame the stages sample, OCR on the
described frames, Whisper on the soundtrack, E5 on the stored documents; the floor is the
detector's time spread over every core plus the others' (which use every core on their own).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import replace
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VIDEOS = Path(os.environ.get("VIDAGENT_TEST_DATA", ROOT.parent / "shared" / "data")) / "videos"
# small frames with speech (36 s, 204x360); the 41-s 640x480 reference without audio
# (reserved clip: speed only); 1280x720 with audio (9.7 s)
DEFAULT_VIDEOS = ["github_Video-LLaVA/sample_demo_22.mp4", "github_VideoAgent/kitchen.mp4", "github_sam2/01_dog.mp4"]
BASE = "fd675dc"


def measure(videos: list[str]) -> None:
    """In a fresh process (this checkout's or the base's ``vidagent`` on the path): time a full
    build of each video and print one JSON line per video."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from proc_stats import TreeMonitor, tree_cpu_s

    import numpy as np

    from vidagent.config import Settings
    from vidagent.memory.builder import ALL_STAGES, MemoryBuilder
    from vidagent.memory.store import Library
    from vidagent.perception.suite import Perception
    from vidagent.video.video import Video

    settings = Settings.from_env()
    perception = Perception.offline(settings)
    if hasattr(perception, "segmenter"):  # the offline models, with the masks VIDAGENT_SEGMENTER asks for
        from vidagent.perception.segmenter import build_segmenter

        perception = replace(perception, segmenter=build_segmenter(settings.backends.segmenter, settings.models_dir))
    try:
        warm = next(Video(VIDEOS / "github_sam2/01_dog.mp4").frames_at([1.0], max_side=768)).image
        perception.describer.describe([warm, warm[::2, ::2].copy()])
        perception.detector.detect([warm[::3, ::3].copy(), warm[::4, ::4].copy()])  # every detector worker
        perception.embedder.embed_passages(["warm up"])
        perception.speech.transcribe(np.zeros(16000, np.float32))
        if getattr(perception, "segmenter", None) is not None:  # the person model's worker starts here
            perception.segmenter.segment(warm, [(10.0, 10.0, 120.0, 200.0), (150.0, 20.0, 260.0, 90.0)], ["person", "dog"])
        for name in videos:
            video = Video(VIDEOS / name)
            clear = getattr(perception.detector, "clear", None)
            if callable(clear):
                clear()
            with tempfile.TemporaryDirectory() as scratch:
                scratch_settings = replace(settings, home=Path(scratch))
                with Library(scratch_settings.library_path) as library, TreeMonitor(os.getpid()) as monitor:
                    cpu = tree_cpu_s(os.getpid())
                    started = time.perf_counter()
                    MemoryBuilder(library, perception, scratch_settings).build(video, ALL_STAGES, progress=False)
                    wall = time.perf_counter() - started
                    cpu = tree_cpu_s(os.getpid()) - cpu
            print(json.dumps({"video": name, "duration_s": video.duration_s, "wall_s": wall, "cpu_s": cpu,
                              "peak_mb": monitor.peak_bytes / 2**20}), flush=True)
    finally:
        perception.close()


def floor(videos: list[str]) -> None:
    """Each model alone on one video's inputs (this checkout); one JSON line per video."""
    from vidagent.config import Settings
    from vidagent.memory.builder import MemoryBuilder
    from vidagent.memory.store import Library
    from vidagent.perception.detector import CenterNetDetector
    from vidagent.perception.suite import Perception
    from vidagent.video.video import Video

    settings = Settings.from_env()
    perception = Perception.offline(settings)
    single = CenterNetDetector(settings.models_dir)
    try:
        warm = next(Video(VIDEOS / "github_sam2/01_dog.mp4").frames_at([1.0], max_side=768)).image
        single.detect([warm])
        perception.reader.read(warm)
        perception.embedder.embed_passages(["warm up"])
        import numpy as np

        perception.speech.transcribe(np.zeros(16000, np.float32))
        for name in videos:
            video = Video(VIDEOS / name)
            seconds: dict[str, float] = {}
            with tempfile.TemporaryDirectory() as scratch:
                scratch_settings = replace(settings, home=Path(scratch), reuse_near_duplicates=False)
                with Library(scratch_settings.library_path) as library:
                    builder = MemoryBuilder(library, perception, scratch_settings)
                    frames_stage, objects_stage = builder.stage("frames"), builder.stage("objects")
                    described = set(frames_stage.frame_times(video))  # type: ignore[union-attr]
                    times = sorted(described | set(objects_stage.frame_times(video)))  # type: ignore[union-attr]
                    started = time.perf_counter()
                    frames = list(video.frames_at(times, max_side=768))
                    seconds["decode"] = time.perf_counter() - started
                    started = time.perf_counter()
                    single.detect([f.image for f in frames])
                    seconds["detector (1 worker)"] = time.perf_counter() - started
                    started = time.perf_counter()
                    for frame in frames:
                        if frame.time_s in described:
                            perception.reader.read(frame.image)
                    seconds["OCR"] = time.perf_counter() - started
                    started = time.perf_counter()
                    audio = video.audio()
                    if audio is not None and audio.size:
                        perception.speech.transcribe(audio)
                    seconds["Whisper"] = time.perf_counter() - started
                    documents = [f"segment {i} description with a few words of speech" for i in
                                 range(len(video.segments(settings.segment_seconds)))]
                    started = time.perf_counter()
                    perception.embedder.embed_passages(documents)
                    seconds["E5"] = time.perf_counter() - started
            cores = os.cpu_count() or 1
            floor_s = seconds["detector (1 worker)"] / cores + sum(
                s for k, s in seconds.items() if k not in ("detector (1 worker)", "decode"))
            print(json.dumps({"video": name, "models": seconds, "floor_s": floor_s}), flush=True)
    finally:
        single.close()
        perception.close()


def run_side(src: Path, mode: str, videos: list[str], env: dict[str, str] | None = None) -> list[dict]:
    command = [sys.executable, __file__, f"--{mode}", *videos]
    result = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(src), **(env or {})},
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{mode} with {src} failed:\n{result.stderr[-3000:]}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def base_source(commit: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, "src"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("videos", nargs="*", default=DEFAULT_VIDEOS)
    parser.add_argument("--base", default=BASE, help="the commit to compare with (default: %(default)s)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-floor", action="store_true", help="skip the isolated model times")
    parser.add_argument("--perception", help="compare this checkout without and with these perception sources "
                                             "(e.g. all, or imagenet,pose) instead of --base and this checkout")
    parser.add_argument("--masks", action="store_true", help="compare this checkout without and with objects' masks")
    args = parser.parse_args()
    if args.measure:
        measure(args.videos)
        return 0
    if args.floor:
        floor(args.videos)
        return 0
    if args.masks:
        label = "masks off"
        before = run_side(ROOT / "src", "measure", args.videos, {"VIDAGENT_SEGMENTER": "none"})
        after = run_side(ROOT / "src", "measure", args.videos)
    elif args.perception:
        label = "perception none"
        before = run_side(ROOT / "src", "measure", args.videos, {"VIDAGENT_PERCEPTION": "none"})
        after = run_side(ROOT / "src", "measure", args.videos, {"VIDAGENT_PERCEPTION": args.perception})
    else:
        label = args.base
        with tempfile.TemporaryDirectory() as scratch:
            before = run_side(base_source(args.base, Path(scratch)), "measure", args.videos)
        after = run_side(ROOT / "src", "measure", args.videos)
    floors = {} if args.no_floor else {row["video"]: row for row in run_side(ROOT / "src", "floor", args.videos)}
    after_label = "masks on" if args.masks else f"perception {args.perception}" if args.perception else "after"
    print(f"| video | length | before ({label}): video s per wall s, CPU, peak | {after_label}: video s per wall s, CPU, "
          "peak | speed-up | floor: video s per s (models alone) | after over floor |")
    print("|---|---|---|---|---|---|---|")
    for old, new in zip(before, after):
        length = new["duration_s"]
        row = floors.get(new["video"])
        floor_text = "" if row is None else (f"{length / row['floor_s']:.2f} ({row['floor_s']:.1f} s: " + ", ".join(
            f"{k} {v:.1f} s" for k, v in row["models"].items()) + ")")
        over = "" if row is None else f"{new['wall_s'] / row['floor_s'] - 1:+.0%}"
        print(f"| {new['video']} | {length:.1f} s | {length / old['wall_s']:.2f} ({old['wall_s']:.1f} s), "
              f"{old['cpu_s'] / old['wall_s']:.0%}, {old['peak_mb']:.0f} MB | {length / new['wall_s']:.2f} "
              f"({new['wall_s']:.1f} s), {new['cpu_s'] / new['wall_s']:.0%}, {new['peak_mb']:.0f} MB | "
              f"{old['wall_s'] / new['wall_s']:.2f}x | {floor_text} | {over} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
