"""Reports of finished runs: a markdown table per question group, a PNG plot, and several runs
(planners, budgets) side by side, paired on their common questions, with cost curves and an HTML page
(``vidagent eval --compare``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

from vidagent.eval.errors import EvalError
from vidagent.eval.html_page import markdown_page
from vidagent.eval.jf import segmentation_metrics
from vidagent.eval.metrics import (GroupStats, calibration, group_stats, grounding_metrics, localization_metrics,
                                   stats_by_group)
from vidagent.eval.pairing import controls_markdown, paired_markdown, plot_cost_curves
from vidagent.eval.results import ResultsFile

# The names NExT-QA style tables give the groups.
GROUP_LABELS = {"causal": "causal (Acc_C)", "temporal": "temporal (Acc_T)", "descriptive": "descriptive (Acc_D)",
                "all": "all (Acc_A)"}
TASK_LABELS = {"multiple_choice": "multiple choice", "open_ended": "open-ended", "localization": "localization"}
RUN_FILE = "run.json"
RESULTS = "results.jsonl"
ANCHORS: dict[str, Any] = json.loads(resources.files("vidagent.eval").joinpath("anchors.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class RunRecord:
    """A finished (or partly finished) run read back from its folder."""

    label: str
    folder: Path
    meta: Mapping[str, Any]
    rows: Sequence[Mapping[str, Any]]


def load_run(folder: Path | str) -> RunRecord:
    folder = Path(folder)
    results = folder / RESULTS
    if not results.is_file():
        raise EvalError(f"{folder} is not an eval run folder (no {RESULTS})")
    meta: dict[str, Any] = {}
    if (folder / RUN_FILE).is_file():
        try:
            meta = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise EvalError(f"{folder / RUN_FILE} is not valid JSON") from None
    rows = list(ResultsFile(results).load().values())
    order = {qid: n for n, qid in enumerate(meta.get("question_ids") or [])}
    rows.sort(key=lambda r: order.get(str(r["id"]), len(order)))
    return RunRecord(label=planner_label(meta) or folder.name, folder=folder, meta=meta, rows=rows)


def planner_label(meta: dict[str, Any]) -> str:
    """The planner with its options, e.g. ``mcts n=4``, so runs of one planner can be told apart."""
    options = meta.get("planner_options") or {}
    return " ".join([str(meta.get("planner") or "")] + [f"{key}={value}" for key, value in options.items()]).strip()


def _label(group: str) -> str:
    return GROUP_LABELS.get(group, group)


def _auroc(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _row_stats(rows: Sequence[Mapping[str, Any]]) -> list[GroupStats]:
    """Per group, then per task when a run mixes tasks, then all."""
    stats = stats_by_group(rows)
    tasks: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        tasks.setdefault(str(row.get("task")), []).append(row)
    if len(tasks) > 1:
        total = stats.pop() if stats and stats[-1].name == "all" else group_stats("all", rows)
        names = {s.name for s in stats}
        stats += [group_stats(TASK_LABELS.get(t, t), members) for t, members in tasks.items()
                  if TASK_LABELS.get(t, t) not in names]
        stats.append(total)
    return stats


def cost_table(stats: Sequence[GroupStats], first_column: str = "group") -> list[str]:
    lines = [f"| {first_column} | n | accuracy % | LLM calls/q | cached calls/q | prompt tok/q | of which reused "
             "| completion tok/q | segments read/q | LLM s/q | wall s/q | errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in stats:
        lines.append(f"| {_label(s.name)} | {s.n} | {_percent(s.accuracy)} | {s.llm_calls:.2f} | {s.cached_calls:.2f} | "
                     f"{s.prompt_tokens:.0f} | {s.reused_prompt_tokens:.0f} | {s.completion_tokens:.0f} | "
                     f"{s.segments_read:.1f} | {s.llm_seconds:.2f} | "
                     f"{s.wall_seconds:.2f} | {s.errors} |")
    return lines


def _metric_table(title: str, runs: Sequence[tuple[str, Mapping[str, float]]]) -> list[str]:
    keys = [k for k in runs[0][1] if k != "n"]
    lines = [f"**{title}** (n = {int(runs[0][1]['n'])})", "", "| run | " + " | ".join(keys) + " |",
             "|---|" + "---|" * len(keys)]
    for label, metrics in runs:
        lines.append(f"| {label} | " + " | ".join(f"{100 * metrics[k]:.1f}" for k in keys) + " |")
    return lines


def markdown_report(run: RunRecord) -> str:
    """The report of one run: accuracy and cost per question group, localization and grounding metrics."""
    meta = run.meta
    rows = run.rows
    lines = [f"# {run.label} on {meta.get('dataset_name', '?')}", ""]
    lines.append(f"planner `{planner_label(meta) or '?'}`, LLM `{meta.get('llm', '?')}`, format `{meta.get('format', '?')}`, "
                 f"{len(rows)} questions answered" + (f", {meta['missing']} skipped (video not found)"
                                                      if meta.get("missing") else "") + ".")
    lines += ["", *cost_table(_row_stats(rows))]
    unscored = sum(1 for r in rows if r.get("correct") is None and not r.get("jf"))
    if unscored:
        lines += ["", f"{unscored} questions have no answer key and are not in the accuracy."]
    if any(r.get("jf") for r in rows):
        lines += ["", "Referring segmentation is scored by J&F (region similarity J, contour accuracy F), not by accuracy."]
    if any(r.get("judge") for r in rows):
        matched = [r for r in rows if r.get("judge") and r.get("match") is not None]
        lines += ["", f"Open-ended answers judged by the LLM; text matching alone: "
                      f"{_percent(sum(bool(r['match']) for r in matched) / len(matched) if matched else None)} %."]
    for title, metrics in (("Localization", localization_metrics(rows)), ("Grounding", grounding_metrics(rows)),
                           ("Referring segmentation", segmentation_metrics(rows))):
        if metrics:
            lines += ["", *_metric_table(title, [(run.label, metrics)])]
    rated = calibration(rows)
    if rated:
        answered = rated["accuracy_answered"]
        kept = "" if not rated["abstained"] else (
            f"; accuracy on the answers that did not abstain {_percent(answered)} %" if answered is not None
            else "; every answer abstained")
        lines += ["", f"**Confidence** ({int(rated['n'])} answers with one, {int(rated['abstained'])} abstained): "
                      f"AUROC {_auroc(rated['auroc'])} (right against wrong); "
                      f"expected calibration error {rated['ece']:.3f}; accuracy on the 50 / 80 / 100 % most confident "
                      f"{_percent(rated['accuracy_at_50'])} / {_percent(rated['accuracy_at_80'])} / "
                      f"{_percent(rated['accuracy_at_100'])} %{kept}."]
    lines += published_anchors(meta)
    lines += ["", "Accuracy over questions with a key; errors count as wrong. Cost per question: the planner's and "
              "judge's LLM calls (cached calls cost no tokens), seconds in the LLM, wall seconds including "
              "indexing the video the first time, and the distinct segments the planner was shown (for a memory "
              "imported from captions: captions read, the cost the papers report)."]
    return "\n".join(lines) + "\n"


def published_anchors(meta: Mapping[str, Any]) -> list[str]:
    """Published results on the caption set a run's memories were imported from, to read beside its own."""
    anchors = ANCHORS.get(str(meta.get("memories") or "").rstrip(":"))
    if not anchors:
        return []
    lines = ["", f"Published on the same captions ({anchors['captions']}; all {anchors['questions']}, "
                 "with far larger LLMs):", "", "| system | LLM | accuracy % | captions read/q |", "|---|---|---|---|"]
    for row in anchors["results"]:
        lines.append(f"| {row['system']} | {row['llm']} | {row['accuracy']} | {row.get('read', '–')} |")
    return lines


