"""Fit and measure the confidence calibration (issue 51): does an answer's confidence tell right from wrong?

    .venv/bin/python bench/calibrate.py own=eval-runs/dev next=eval-runs/nextqa ego=eval-runs/ego [--write]
                                        [--out bench/results/calibration.md]

Each argument names a development set and a ``vidagent eval`` run folder of the default planner on it (its
results.jsonl). For each kind of measure (``agent.calibration``: options scored by number, by text, an open answer's
rating), a logistic map is fitted on the rows of every set together; the figures are those of 5-fold
cross-validation (each row's probability comes from the map fitted without its fold), so no figure is read off the
rows that made it. Per set: accuracy, AUROC and expected calibration error of the measured confidence and of the
calibrated one (cross-validated; pooling five folds' maps mixes their scales, so its AUROC is a pessimistic bound),
the AUROC of the maps fitted on every row (the ranking the shipped maps give: a map of one measure per set ranks
as that measure does, so no fitting lifts it), the accuracy of the answers kept when the least confident are withheld (risk-coverage), and the
abstentions by reason. ``--write`` fits every row and writes ``src/vidagent/agent/calibration.toml``.
"""

from __future__ import annotations

import argparse
import json
import zlib
from dataclasses import replace
from collections import Counter
from pathlib import Path
from typing import Any

from vidagent.agent.calibration import CALIBRATION_FILE, FEATURES, Calibration, LogisticMap, fit_logistic, measure_of
from vidagent.agent.confidence import confidence_cap
from vidagent.eval.metrics import calibration

FOLDS = 5
COVERAGE_POINTS = (1.0, 0.8, 0.6, 0.5, 0.4, 0.2)
TOML = Path(__file__).resolve().parents[1] / "src" / "vidagent" / "agent" / CALIBRATION_FILE


def load(name: str, folder: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]
    kept = []
    for row in rows:
        if row.get("correct") is None or row.get("error"):
            continue
        artifacts = dict(row.get("artifacts") or {})
        # runs made before the memory's kind was recorded: an imported memory (namespace:id) was captioned, a
        # video file here was described by the offline models
        artifacts.setdefault("memory_captioned", not Path(str(row.get("video_path", ""))).is_file())
        measure = measure_of(artifacts, row.get("choice_index"), row.get("question", ""), row.get("choices") or (),
                             [str(item.get("text", "")) for item in row.get("evidence") or ()],
                             str(row.get("prediction") or ""))
        measured = row.get("measured_confidence", row.get("confidence"))
        kept.append(row | {"set": name, "measure": measure, "measured": measured})
    return kept


def fold_of(row: dict[str, Any]) -> int:
    return zlib.crc32(f"{row['set']}/{row['id']}".encode()) % FOLDS


def capped(row: dict[str, Any], value: float | None) -> float | None:
    """The confidence the live answer would carry: 0 where it abstained, under the caps of its run's state."""
    if value is None:
        return None
    if row.get("abstained"):
        return 0.0
    check = (row.get("artifacts") or {}).get("check") or {}
    cap = confidence_cap(check_failed=check.get("verdict") in ("unsupported", "no evidence"),
                         budget_stopped=bool(((row.get("artifacts") or {}).get("budget") or {}).get("stopped")))
    return value if cap is None else min(value, cap[0])


def fit(rows: list[dict[str, Any]], fitted_on: str) -> dict[str, LogisticMap]:
    maps = {}
    for kind, names in FEATURES.items():
        members = [row for row in rows if row["measure"] and row["measure"].kind == kind]
        if len({bool(row["correct"]) for row in members}) < 2:
            continue
        intercept, weights = fit_logistic([row["measure"].features for row in members],
                                          [bool(row["correct"]) for row in members], names)
        maps[kind] = LogisticMap(round(intercept, 4), {k: round(v, 4) for k, v in weights.items()},
                                 f"{fitted_on}: {len(members)} answers")
    return maps


def cross_validated(rows: list[dict[str, Any]]) -> None:
    """Each row's ``calibrated``: the probability from the maps fitted on the other folds."""
    for fold in range(FOLDS):
        maps = fit([row for row in rows if fold_of(row) != fold], "fold")
        held = Calibration({"any": maps})
        for row in rows:
            if fold_of(row) == fold:
                row["calibrated"] = held.probability("any", row["measure"])


