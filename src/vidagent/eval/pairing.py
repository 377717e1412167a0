"""Runs compared on the questions they share (issue 23, item 5): which questions each got right and what
each cost on them, and accuracy against cost (LLM calls, prompt tokens, seconds) as curves.

Runs of different lengths are only comparable on their common questions: a run of 100 and one of 30 share
30, and their accuracies on all of their own questions say little about each other. So the paired table
and the cost curves use the questions every run compared answered (with a key); a run's own summary keeps
all of its rows. A planner measured under several budgets (``--budget``) is one curve, a point per budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from vidagent.eval.metrics import group_stats

COSTS = (("llm_calls", "LLM calls / question"), ("prompt_tokens", "prompt tokens / question"),
         ("wall_seconds", "wall seconds / question"))


@dataclass(frozen=True)
class PairedStats:
    """Two runs on the questions both answered with a key."""

    n: int
    correct_a: int
    correct_b: int
    both: int
    costs_a: Mapping[str, float]
    costs_b: Mapping[str, float]

    @property
    def only_a(self) -> int:
        return self.correct_a - self.both

    @property
    def only_b(self) -> int:
        return self.correct_b - self.both

    @property
    def p_value(self) -> float:
        """McNemar's exact test (two-sided): how likely a split of the discordant questions at least this
        uneven is when neither run is better. Questions both got right or both got wrong say nothing."""
        return mcnemar_exact(self.only_a, self.only_b)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """The two-sided binomial p-value of ``only_a`` against ``only_b`` discordant questions (1.0 for none)."""
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    tail = sum(math.comb(discordant, k) for k in range(min(only_a, only_b) + 1)) / 2 ** discordant
    return min(1.0, 2 * tail)


def scored_ids(rows: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(row["id"]) for row in rows if row.get("correct") is not None}


def common_ids(runs_rows: Sequence[Sequence[Mapping[str, Any]]]) -> set[str]:
    """The questions every run answered with a key."""
    sets = [scored_ids(rows) for rows in runs_rows]
    return set.intersection(*sets) if sets else set()


def on(rows: Sequence[Mapping[str, Any]], ids: set[str]) -> list[Mapping[str, Any]]:
    return [row for row in rows if str(row["id"]) in ids]


def costs(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    stats = group_stats("all", rows)
    return {"llm_calls": stats.llm_calls, "prompt_tokens": stats.prompt_tokens, "wall_seconds": stats.wall_seconds,
            "segments_read": stats.segments_read, "accuracy": stats.accuracy or 0.0}


def paired(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]]) -> PairedStats:
    ids = common_ids([rows_a, rows_b])
    right_a = {str(r["id"]) for r in on(rows_a, ids) if r["correct"]}
    right_b = {str(r["id"]) for r in on(rows_b, ids) if r["correct"]}
    return PairedStats(len(ids), len(right_a), len(right_b), len(right_a & right_b), costs(on(rows_a, ids)),
                       costs(on(rows_b, ids)))


def paired_markdown(labels: Sequence[str], runs_rows: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
    """The first run against each other one, on the questions the two share."""
    lines = ["## Paired, on the questions both runs answered", "",
             "| run A | run B | n | A right | B right | both | only A | only B | McNemar p | calls/q A / B | "
             "prompt tok/q A / B | wall s/q A / B | segments read/q A / B |", "|" + "---|" * 13]
    for label, rows in zip(labels[1:], runs_rows[1:]):
        p = paired(runs_rows[0], rows)
        if not p.n:
            lines.append(f"| {labels[0]} | {label} | 0 | – | – | – | – | – | – | – | – | – | – |")
            continue
        a, b = p.costs_a, p.costs_b
        lines.append(f"| {labels[0]} | {label} | {p.n} | {p.correct_a} ({100 * p.correct_a / p.n:.1f} %) | "
                     f"{p.correct_b} ({100 * p.correct_b / p.n:.1f} %) | {p.both} | {p.only_a} | {p.only_b} | "
                     f"{p.p_value:.2g} | {a['llm_calls']:.2f} / {b['llm_calls']:.2f} | {a['prompt_tokens']:.0f} / "
                     f"{b['prompt_tokens']:.0f} | {a['wall_seconds']:.1f} / {b['wall_seconds']:.1f} | "
                     f"{a['segments_read']:.1f} / {b['segments_read']:.1f} |")
    lines += ["", "McNemar p: the chance of a split of the questions only one run got right at least this uneven if "
                  "neither run were better (exact, two-sided); below 0.05 is the usual bar."]
    return lines


def controls_markdown(labels: Sequence[str], metas: Sequence[Mapping[str, Any]],
                      runs_rows: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
    """Each run that is not a control against the controls compared beside it, paired on the questions the
    three share: the blind run (no video) and the best caption baseline (the ``caption_only`` run right most
    often there). A planner's gain is stated over both: over blind, what the video adds; over the best
    baseline, what planning adds. Empty when no control or no other run is compared."""
    blind = [i for i, meta in enumerate(metas) if meta.get("planner") == "blind"]
    captions = [i for i, meta in enumerate(metas) if meta.get("planner") == "caption_only"]
    if not blind and not captions:
        return []
    lines = ["## Against the controls (blind: no video; best caption baseline: the caption_only run right most "
             "often on the same questions)", "",
             "| run | n | run % | blind % | gain over blind (p) | best baseline | baseline % "
             "| gain over baseline (p) |",
             "|" + "---|" * 8]
    for index, (label, meta, rows) in enumerate(zip(labels, metas, runs_rows)):
        if meta.get("planner") == "blind":
            continue
        against = [i for i in blind[:1] + captions if i != index]
        if not against:
            continue
        ids = common_ids([rows] + [runs_rows[i] for i in against])
        if not ids:
            continue
        right = _right(rows, ids)
        cells = [label, str(len(ids)), f"{100 * len(right) / len(ids):.1f}"]
        if blind:
            cells += _gain(right, _right(runs_rows[blind[0]], ids), len(ids))
        else:
            cells += ["–", "–"]
        others = [i for i in captions if i != index]
        if others:
            best = max(others, key=lambda i: len(_right(runs_rows[i], ids)))
            cells.append(labels[best])
            cells += _gain(right, _right(runs_rows[best], ids), len(ids))
        else:
            cells += ["–", "–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""] if len(lines) > 4 else []


def _right(rows: Sequence[Mapping[str, Any]], ids: set[str]) -> set[str]:
    return {str(row["id"]) for row in on(rows, ids) if row["correct"]}


def _gain(right: set[str], control: set[str], n: int) -> list[str]:
    """The control's accuracy and the run's gain over it in points, with McNemar's exact p."""
    gain = 100 * (len(right) - len(control)) / n
    p = mcnemar_exact(len(right - control), len(control - right))
    return [f"{100 * len(control) / n:.1f}", f"{gain:+.1f} (p = {p:.2g})"]


