"""What scoping a video's SQL by construction costs: opening ``ReadOnlyQueries`` and running the statements
an LLM typically writes, on a library you name (an indexed clip's, an imported memory's).

    PYTHONPATH=src .venv/bin/python bench/sql_scope.py LIBRARY VIDEO_ID [--repeat N]

Prints, for the open and each statement, the median milliseconds over N sessions (each session a fresh
``ReadOnlyQueries``: the first statement that reads a table copies that table's rows of the video), and the
peak memory of the process. Run it with main's ``src`` and a branch's side by side to compare.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from vidagent.memory.sql import ReadOnlyQueries

STATEMENTS = (
    "SELECT COUNT(*) FROM segments",
    "SELECT segment_id, start_s, end_s, description FROM segments WHERE description LIKE '%person%' LIMIT 20",
    "SELECT category, COUNT(*) FROM detections GROUP BY category ORDER BY 2 DESC",
    "SELECT object_id, category, first_s, last_s FROM objects ORDER BY first_s",
    "SELECT text, MIN(time_s) FROM text_in_frame GROUP BY text",
    "SELECT duration_s, fps FROM videos",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("library")
    parser.add_argument("video_id")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    timings: dict[str, list[float]] = {"open": [], **{s: [] for s in STATEMENTS}, "all again": []}
    for _ in range(args.repeat):
        started = time.perf_counter()
        with ReadOnlyQueries(args.library, args.video_id) as queries:
            timings["open"].append(time.perf_counter() - started)
            for statement in STATEMENTS:
                started = time.perf_counter()
                queries.run(statement)
                timings[statement].append(time.perf_counter() - started)
            started = time.perf_counter()
            for statement in STATEMENTS:
                queries.run(statement)
            timings["all again"].append(time.perf_counter() - started)
    for name, seconds in timings.items():
        print(f"{1000 * statistics.median(seconds):8.2f} ms  {name[:90]}")
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
