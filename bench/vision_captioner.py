"""Indexing throughput with a vision chat model as the captioner (issue 40), against a local OpenAI-compatible
server that answers every request after a fixed delay (a stand-in for a remote model's latency).

    .venv/bin/python bench/vision_captioner.py [--minutes 2] [--delays 50,200,1000] [--concurrency 1,4,16]

For each delay and concurrency: a fresh home, the ``frames`` stage of a long video made from the shared clips
(``index_library.py make-long``) built in this process with ``VIDAGENT_CAPTIONER=openai:bench?base_url=...``
(decoding, the text reader on each segment's middle frame, 4 frames a request): video seconds per wall second,
requests, and the server's peak of requests at once. Then the same build into a second library over the last
home: how many segments the reply cache answered and what it took.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
from fault_llm import FaultServer  # noqa: E402
from index_library import make_long_video  # noqa: E402

from vidagent.config import BackendSettings, Settings  # noqa: E402
from vidagent.memory.builder import MemoryBuilder  # noqa: E402
from vidagent.memory.store import Library  # noqa: E402
from vidagent.perception.suite import Perception  # noqa: E402
from vidagent.video.video import Video  # noqa: E402


class DelayedReplies:
    """The server's reply: a caption after ``delay_s``, counting the requests served at once."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.active = self.peak = 0
        self.lock = threading.Lock()

    def __call__(self, messages: list) -> str:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.delay_s)
        with self.lock:
            self.active -= 1
        return "A person works at a table in a bright room."


def build_frames(video: Video, home: Path, library_name: str, spec: str) -> tuple[float, dict]:
    installed = Settings.from_env()
    settings = replace(installed, home=home, models=installed.models_dir, library=home / library_name,
                       backends=BackendSettings(captioner=spec))
    perception = Perception.from_settings(settings)
    try:
        with Library(settings.library_path) as library:
            started = time.perf_counter()
            MemoryBuilder(library, perception, settings).build(video, ("frames",), progress=False)
            return time.perf_counter() - started, perception.usage()["captioner"]
    finally:
        perception.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--delays", default="50,200,1000", help="milliseconds a request takes, comma-separated")
    parser.add_argument("--concurrency", default="1,4,16", help="requests at once, comma-separated")
    args = parser.parse_args()
    video = Video(make_long_video(args.minutes))
    print(f"{video.path.name}: {video.duration_s:.0f} s, {len(video.segments())} segments of 2 s, 4 frames a request")
    print("| delay | concurrency | wall s | video s / wall s | requests | peak at once |")
    print("|---:|---:|---:|---:|---:|---:|")
    last_home: Path | None = None
    last_spec = ""
    scratch = Path(tempfile.mkdtemp(prefix="vidagent-vlm-bench-"))
    for delay_ms in (int(d) for d in args.delays.split(",")):
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            replies = DelayedReplies(delay_ms / 1000)
            with FaultServer(reply=replies) as server:
                spec = f"openai:bench?base_url={server.base_url}&concurrency={concurrency}"
                home = scratch / f"d{delay_ms}-c{concurrency}"
                wall, usage = build_frames(video, home, "library.sqlite", spec)
                print(f"| {delay_ms} ms | {concurrency} | {wall:.1f} | {video.duration_s / wall:.2f} | "
                      f"{usage['requests']:.0f} | {replies.peak} |", flush=True)
                if delay_ms == max(int(d) for d in args.delays.split(",")) and concurrency == 1:
                    last_home, last_spec = home, spec
    if last_home is not None:
        with FaultServer(reply=DelayedReplies(1.0)) as server:
            spec = last_spec.split("?")[0] + f"?base_url={server.base_url}&concurrency=1"
            wall, usage = build_frames(video, last_home, "second.sqlite", spec)
            print(f"\nsecond index into another library over the same home (1000 ms server, concurrency 1): "
                  f"{wall:.1f} s, {usage['cached']:.0f} replies from the cache, {usage['requests']:.0f} requests")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
