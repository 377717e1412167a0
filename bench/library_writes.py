"""How long index workers wait on each other when they write one library (SQLite WAL, one writer).

    .venv/bin/python bench/library_writes.py [--workers 2] [--videos 4]

Each worker process writes what building a 20-minute video writes, through ``Library``: one
checkpoint per processed batch (2400 objects-stage frames in batches of 8 with ~5 detections each,
600 frames-stage frames in batches of 4, payloads of the real stages' shape) and the stages' rows in
one transaction each (detections, tracks, objects, segments with 384-d embeddings). Reported: the
time spent inside the write calls, alone (one worker) and with ``--workers`` writing at once; the
difference is the waiting that one writer at a time costs. No model runs.
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vidagent.memory.store import Library


def _objects_payload(rng: np.random.Generator, start: int) -> list:
    features = base64.b64encode(rng.random((5, 104)).astype(np.float16).tobytes()).decode()
    result = {"size": [640, 360], "boxes": rng.random((5, 4)).round(2).tolist(), "scores": [0.5] * 5,
              "class_ids": [0] * 5, "labels": ["person"] * 5, "colours": ["red"] * 5, "features": features}
    return [[(start + i) / 2, result] for i in range(8)]


def write_video(path: str, video: int) -> float:
    """Seconds spent inside the library's write calls for one video's build."""
    rng = np.random.default_rng(video)
    video_id = f"video-{video}-{time.monotonic_ns()}"
    spent = 0.0
    with Library(path) as library:
        library._conn.execute(  # the videos row the stages refer to
            "INSERT INTO videos VALUES (?,?,?,?,?,?,?,?,?,?)",
            (video_id, "x.mp4", 1200.0, 25.0, 640, 360, 0, 1, "h264", "now"))
        for batch in range(300):
            for stage, payload in (("objects", _objects_payload(rng, batch * 8)),
                                   ("frames", [[batch * 4.0 + i, {"text": "[detector] 1 person.", "objects": [],
                                                                  "text_boxes": []}] for i in range(4)])):
                if stage == "frames" and batch >= 150:
                    continue
                started = time.perf_counter()
                library.save_checkpoint(video_id, stage, {"v": 1}, payload[0][0], payload)
                spent += time.perf_counter() - started
        embedding = rng.random(384).astype(np.float32).tobytes()
        rows = {
            "detections": [(i, i / 2, i // 4, "person", 0.5, 1, 2, 3, 4, 0.1, 0.1, 0.01, i % 50, i % 20, None)
                           for i in range(12000)],
            "tracks": [(t, t % 20, "person", 0.0, 10.0, 20) for t in range(50)],
            "objects": [(o, "person", 0.0, 10.0, 20, "red", "still", "red person", embedding, embedding)
                        for o in range(20)],
            "object_segments": [(o, s, s * 2.0, s * 2.0 + 1, 2) for o in range(20) for s in range(30)],
        }
        started = time.perf_counter()
        library.write_stage(video_id, "objects", {"v": 1}, rows, 1.0)
        library.write_stage(video_id, "segments", {"v": 1}, {
            "segments": [(s, s * 2.0, s * 2.0 + 2, "desc", "", "", embedding) for s in range(600)],
            "clips": [(c, c * 20.0, c * 20.0 + 20, c * 10, c * 10 + 9, "desc") for c in range(60)]}, 1.0)
        spent += time.perf_counter() - started
    return spent


def _worker(path: str, videos: list[int], out: "multiprocessing.Queue[float]") -> None:
    out.put(sum(write_video(path, v) for v in videos))


def run(path: str, workers: int, videos: int) -> tuple[float, float]:
    """(wall seconds, seconds inside write calls summed over workers)."""
    queue: multiprocessing.Queue[float] = multiprocessing.Queue()
    shares = [list(range(w, videos, workers)) for w in range(workers)]
    started = time.perf_counter()
    processes = [multiprocessing.Process(target=_worker, args=(path, share, queue)) for share in shares]
    for process in processes:
        process.start()
    spent = sum(queue.get() for _ in processes)
    for process in processes:
        process.join()
    return time.perf_counter() - started, spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--videos", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        alone_wall, alone = run(str(Path(scratch) / "one.sqlite"), 1, args.videos)
        both_wall, both = run(str(Path(scratch) / "many.sqlite"), args.workers, args.videos)
    per_video = json.dumps({"alone_s": round(alone / args.videos, 3), "concurrent_s": round(both / args.videos, 3)})
    print(f"{args.videos} videos of 20 minutes' writes: one writer {alone:.2f} s inside writes "
          f"({alone_wall:.1f} s wall); {args.workers} writers {both:.2f} s inside writes ({both_wall:.1f} s wall); "
          f"per video {per_video}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