def report(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| set | n | acc % | measure | AUROC measured | AUROC calibrated (CV) | AUROC shipped map | ECE measured | "
             "ECE calibrated (CV) | "
             + " | ".join(f"acc @{int(c * 100)} %" for c in COVERAGE_POINTS) + " | abstained |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|" + "---:|" * len(COVERAGE_POINTS) + "---|"]
    for name in dict.fromkeys(row["set"] for row in rows):
        members = [row for row in rows if row["set"] == name]
        measured = [{"confidence": capped(r, r["measured"]), "correct": r["correct"], "abstained": r.get("abstained")}
                    for r in members]
        final = [{"confidence": capped(r, r.get("calibrated") if r.get("calibrated") is not None else r["measured"]),
                  "correct": r["correct"], "abstained": r.get("abstained")} for r in members]
        shipped = [{"confidence": capped(r, r.get("fitted") if r.get("fitted") is not None else r["measured"]),
                    "correct": r["correct"]} for r in members]
        before, after, whole = calibration(measured) or {}, calibration(final) or {}, calibration(shipped) or {}
        ranked = sorted((f for f in final if f["confidence"] is not None), key=lambda f: -f["confidence"])
        kept = [sum(bool(f["correct"]) for f in ranked[:max(1, round(c * len(ranked)))]) /
                max(1, round(c * len(ranked))) * 100 if ranked else float("nan") for c in COVERAGE_POINTS]
        kinds = Counter(r["measure"].kind if r["measure"] else "none" for r in members)
        reasons = Counter(_reason(r.get("abstain_reason", "")) for r in members if r.get("abstained"))
        accuracy = sum(bool(r["correct"]) for r in members) / len(members) * 100
        lines.append(f"| {name} | {len(members)} | {accuracy:.1f} | "
                     + ", ".join(f"{k} {v}" for k, v in kinds.items()) + " | "
                     + " | ".join(_number(x) for x in (before.get("auroc"), after.get("auroc"), whole.get("auroc"),
                                                      before.get("ece"), after.get("ece")))
                     + " | " + " | ".join(f"{k:.1f}" for k in kept) + " | "
                     + (", ".join(f"{k} {v}" for k, v in reasons.items()) or "0") + " |")
    return lines


def _reason(text: str) -> str:
    for key, label in (("does not see", "cannot see"), ("claims", "video's text claims"), ("threshold", "threshold"),
                       ("evidence", "unsupported")):
        if key in text:
            return label
    return "other"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="NAME=RUN_DIR: a development set and its eval run folder")
    parser.add_argument("--planner", default="caption_only", help="the planner the runs are of (the map's key)")
    parser.add_argument("--models", default="qwen2.5-coder-1.5b-instruct,qwen2.5-1.5b",
                        help="comma-separated names of the chat model the runs used, as they appear in its name "
                             "(the maps apply only to it)")
    parser.add_argument("--write", action="store_true", help=f"write the maps fitted on every row to {TOML.name}")
    parser.add_argument("--out", type=Path, help="also write the report (Markdown) here")
    args = parser.parse_args()
    rows = [row for spec in args.runs for row in load(*_named(spec))]
    cross_validated(rows)
    every = Calibration({"any": fit(rows, "every row")})
    for row in rows:
        row["fitted"] = every.probability("any", row["measure"])
    lines = [f"{FOLDS}-fold cross-validated, maps fitted on {', '.join(dict.fromkeys(r['set'] for r in rows))} "
             f"together ({len(rows)} answers of {args.planner}):", "", *report(rows)]
    print("\n".join(lines))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
    if args.write:
        sets = ", ".join(f"{name} {sum(r['set'] == name for r in rows)}" for name in dict.fromkeys(r["set"] for r in rows))
        models = tuple(name.strip() for name in args.models.split(",") if name.strip())
        maps = {kind: replace(m, models=models) for kind, m in fit(rows, f"{args.planner} on {sets}").items()}
        header = ("# Written by bench/calibrate.py: a planner's measure mapped to the probability that its answer is "
                  "right\n# (agent/calibration.py). Refit with: .venv/bin/python bench/calibrate.py NAME=RUN_DIR ... "
                  "--write\n")
        TOML.write_text(header + _toml(Calibration({args.planner: maps}).to_mapping()))
        print(f"wrote {TOML}")
    return 0


def _named(spec: str) -> tuple[str, Path]:
    name, _, folder = spec.partition("=")
    if not folder:
        raise SystemExit(f"expected NAME=RUN_DIR, got {spec!r}")
    return name, Path(folder)


def _toml(data: dict[str, Any]) -> str:
    out = []
    for planner, kinds in data.items():
        for kind, entry in kinds.items():
            out += ["", f"[{planner}.{kind}]", f"intercept = {entry['intercept']}",
                    "weights = { " + ", ".join(f"{k} = {v}" for k, v in entry["weights"].items()) + " }",
                    f"fitted_on = {json.dumps(entry['fitted_on'])}", f"models = {json.dumps(entry['models'])}"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