def curve_points(labels: Sequence[str], metas: Sequence[Mapping[str, Any]],
                 runs_rows: Sequence[Sequence[Mapping[str, Any]]]) -> tuple[int, dict[str, list[tuple[str, dict]]]]:
    """(shared questions, {curve: [(point label, costs), ...]}): one curve per planner with its options,
    one point per budget, costs on the questions every run shares."""
    ids = common_ids(runs_rows)
    curves: dict[str, list[tuple[str, dict]]] = {}
    for label, meta, rows in zip(labels, metas, runs_rows):
        budget = meta.get("budget")
        curve = label.split(" (")[0] if budget else label
        curves.setdefault(curve, []).append((budget or "no budget", costs(on(rows, ids))))
    for points in curves.values():
        points.sort(key=lambda point: point[1]["llm_calls"])
    return len(ids), curves


def plot_cost_curves(labels: Sequence[str], metas: Sequence[Mapping[str, Any]],
                     runs_rows: Sequence[Sequence[Mapping[str, Any]]], path: Path) -> Path | None:
    """Accuracy against each cost, a panel per cost, a line per planner; None without matplotlib or
    shared questions."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    shared, curves = curve_points(labels, metas, runs_rows)
    if not shared:
        return None
    figure, axes = plt.subplots(1, len(COSTS), figsize=(4.2 * len(COSTS), 3.8), sharey=True)
    for axis, (key, title) in zip(axes, COSTS):
        for curve, points in curves.items():
            xs = [point[1][key] for point in points]
            ys = [100 * point[1]["accuracy"] for point in points]
            axis.plot(xs, ys, marker="o", label=curve)
            for (name, _), x, y in zip(points, xs, ys):
                if name != "no budget":
                    axis.annotate(name, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
        axis.set_xlabel(title)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel(f"accuracy % ({shared} shared questions)")
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
