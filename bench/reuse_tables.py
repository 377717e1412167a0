"""What near-duplicate reuse changes in the memory: tables built with and without it, compared.

    .venv/bin/python bench/reuse_tables.py [VIDEO ...]

Without arguments: every non-reserved shared clip is scanned (thumbnails only, no model) for
frames the objects stage would reuse at 2 fps; the clips where any would be reused are built
twice (frames + objects; reuse on, reuse off) into scratch libraries and their tables compared:
frames reused, frame descriptions and on-screen text that differ, detections, tracks and objects
(count and categories).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_library import shared_clips  # noqa: E402

from vidagent.config import Settings  # noqa: E402
from vidagent.memory.builder import MemoryBuilder  # noqa: E402
from vidagent.memory.store import Library  # noqa: E402
from vidagent.perception.suite import Perception  # noqa: E402
from vidagent.video.change import ChangeLimits, same_view, thumbnail  # noqa: E402
from vidagent.video.video import Video  # noqa: E402


def reusable(video: Video, fps: float = 2.0) -> int:
    key, count = None, 0
    for frame in video.frames_at([i / fps for i in range(int(video.duration_s * fps))], max_side=768):
        small = thumbnail(frame.image)
        if key is not None and same_view(key, small, ChangeLimits()):
            count += 1
        else:
            key = small
    return count


def tables(library: Library, video_id: str) -> dict[str, list]:
    return {table: library.rows(f"SELECT * FROM {table} WHERE video_id=? ORDER BY 2, 3", (video_id,))
            for table in ("frames", "text_in_frame", "detections", "tracks", "objects")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("videos", nargs="*", type=Path)
    args = parser.parse_args()
    candidates = args.videos or shared_clips()
    scanned = [(path, reusable(Video(path))) for path in candidates]
    chosen = [(path, n) for path, n in scanned if n or args.videos]
    print(f"{sum(n for _, n in scanned)} of the objects stage's frames would be reused in {len(scanned)} clips; "
          f"building the {len(chosen)} where any would\n")
    print("| clip | frames reused (frames / objects stage) | wall off / on | descriptions differing | "
          "text rows off / on | detections off / on | tracks off / on | objects off / on (categories) |")
    print("|---|---|---|---|---|---|---|---|")
    settings = Settings.from_env()
    perception = Perception.offline(settings)
    try:
        for path, _ in chosen:
            video = Video(path)
            built, walls, reused = {}, {}, {}
            for reuse in (False, True):
                perception.detector.clear()  # type: ignore[attr-defined]
                with tempfile.TemporaryDirectory() as scratch:
                    local = replace(settings, home=Path(scratch), reuse_near_duplicates=reuse)
                    with Library(local.library_path) as library:
                        builder = MemoryBuilder(library, perception, local)
                        started = time.perf_counter()
                        builder.build(video, ("frames", "objects"), progress=False)
                        walls[reuse] = time.perf_counter() - started
                        built[reuse] = tables(library, video.content_hash)
                        reused[reuse] = builder.last_reused
            off, on = built[False], built[True]
            differing = sum(a[3] != b[3] for a, b in zip(off["frames"], on["frames"]))
            cats = lambda rows: dict(Counter(r[2] for r in rows))  # noqa: E731
            counts = reused[True]
            print(f"| {path.name} | {counts.get('frames', 0)} / {counts.get('objects', 0)} | {walls[False]:.1f} / {walls[True]:.1f} s | "
                  f"{differing} of {len(off['frames'])} | {len(off['text_in_frame'])} / {len(on['text_in_frame'])} | "
                  f"{len(off['detections'])} / {len(on['detections'])} | {len(off['tracks'])} / {len(on['tracks'])} | "
                  f"{len(off['objects'])} {cats(off['objects'])} / {len(on['objects'])} {cats(on['objects'])} |")
    finally:
        perception.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