def compare_markdown(runs: Sequence[RunRecord]) -> str:
    """Runs side by side: accuracy per group (one column per run), then each run's cost."""
    if not runs:
        raise EvalError("nothing to compare")
    labels = _unique_labels(runs)
    per_run = [{s.name: s for s in _row_stats(run.rows)} for run in runs]
    groups: list[str] = []
    for stats in per_run:
        groups += [g for g in stats if g not in groups]
    lines = [f"# {' vs '.join(labels)}", "", "| group | n | " + " | ".join(f"{l} acc %" for l in labels) + " |",
             "|---|---|" + "---|" * len(labels)]
    for group in groups:
        present = [stats.get(group) for stats in per_run]
        n = next((s.n for s in present if s is not None), 0)
        lines.append(f"| {_label(group)} | {n} | " + " | ".join(_percent(s.accuracy if s else None) for s in present) + " |")
    totals = [stats.get("all") or next(iter(stats.values())) for stats in per_run]
    lines += ["", "Cost per question (all questions):", ""]
    lines += cost_table([GroupStats(**{**_fields(total), "name": label}) for total, label in zip(totals, labels)], "run")
    for title, fn in (("Localization", localization_metrics), ("Grounding", grounding_metrics)):
        found = [(label, fn(run.rows)) for label, run in zip(labels, runs)]
        present = [(label, m) for label, m in found if m]
        if present:
            lines += ["", *_metric_table(title, present)]  # type: ignore[arg-type]
    return "\n".join(lines) + "\n"


