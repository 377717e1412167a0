"""Benchmark indexing speed per stage, in video seconds per wall second, side by side in one run.

    .venv/bin/python bench/index_speed.py [VIDEO ...]

For each video: frame sampling (decode straight through, convert only sampled frames) versus a
decode-and-convert-every-frame loop; the detector, the OCR and the whole describer on the sampled
frames; speech-to-text on the soundtrack; text embedding of the segments; and the full memory build
into a scratch library (model load times excluded: every model is warmed up first).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import av

from vidagent.config import Settings
from vidagent.memory.builder import FRAME_MAX_SIDE, MemoryBuilder
from vidagent.memory.store import Library
from vidagent.perception.suite import Perception
from vidagent.video.video import Video

VIDEOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "videos"
DEFAULT_VIDEOS = ["github_Video-LLaVA/sample_demo_22.mp4", "github_sam2/01_dog.mp4"]


def timed(function):
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


def bench_video(path: Path, perception: Perception, settings: Settings) -> list[tuple[str, float, str]]:
    video = Video(path)
    duration = video.duration_s
    segments = video.segments(settings.segment_seconds)
    times = [s.centre_s for s in segments]
    rows: list[tuple[str, float, str]] = []

    frames, seconds = timed(lambda: list(video.frames_at(times, max_side=FRAME_MAX_SIDE)))
    rows.append(("decode: sampled frames (1 per segment)", seconds, f"{len(frames)} frames"))
    count, seconds = timed(lambda: decode_every_frame(path))
    rows.append(("decode: convert every frame (reference)", seconds, f"{count} frames"))

    describer = perception.describer
    images = [f.image for f in frames]
    _, seconds = timed(lambda: describer.detector.detect(images))
    rows.append(("detector (CenterNet, Node/wasm)", seconds, f"{seconds / len(images) * 1000:.0f} ms/frame"))
    _, seconds = timed(lambda: [describer.text_reader.read(image) for image in images])
    rows.append(("OCR (RapidOCR PP-OCRv5)", seconds, f"{seconds / len(images) * 1000:.0f} ms/frame"))
    _, seconds = timed(lambda: describer.describe(images))
    rows.append(("describer (detector + OCR + words)", seconds, f"{seconds / len(images) * 1000:.0f} ms/frame"))

    audio, seconds = timed(video.audio)
    rows.append(("decode: audio to 16 kHz", seconds, "no audio track" if audio is None else f"{len(audio)} samples"))
    if audio is not None and audio.size:
        speech, seconds = timed(lambda: perception.speech.transcribe(audio))
        rows.append(("speech to text (Whisper tiny.en)", seconds, f"{len(speech)} speech segments"))

    texts = [f"segment {i}: a person and a dog on a street, red car on the left" for i in range(len(segments))]
    _, seconds = timed(lambda: perception.embedder.embed_passages(texts))
    rows.append(("text embedding (multilingual-e5-small)", seconds, f"{len(texts)} passages"))

    with tempfile.TemporaryDirectory() as scratch:
        scratch_settings = replace(settings, home=Path(scratch))
        with Library(scratch_settings.library_path) as library:
            builder = MemoryBuilder(library, perception, scratch_settings)
            _, seconds = timed(lambda: builder.build(video, progress=False))
            rows.append(("FULL memory build (all stages)", seconds, f"{len(segments)} segments"))
            _, seconds = timed(lambda: builder.build(video, progress=False))
            rows.append(("memory reuse (second build)", seconds, "cached"))
    return [(name, duration / s if s > 0 else float("inf"), f"{s:.2f} s wall; {note}") for name, s, note in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("videos", nargs="*", default=DEFAULT_VIDEOS)
    args = parser.parse_args()
    settings = Settings.from_env()
    perception = Perception.offline(settings)
    try:
        # Warm up every model so load time is not counted as throughput.
        warm = next(Video(VIDEOS / DEFAULT_VIDEOS[1]).frames_at([1.0], max_side=FRAME_MAX_SIDE)).image
        perception.describer.describe([warm])
        perception.embedder.embed_passages(["warm up"])
        import numpy as np
        perception.speech.transcribe(np.zeros(16000, np.float32))
        for name in args.videos:
            path = Path(name) if Path(name).exists() else VIDEOS / name
            video = Video(path)
            print(f"\n## {name} ({video.duration_s:.1f} s, {video.info.width}x{video.info.height})\n")
            print("| stage | video s per wall s | detail |\n|---|---|---|")
            for stage, speed, detail in bench_video(path, perception, settings):
                print(f"| {stage} | {speed:.1f} | {detail} |")
    finally:
        perception.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
