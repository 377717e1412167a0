"""Benchmark indexing per memory stage, side by side in one run.

    .venv/bin/python bench/index_speed.py [VIDEO ...]

For each video, into a scratch library:
- decoding: the sampled frames every frame stage asks for (decode straight through, convert only
  those) versus a decode-and-convert-every-frame loop on the same file;
- each stage built on its own (frames, speech, segments, objects), then all four in one build (frame
  stages share one decoding pass): video seconds per wall second;
- for each stage, the time spent inside the models (detector, OCR, Whisper, E5, appearance features,
  tracker) versus the stage's wall time: the rest is pipeline overhead (decoding, colour words,
  JSON checkpoints, SQLite, re-ID).
Every model is warmed up first so load times are not counted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import av
import numpy as np

from vidagent.config import Settings
from vidagent.memory.builder import ALL_STAGES, MemoryBuilder
from vidagent.memory.store import Library
from vidagent.perception.suite import Perception
from vidagent.video.video import Video

VIDEOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "videos"
DEFAULT_VIDEOS = ["github_Video-LLaVA/sample_demo_22.mp4", "github_sam2/01_dog.mp4",
                  "github_Video-LLaMA/skateboarding_dog.mp4"]


class Clock:
    """Seconds spent in each model, accumulated by ``Timed`` wrappers."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def reset(self) -> None:
        self.seconds.clear()


class Timed:
    """Delegates to a model and adds the time of its inference methods to a clock."""

    METHODS = {"detect", "read", "transcribe", "embed_passages", "embed_queries", "features", "similarity", "update"}

    def __init__(self, model: Any, label: str, clock: Clock) -> None:
        self._model, self._label, self._clock = model, label, clock

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._model, name)
        if name not in self.METHODS or not callable(value):
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self._clock.seconds[self._label] += time.perf_counter() - started
        return timed


def timed_perception(settings: Settings, clock: Clock) -> Perception:
    from vidagent.perception.describer import DetectorDescriber

    base = Perception.offline(settings)
    detector = Timed(base.detector, "detector", clock)
    reader = Timed(base.describer.text_reader, "OCR", clock)
    new_tracker = base.new_tracker
    return replace(
        base,
        describer=DetectorDescriber(detector, reader),  # type: ignore[arg-type]
        detector=detector,  # type: ignore[arg-type]
        speech=Timed(base.speech, "Whisper", clock),  # type: ignore[arg-type]
        embedder=Timed(base.embedder, "E5", clock),  # type: ignore[arg-type]
        appearance=Timed(base.appearance, "appearance", clock),  # type: ignore[arg-type]
        new_tracker=lambda fps: Timed(new_tracker(fps), "tracker", clock),  # type: ignore[arg-type,return-value]
    )


def forget_detections(perception: Perception) -> None:
    """Empty the detector's result cache so a timed build does not reuse an earlier build's work."""
    clear = getattr(perception.detector, "clear", None)
    if callable(clear):
        clear()


def timed_call(function):
    started = time.perf_counter()
    result = function()
    return result, time.perf_counter() - started


def decode_every_frame(path: Path) -> int:
    count = 0
    with av.open(str(path)) as container:
        for frame in container.decode(container.streams.video[0]):
            frame.to_ndarray(format="rgb24")
            count += 1
    return count


def bench_video(path: Path, perception: Perception, clock: Clock, settings: Settings) -> list[tuple[str, float, str]]:
    video = Video(path)
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch_settings = replace(settings, home=Path(scratch))
        with Library(scratch_settings.library_path) as library:
            builder = MemoryBuilder(library, perception, scratch_settings)
            frame_stages = [builder.stage("frames"), builder.stage("objects")]
            times = sorted({t for stage in frame_stages for t in stage.frame_times(video)})  # type: ignore[union-attr]
            max_side = max(stage.max_side for stage in frame_stages)  # type: ignore[union-attr]
            frames, seconds = timed_call(lambda: sum(1 for _ in video.frames_at(times, max_side=max_side)))
            rows.append(("decode: sampled frames of all frame stages", seconds, f"{frames} frames"))
            count, seconds = timed_call(lambda: decode_every_frame(path))
            rows.append(("decode: convert every frame (reference)", seconds, f"{count} frames"))
            for stage in ALL_STAGES:
                clock.reset()
                forget_detections(perception)
                _, seconds = timed_call(lambda: builder.build(video, [stage], progress=False))
                inside = ", ".join(f"{name} {s:.2f} s" for name, s in sorted(clock.seconds.items()))
                model_s = sum(clock.seconds.values())
                rows.append((f"stage {stage}", seconds,
                             f"models {model_s:.2f} s ({inside or 'none'}); overhead {seconds - model_s:.2f} s "
                             f"({(seconds - model_s) / seconds:.0%})"))
            _, seconds = timed_call(lambda: builder.build(video, ALL_STAGES, progress=False))
            rows.append(("rebuild, every stage cached", seconds, "cache hit"))
        with Library(Path(scratch) / "all.sqlite") as library:
            clock.reset()
            forget_detections(perception)
            _, seconds = timed_call(lambda: MemoryBuilder(library, perception, scratch_settings).build(
                video, ALL_STAGES, progress=False))
            model_s = sum(clock.seconds.values())
            rows.append(("ALL stages in one build (shared decoding)", seconds,
                         f"models {model_s:.2f} s; overhead {seconds - model_s:.2f} s ({(seconds - model_s) / seconds:.0%})"))
    return [(name, video.duration_s / s if s > 0 else float("inf"), f"{s:.2f} s wall; {note}") for name, s, note in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("videos", nargs="*", default=DEFAULT_VIDEOS)
    args = parser.parse_args()
    settings = Settings.from_env()
    clock = Clock()
    perception = timed_perception(settings, clock)
    try:
        warm = next(Video(VIDEOS / "github_sam2/01_dog.mp4").frames_at([1.0], max_side=768)).image
        perception.describer.describe([warm])
        perception.appearance.features([warm[:64, :64]])
        perception.embedder.embed_passages(["warm up"])
        perception.speech.transcribe(np.zeros(16000, np.float32))
        for name in args.videos:
            path = Path(name) if Path(name).exists() else VIDEOS / name
            video = Video(path)
            print(f"\n## {name} ({video.duration_s:.1f} s, {video.info.width}x{video.info.height})\n")
            print("| step | video s per wall s | detail |\n|---|---|---|")
            for step, speed, detail in bench_video(path, perception, clock, settings):
                print(f"| {step} | {speed:.1f} | {detail} |")
    finally:
        perception.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
