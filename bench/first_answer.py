"""Time to the first answer on a video not indexed yet: a plain ``vidagent ask`` (the default: a glance for a
video of 2 minutes or more, issue 43) beside ``vidagent ask --no-glance`` (the memory built first, then the
answer) and any ``--glance S`` asked for, each in a fresh library, one after the other in one run.

    nice -n 5 .venv/bin/python bench/first_answer.py [--video PATH ...] [--minutes 20] [--question TEXT]
                                                     [--glance 10 --glance 20] [--complete] [--limit 900]

Default videos: the 20-minute video ``index_library.py make-long`` builds and the 41-s shared clip (a
reserved clip: a speed measure only, nothing is tuned on it). Each row: wall seconds to the answer,
CPU seconds of the process tree (and their share of the wall time: on a shared machine the CPU seconds
compare better than the wall), peak memory, the coverage the answer states and the windows refined for
it (``--json --trace`` output). ``--complete``: the glance's run goes on to ``--complete`` and the time to
the full memory is reported too (the answer's time is still read from when it was printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_library import make_long_video  # noqa: E402
from index_speed import ROOT, VIDEOS  # noqa: E402
from proc_stats import wait_measured  # noqa: E402

CLIP = VIDEOS / "github_VideoAgent" / "kitchen.mp4"
QUESTION = "What happens in the video?"


def ask(video: Path, question: str, library: Path, extra: list[str], limit_s: float) -> dict:
    """One ``vidagent ask --json --trace`` in a fresh library: seconds to the answer (to its output's
    first line), seconds to exit, CPU share, peak memory and the answer's JSON."""
    from vidagent.config import Settings

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "VIDAGENT_LIBRARY": str(library),
           "VIDAGENT_MODELS": str(Settings.from_env().models_dir)}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "vidagent.cli", "ask", str(video), question, "--json", "--trace",
                                "-q", "--no-cache", *extra], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    first: list[float] = []
    lines: list[str] = []

    def read() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            if not first:
                first.append(time.perf_counter() - started)
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code, wall, cpu, peak = wait_measured(process, limit_s=limit_s)
    reader.join()
    text = "".join(lines)
    answer = json.loads(text[: text.rindex("}") + 1]) if code == 0 and "{" in text else {}
    if code != 0:
        print(f"exit {code}: {process.stderr.read()[-1500:]}", file=sys.stderr)  # type: ignore[union-attr]
    return {"code": code, "answer_s": first[0] if first else wall, "wall_s": wall, "cpu": cpu / wall, "peak": peak,
            "answer": answer}


def refined(answer: dict) -> list[list[float]]:
    windows = []
    for step in answer.get("trace", []):
        windows += step.get("artifacts", {}).get("refined", []) if isinstance(step, dict) else []
    return windows


def row(label: str, video: Path, measured: dict) -> str:
    answer = measured["answer"]
    coverage = next(iter(answer.get("artifacts", {}).get("coverage", {}).values()), None)
    said = coverage["text"] if coverage else "full memory"
    text = (answer.get("answer") or "")[:60].replace("|", "/")
    return (f"| {video.name} | {label} | {measured['answer_s']:.1f} s | {measured['wall_s']:.1f} s | "
            f"{measured['cpu'] * measured['wall_s']:.0f} s ({measured['cpu']:.0%}) | {measured['peak'] / 2**20:.0f} MB | "
            f"{said} | {len(refined(answer))} | {text} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", action="append", type=Path)
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--glance", action="append", help="seconds between glanced frames (repeat: one run each "
                                                          "beside the default's)")
    parser.add_argument("--complete", action="store_true")
    parser.add_argument("--only", choices=("default", "before", "after"), help="run one side only")
    parser.add_argument("--limit", type=float, default=900, help="seconds before a run is stopped")
    args = parser.parse_args()
    videos = args.video or [make_long_video(args.minutes), CLIP]
    print("| video | run | to the answer | to exit | CPU time (share) | peak | coverage | windows refined | answer |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory(prefix="vidagent-first-answer-") as scratch:
        for number, video in enumerate(videos):
            complete = ["--complete"] if args.complete else []
            runs = [(f"default: ask{' --complete' if complete else ''}", complete)]  # a glance from 2 minutes on
            runs += [(f"after: ask --glance {every}{' --complete' if complete else ''}", ["--glance", every] + complete)
                     for every in args.glance or []]
            runs.append(("before: ask --no-glance (index, then answer)", ["--no-glance"]))
            for index, (label, extra) in enumerate(runs):
                if args.only and not label.startswith(args.only):
                    continue
                library = Path(scratch) / f"{number}-{index}.sqlite"
                print(row(label, video, ask(video, args.question, library, extra, args.limit)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
