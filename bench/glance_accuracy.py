"""Is a glance's answer as good as a whole memory's? (issue 43) Paired answers to the development questions
(``../shared/data/qa/dev.jsonl``) on a long video that holds each of their clips once, at a known offset.

    .venv/bin/python bench/glance_accuracy.py [--planner default|react|...] [--limit N] [--out DIR]
                                              [--conditions full,glance] [--every 20]

The video is ``index_library.py make-long`` over one round of the shared non-reserved clips (each clip once,
in order; 4.4 minutes), so every question's answer lies in its clip's stretch: localization spans are shifted by
the clip's offset, other answers are scored as ``vidagent eval`` scores them. Conditions, same questions, same
model, one process, one after the other:

- ``full``: the video indexed whole once (not timed), then each question with ``glance=0``;
- ``glance``: each question in a fresh library (nothing indexed) the default way (``glance=None``: a glance every
  ``--every`` seconds, the stretches read described in full), timed from the call to the answer.

Prints accuracy per condition, the paired table (right only with each; McNemar exact p), seconds per
question and the coverage the glanced answers state; writes one JSON line per answer to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from index_library import FPS, make_long_video, shared_clips  # noqa: E402

from vidagent.agent.task import Question  # noqa: E402
from vidagent.config import Settings  # noqa: E402
from vidagent.eval.dataset import LOCALIZATION  # noqa: E402
from vidagent.eval.loaders import load_dataset  # noqa: E402
from vidagent.eval.pairing import mcnemar_exact  # noqa: E402
from vidagent.eval.scoring import score_answer  # noqa: E402
from vidagent.memory.builder import TEMPORAL_STAGES  # noqa: E402
from vidagent.session import Session  # noqa: E402
from vidagent.video.video import Video  # noqa: E402

QUESTIONS = ROOT.parent / "shared" / "data" / "qa" / "dev.jsonl"


def clip_offsets() -> tuple[float, dict[str, float]]:
    """The length of one round of the shared clips and where each clip starts in it (by its path's last two
    parts, as dev.jsonl names them), laid out as ``make_long_video`` lays them."""
    written = 0
    offsets: dict[str, float] = {}
    for path in shared_clips():
        offsets[f"{path.parent.name}/{path.name}"] = written / FPS
        written += int(Video(path).duration_s * FPS)
    return written / FPS, offsets


def shifted(item, offset: float):
    """The question as asked about the long video: its spans moved by its clip's offset."""
    spans = tuple((a + offset, b + offset) for a, b in item.spans)
    return replace(item, spans=spans)


def ask(session: Session, video: Path, item, planner: str | None, glance: float | None) -> dict:
    question = Question(item.question, tuple(item.choices) if item.choices else None, id=item.id,
                        wants_time=item.task == LOCALIZATION)
    started = time.perf_counter()
    answer = session.ask(str(video), question, planner=planner, glance=glance)
    seconds = time.perf_counter() - started
    coverage = answer.artifacts.get("coverage", {})
    return {"id": item.id, "type": item.type, "answer": answer.text, "seconds": round(seconds, 2),
            "coverage": next(iter(coverage.values()), {}).get("text", "") if coverage else "",
            **score_answer(item, answer)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--planner", default="default", help="a planner's name, or 'default' (the session's choice)")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--every", type=float, default=None, help="a glance's seconds (default: the default's)")
    parser.add_argument("--conditions", default="full,glance")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "vidagent-glance-accuracy")
    args = parser.parse_args()
    planner = None if args.planner == "default" else args.planner
    minutes, offsets = clip_offsets()
    video = make_long_video(minutes / 60)
    items = [item for item in load_dataset(QUESTIONS).items if "/".join(Path(item.video).parts[-2:]) in offsets]
    items = [shifted(item, offsets["/".join(Path(item.video).parts[-2:])]) for item in items]
    if args.limit:
        items = items[: args.limit]
    args.out.mkdir(parents=True, exist_ok=True)
    base = Settings.from_env()
    scratch = Path(tempfile.mkdtemp(prefix="vidagent-glance-acc-"))
    rows: dict[str, dict[str, dict]] = {}
    print(f"{video.name}: {Video(video).duration_s:.0f} s; {len(items)} questions; planner {args.planner}", flush=True)
    for condition in args.conditions.split(","):
        results: dict[str, dict] = {}
        out = (args.out / f"{condition}-{args.planner}.jsonl").open("w")
        if condition == "full":
            settings = replace(base, home=scratch / "full", models=base.models_dir)
            with Session(settings) as session:
                session.index(str(video), TEMPORAL_STAGES, progress=False)
                for item in items:
                    results[item.id] = ask(session, video, item, planner, 0.0)
                    out.write(json.dumps(results[item.id]) + "\n")
                    out.flush()
        else:
            for index, item in enumerate(items):
                home = scratch / f"glance-{index}"
                settings = replace(base, home=home, models=base.models_dir)
                with Session(settings) as session:
                    results[item.id] = ask(session, video, item, planner, args.every)
                out.write(json.dumps(results[item.id]) + "\n")
                out.flush()
                shutil.rmtree(home, ignore_errors=True)
        out.close()
        rows[condition] = results
        right = sum(bool(r["correct"]) for r in results.values())
        seconds = sorted(r["seconds"] for r in results.values())
        print(f"{condition}: {right}/{len(results)} right ({100 * right / max(1, len(results)):.1f} %), "
              f"median {seconds[len(seconds) // 2]:.1f} s a question", flush=True)
    if {"full", "glance"} <= set(rows):
        full, glanced = rows["full"], rows["glance"]
        only_full = sum(bool(full[i]["correct"]) and not glanced[i]["correct"] for i in full)
        only_glance = sum(bool(glanced[i]["correct"]) and not full[i]["correct"] for i in full)
        print(f"paired: {only_full} right only with the whole memory, {only_glance} only with the glance; "
              f"McNemar exact p = {mcnemar_exact(only_full, only_glance):.3g}")
        by_type: dict[str, list[int]] = {}
        for i, row in full.items():
            counts = by_type.setdefault(row["type"], [0, 0, 0])
            counts[0] += 1
            counts[1] += bool(row["correct"])
            counts[2] += bool(glanced[i]["correct"])
        print("| type | n | whole memory | glance |\n|---|---:|---:|---:|")
        for kind, (n, a, b) in sorted(by_type.items()):
            print(f"| {kind} | {n} | {a} | {b} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
