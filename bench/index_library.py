"""Benchmark ``vidagent index`` as a user runs it: a long video, and a folder of videos.

    .venv/bin/python bench/index_library.py long [--minutes 20] [--base COMMIT]
    .venv/bin/python bench/index_library.py folder
    .venv/bin/python bench/index_library.py make-long [--minutes 20]   (only build the long video)

``long``: builds (once, into a scratch folder outside the repository) a 640x360, 25 fps video of
``--minutes`` minutes with sound by concatenating the shared non-reserved clips (each scaled into
the frame, its soundtrack or silence), then runs ``vidagent index`` on it in a fresh home: video
seconds per wall second, CPU utilisation of the process tree, peak resident memory; and each
model's isolated time on it (see ``index_speed.py``) as the floor. ``--base`` also runs the
command of that commit (slow: the issue measured 13 minutes for 20 minutes of video).

``folder``: ``vidagent index`` on a folder holding the shared non-reserved clips, in one process,
with ``--workers 2`` and with ``--ray --workers 2`` (a local Ray instance), each into a fresh home.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_speed import ROOT, VIDEOS, base_source  # noqa: E402
from proc_stats import wait_measured  # noqa: E402

RESERVED = {"vtest.avi", "jobs.mp4", "demo1.mp4", "birthday.mp4", "silence_girl.mp4", "sample_demo_3.mp4",
            "sample_demo_9.mp4", "kitchen.mp4", "open-eqa-hm3d-demo.mp4", "02_cups.mp4", "03_blocks.mp4",
            "bedroom.mp4", "bikes.mp4"}
SCRATCH = Path(tempfile.gettempdir()) / "vidagent-bench"
WIDTH, HEIGHT, FPS, RATE = 640, 360, 25, 16000


def shared_clips() -> list[Path]:
    return [p for p in sorted(VIDEOS.glob("*/*")) if p.name not in RESERVED and p.suffix in (".mp4", ".avi", ".mkv")]


def _fit(image: np.ndarray) -> np.ndarray:
    import cv2

    h, w = image.shape[:2]
    scale = min(WIDTH / w, HEIGHT / h)
    resized = cv2.resize(image, (max(2, round(w * scale)), max(2, round(h * scale))), interpolation=cv2.INTER_AREA)
    canvas = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    top, left = (HEIGHT - resized.shape[0]) // 2, (WIDTH - resized.shape[1]) // 2
    canvas[top:top + resized.shape[0], left:left + resized.shape[1]] = resized
    return canvas


def make_long_video(minutes: float) -> Path:
    """The shared clips, one after another and again, until ``minutes`` (cached in SCRATCH)."""
    from vidagent.video.video import Video

    target = SCRATCH / f"long-{minutes:g}min.mp4"
    if target.exists():
        return target
    SCRATCH.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial.mp4")
    total_frames = int(minutes * 60 * FPS)
    written = 0
    audio_samples = 0
    with av.open(str(partial), "w") as out:
        vstream = out.add_stream("libx264", rate=FPS)
        vstream.width, vstream.height, vstream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        vstream.options = {"preset": "veryfast", "crf": "23"}
        astream = out.add_stream("aac", rate=RATE)
        astream.layout = "mono"
        clips = shared_clips()
        while written < total_frames:
            for path in clips:
                video = Video(path)
                count = min(int(video.duration_s * FPS), total_frames - written)
                times = [i / FPS for i in range(count)]
                for frame in video.frames_at(times):
                    image = av.VideoFrame.from_ndarray(_fit(frame.image), format="rgb24")
                    image.pts = written
                    image.time_base = Fraction(1, FPS)
                    for packet in vstream.encode(image):
                        out.mux(packet)
                    written += 1
                sound = video.audio()
                samples = count * RATE // FPS
                track = np.zeros(samples, np.float32) if sound is None else np.resize(sound, samples) \
                    if sound.size >= samples else np.concatenate([sound, np.zeros(samples - sound.size, np.float32)])
                for start in range(0, samples, 1024):
                    piece = av.AudioFrame.from_ndarray(track[None, start:start + 1024], format="flt", layout="mono")
                    piece.sample_rate = RATE
                    piece.pts = audio_samples
                    audio_samples += piece.samples
                    for packet in astream.encode(piece):
                        out.mux(packet)
                if written >= total_frames:
                    break
        for stream in (vstream, astream):
            for packet in stream.encode():
                out.mux(packet)
    partial.rename(target)
    return target


def run_index(src: Path, args: list[str], home: Path, limit_s: float | None = None) -> tuple[int, float, float, int, str]:
    from vidagent.config import Settings

    env = {**os.environ, "PYTHONPATH": str(src), "VIDAGENT_HOME": str(home),
           "VIDAGENT_MODELS": str(Settings.from_env().models_dir)}
    process = subprocess.Popen([sys.executable, "-m", "vidagent.cli", "index", "-q", *args], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    code, wall, cpu, peak = wait_measured(process, limit_s=limit_s)
    output = process.stdout.read() + process.stderr.read()
    return code, wall, cpu, peak, output


def report(label: str, video_s: float, measured: tuple[int, float, float, int, str]) -> None:
    code, wall, cpu, peak, output = measured
    if code == -9:
        label += " (stopped at the time limit; rerun with --resume to finish)"
    elif code != 0:
        print(f"{label}: exit {code}\n{output[-2000:]}")
    print(f"| {label} | {video_s:.0f} s | {wall:.1f} s | {video_s / wall:.2f} | {cpu / wall:.0%} | "
          f"{peak / 2**20:.0f} MB |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("long", "folder", "make-long"))
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--base", help="also run the index command of this commit (long only)")
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--limit", type=float, default=820, help="seconds before a long run is stopped (resumable)")
    parser.add_argument("--resume", action="store_true", help="long: continue the last stopped run")
    args = parser.parse_args()
    from vidagent.video.video import Video

    if args.what == "make-long":
        print(make_long_video(args.minutes))
        return 0
    print("| run | video | wall | video s per wall s | CPU | peak memory |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        if args.what == "long":
            video = make_long_video(args.minutes)
            length = Video(video).duration_s
            if args.base:
                src = base_source(args.base, Path(scratch) / "base")
                report(f"vidagent index ({args.base})", length, run_index(src, [str(video)], Path(scratch) / "h0"))
            home = SCRATCH / "long-home"  # kept, so a run stopped at the time limit can resume
            if not args.resume and home.exists():
                shutil.rmtree(home)
            report("vidagent index" + (" (resumed)" if args.resume else ""), length,
                   run_index(ROOT / "src", [str(video)], home, args.limit))
            if not args.no_floor:
                floor = subprocess.run([sys.executable, str(ROOT / "bench" / "index_speed.py"), "--floor", str(video)],
                                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
                print(f"\nfloor (models alone): {floor.stdout.strip() or floor.stderr[-2000:]}")
        else:
            folder = Path(scratch) / "clips"
            folder.mkdir()
            clips = shared_clips()
            for clip in clips:
                (folder / f"{clip.parent.name}-{clip.name}").symlink_to(clip)
            length = sum(Video(clip).duration_s for clip in clips)
            for label, flags in (("one process", []), ("--workers 2", ["--workers", "2"]),
                                 ("--ray --workers 2 (local Ray)", ["--ray", "--workers", "2"])):
                report(f"{len(clips)} clips, {label}", length,
                       run_index(ROOT / "src", [*flags, str(folder)], Path(scratch) / label.split()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