def _fields(stats: GroupStats) -> dict[str, Any]:
    return {k: getattr(stats, k) for k in GroupStats.__dataclass_fields__}


def _unique_labels(runs: Sequence[RunRecord]) -> list[str]:
    labels = [run.label for run in runs]
    if len(set(labels)) < len(labels):
        labels = [f"{run.label} ({run.folder.name})" for run in runs]
    return labels


def plot_accuracy(runs: Sequence[RunRecord], path: Path) -> Path | None:
    """A grouped bar chart of accuracy per question group, one bar per run; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    labels = _unique_labels(runs)
    per_run = [{s.name: s for s in _row_stats(run.rows)} for run in runs]
    groups: list[str] = []
    for stats in per_run:
        groups += [g for g, s in stats.items() if g not in groups and s.accuracy is not None]
    if not groups:
        return None
    width = 0.8 / len(runs)
    figure, axes = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) * max(1, len(runs)) ** 0.5 + 2), 4.2))
    for index, (label, stats) in enumerate(zip(labels, per_run)):
        values = [100 * (stats[g].accuracy or 0.0) if g in stats else 0.0 for g in groups]
        positions = [g + (index - (len(runs) - 1) / 2) * width for g in range(len(groups))]
        bars = axes.bar(positions, values, width, label=label)
        axes.bar_label(bars, fmt="%.0f", fontsize=7)
    axes.set_xticks(range(len(groups)))
    axes.set_xticklabels([_label(g) for g in groups], rotation=30, ha="right", fontsize=8)
    axes.set_ylabel("accuracy %")
    axes.set_ylim(0, 105)
    dataset = runs[0].meta.get("dataset_name", "")
    axes.set_title(f"Accuracy per question group{f' on {dataset}' if dataset else ''}")
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def summary_json(run: RunRecord) -> dict[str, Any]:
    return {
        "run": run.label, "meta": dict(run.meta),
        "groups": [s.to_dict() for s in _row_stats(run.rows)],
        "localization": localization_metrics(run.rows), "grounding": grounding_metrics(run.rows),
        "segmentation": segmentation_metrics(run.rows),
        "calibration": calibration(run.rows),
    }


def write_run_report(folder: Path) -> dict[str, Path]:
    """``summary.md``, ``summary.json`` and ``accuracy.png`` in a run's folder."""
    run = load_run(folder)
    paths = {"markdown": folder / "summary.md", "json": folder / "summary.json"}
    paths["markdown"].write_text(markdown_report(run), encoding="utf-8")
    paths["json"].write_text(json.dumps(summary_json(run), indent=2), encoding="utf-8")
    plot = plot_accuracy([run], folder / "accuracy.png")
    if plot is not None:
        paths["plot"] = plot
    return paths


def write_comparison(folders: Sequence[Path], out: Path) -> dict[str, Path]:
    """For several runs, in ``out``: ``compare.md`` (each run's accuracy and cost, then the first run
    paired with each other one on the questions they share), ``compare.png`` (accuracy per group),
    ``cost.png`` (accuracy against calls, prompt tokens and seconds on the questions all share, a line per
    planner, a point per budget) and ``compare.html`` (all of it on one page)."""
    runs = [load_run(folder) for folder in folders]
    out.mkdir(parents=True, exist_ok=True)
    labels = _unique_labels(runs)
    markdown = compare_markdown(runs)
    if len(runs) > 1:
        markdown += "\n" + "\n".join(paired_markdown(labels, [run.rows for run in runs])) + "\n"
        controls = controls_markdown(labels, [run.meta for run in runs], [run.rows for run in runs])
        markdown += ("\n" + "\n".join(controls)) if controls else ""
    paths = {"markdown": out / "compare.md"}
    paths["markdown"].write_text(markdown, encoding="utf-8")
    plots = {"plot": plot_accuracy(runs, out / "compare.png"),
             "cost_plot": plot_cost_curves(labels, [run.meta for run in runs], [run.rows for run in runs],
                                           out / "cost.png")}
    paths.update({key: path for key, path in plots.items() if path is not None})
    paths["html"] = out / "compare.html"
    images = [path.name for path in plots.values() if path is not None]
    paths["html"].write_text(markdown_page(" vs ".join(labels), markdown, images), encoding="utf-8")
    return paths
