"""The evaluation runner: load a dataset, find its videos, answer every question with a planner,
stream each result to ``<out>/results.jsonl`` and write the report.

A run is resumable: rerunning the same command answers only the questions without a row, so a
killed run ends with exactly the rows an uninterrupted one would have. Questions are grouped by
video, so each video is indexed once (by one worker) and its memory reused for its questions.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm import tqdm

from vidagent.config import Settings
from vidagent.eval.backends import Backend, ProcessBackend, SerialBackend
from vidagent.eval.dataset import REFERRING_SEGMENTATION, Dataset, EvalItem, VideoFinder, find_id_map, load_id_map
from vidagent.eval.errors import EvalError
from vidagent.eval.loaders import load_dataset
from vidagent.agent.learning.keeper import check_mode
from vidagent.agent.planner import build_planner, planner_config
from vidagent.experience.store import ExperienceStore
from vidagent.llm.budget import Budget
from vidagent.eval.report import RESULTS, RUN_FILE, write_run_report
from vidagent.eval.results import ResultsFile
from vidagent.eval.worker import WorkerConfig
from vidagent.memory.store import Library
from vidagent.prompts import prompts_digest

# What must match for a folder's rows to be reused by a rerun. ``prompts`` and ``settings`` are digests of
# every shipped prompt file (templates, budgets, stop strings) and of the settings that change answers; a
# folder written before they existed is refused, since its rows may have been made with other ones. ``planner_config``
# is every option of the planner with its value, defaults included, so a default changed since is refused too.
IDENTITY_KEYS = ("dataset", "format", "planner", "planner_options", "planner_config", "judge", "llm", "teach",
                 "experience", "memories", "budget", "prompts", "settings")
DIGEST_MEANINGS = {"prompts": "other prompts (templates, token budgets or stop strings) or none recorded",
                   "planner_config": "other planner options (defaults included) or none recorded",
                   "settings": "other settings that change answers (see answer_settings in its run.json) or none recorded"}
OPTIONAL_IDENTITY = {"planner_options": {}, "teach": False, "experience": "none", "memories": None, "budget": None}  # what a run folder written before a key existed means by it


@dataclass(frozen=True)
class RunConfig:
    """One evaluation run, as ``vidagent eval`` describes it."""

    dataset: Path
    videos: tuple[Path, ...] = ()
    format: str | None = None
    id_map: Path | None = None
    planner: str = "react"
    planner_options: tuple[tuple[str, str], ...] = ()  # (key, value) pairs, as --planner-option gives them
    limit: int | None = None
    workers: int | None = None  # None: 1 locally, one per CPU on Ray
    ray: bool = False
    ray_address: str | None = None
    out: Path | None = None
    judge: bool = False
    cut_clips: bool = True
    progress: bool = True
    teach: bool = False  # give planners that learn (PEIL) each question's known answer to check against
    experience: str | None = None  # memory across questions: none, semantic, procedural, all (None: the settings')
    keep_experience: bool = False  # use (and add to) the user's experience instead of the run's own, reset per run
    memories: str | None = None  # answer from memories imported under this namespace (``egoschema``), not video files
    budget: str | None = None  # each question's budget, ``calls=N,tokens=T,seconds=S,frames=F`` (None: none)


@dataclass
class RunResult:
    out: Path
    rows: list[dict[str, Any]]
    missing: list[tuple[str, str]] = field(default_factory=list)
    reports: dict[str, Path] = field(default_factory=dict)
    answered_now: int = 0


def default_out(dataset: Dataset, planner: str, options: Sequence[tuple[str, str]] = (), teach: bool = False,
                budget: str | None = None) -> Path:
    label = planner + "".join(f"-{key}_{value}" for key, value in options) + ("-taught" if teach else "") + \
        (f"-budget_{Budget.parse(budget)}" if budget else "")
    safe = re.sub(r"[^\w.-]+", "_", label)
    return Path("eval-runs") / f"{dataset.name}-{safe}"


# The namespace under which `vidagent import` keeps a benchmark's released captions, by dataset format.
MEMORY_NAMESPACES = {"egoschema": "egoschema", "nextqa": "nextqa", "nextgqa": "nextqa", "nextoe": "nextqa"}


def memory_namespace(dataset: Dataset, config: RunConfig, settings: Settings) -> str | None:
    """The namespace of imported memories the run answers from: ``--memories``, or, when no video
    folder is given and the library holds memories of the dataset's benchmark, that benchmark's."""
    if config.memories:
        return config.memories.rstrip(":")
    namespace = MEMORY_NAMESPACES.get(dataset.format)
    if config.videos or namespace is None or not settings.library_path.is_file():
        return None
    with Library(settings.library_path) as library:
        return namespace if library.has_namespace(namespace) else None


def resolve_memories(dataset: Dataset, namespace: str, settings: Settings) -> tuple[list[EvalItem], list[tuple[str, str]]]:
    """Items whose imported memory ``namespace:<video>`` is in the library (``video_path`` set to that
    id), and (id, video) of those that are not."""
    found: list[EvalItem] = []
    missing: list[tuple[str, str]] = []
    with Library(settings.library_path) as library:
        held = library.namespace_ids(namespace)
    for item in dataset.items:
        name = f"{namespace}:{item.video}"
        if name in held:
            found.append(item.with_video_path(name))
        else:
            missing.append((item.id, item.video))
    return found, missing


def resolve_videos(dataset: Dataset, config: RunConfig) -> tuple[list[EvalItem], list[tuple[str, str]]]:
    """Items whose video was found (with ``video_path`` set) and (id, video) of those skipped."""
    if config.videos:
        roots, extra_bases = list(config.videos), []
    else:
        # Without --videos: the annotation file's folder, and relative paths against its parents (vidagent's
        # JSONL names videos relative to the data folder that holds its qa/ folder).
        roots, extra_bases = [dataset.source.parent], list(dataset.source.parents)[:2]
    id_map_file = config.id_map or find_id_map([dataset.source.parent, *roots])
    finder = VideoFinder(roots, load_id_map(id_map_file) if id_map_file else None)
    found: list[EvalItem] = []
    missing: list[tuple[str, str]] = []
    cache: dict[str, Path | None] = {}
    for item in dataset.items:
        if item.video not in cache:
            path = finder.find(item.video)
            for base in extra_bases:
                if path is None and (base / item.video).is_file():
                    path = base / item.video
            cache[item.video] = path
        path = cache[item.video]
        if path is None and item.task == REFERRING_SEGMENTATION and Path(item.extra["ref"]["images"]).is_dir():
            path = Path(item.extra["ref"]["images"])  # its frames: the worker makes the video from them
        if path is None:
            missing.append((item.id, item.video))
        else:
            found.append(item.with_video_path(path.resolve()))
    return found, missing


def group_by_video(items: Sequence[EvalItem]) -> list[list[EvalItem]]:
    """Questions grouped by video file, in the order videos first appear."""
    groups: dict[str, list[EvalItem]] = {}
    for item in items:
        groups.setdefault(str(item.video_path), []).append(item)
    return list(groups.values())


def _identity(dataset: Dataset, config: RunConfig, settings: Settings) -> dict[str, Any]:
    planner = build_planner(config.planner, dict(config.planner_options))
    model_free = not planner.needs.llm
    return {
        "dataset": str(dataset.source.resolve()), "format": dataset.format, "planner": config.planner,
        "planner_options": dict(config.planner_options), "planner_config": planner_config(planner),
        "judge": config.judge, "teach": config.teach,
        "llm": None if model_free and not config.judge else f"{settings.llm.backend}:{settings.llm.model}",
        "experience": "none" if model_free else settings.experience, "memories": config.memories,
        "budget": str(Budget.parse(config.budget)) if config.budget else None,
        "prompts": None if model_free and not config.judge else prompts_digest(),
        "settings": settings_digest(settings),
    }


def settings_digest(settings: Settings) -> str:
    """sha256 of the settings that change answers (``Settings.answer_settings``), keys sorted."""
    canonical = json.dumps(settings.answer_settings(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _experience_settings(config: RunConfig, settings: Settings, out: Path) -> Settings:
    """The run's experience mode, kept in the run's own scope (emptied when the run starts afresh) so
    runs stay comparable, unless ``keep_experience`` asks for the user's. A taught run (``teach``)
    keeps what PEIL's Learner learns in the user's example bank, for later questions."""
    mode = check_mode(config.experience or settings.experience)
    scope = "" if config.keep_experience else f"eval:{out.resolve()}"
    return replace(settings, experience=mode, experience_scope=scope, examples_scope="" if config.teach else None)


def _check_folder(out: Path, identity: dict[str, Any], answer_settings: dict[str, Any] | None = None) -> None:
    """Refuses a folder whose rows were made by another run (``IDENTITY_KEYS``); where the settings differ and
    both sides recorded them (``answer_settings``), the error names the settings that differ."""
    meta_file = out / RUN_FILE
    if not meta_file.is_file():
        if (out / RESULTS).is_file():
            raise EvalError(f"{out} holds results without {RUN_FILE}; use another --out")
        return
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        raise EvalError(f"{meta_file} is not valid JSON; use another --out") from None
    for key in IDENTITY_KEYS:
        if meta.get(key, OPTIONAL_IDENTITY.get(key)) != identity[key]:
            what = DIGEST_MEANINGS.get(key, f"{key} {meta.get(key)!r}, not {identity[key]!r}")
            differ = _differences(meta.get("answer_settings"), answer_settings) if key == "settings" else []
            if differ:
                what = f"other settings that change answers ({'; '.join(differ)})"
            raise EvalError(f"{out} holds a run with {what}: use another --out to start a new run")


def _differences(kept: Any, now: Any, prefix: str = "") -> list[str]:
    """The settings two recorded ``answer_settings`` disagree on, dotted (``tools.check_spans 8, not 4``; a
    setting named on one side only is at the value runs had before it existed on the other)."""
    if not isinstance(kept, dict) or not isinstance(now, dict):
        return []
    found: list[str] = []
    for key in sorted(set(kept) | set(now)):
        old, new = kept.get(key), now.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            found += _differences(old, new, f"{prefix}{key}.")
        elif old != new:
            shown = ["(as before it existed)" if key not in side else json.dumps(side[key]) for side in (kept, now)]
            found.append(f"{prefix}{key} {shown[0]}, not {shown[1]}")
    return found


def _reset_experience(settings: Settings, finished: set[str]) -> None:
    """A fresh run starts with its own experience empty (as DigimonGPT resets memory per evaluation
    round); a resumed one keeps what its finished questions kept and forgets what a killed one did."""
    if not settings.library_path.is_file():
        return
    store = ExperienceStore(settings.library_path)
    try:
        if finished:
            store.forget_unfinished(settings.experience_scope, finished)
        else:
            store.clear(scope=settings.experience_scope)
    finally:
        store.close()


def make_backend(config: RunConfig, worker: WorkerConfig) -> Backend:
    if config.ray:
        from vidagent.eval.ray_backend import RayBackend

        return RayBackend(worker, workers=config.workers, address=config.ray_address)
    workers = config.workers or 1
    if workers > 1:
        return ProcessBackend(worker, workers)
    return SerialBackend(worker)


def run_eval(config: RunConfig, settings: Settings, *, log: Callable[[str], None] | None = None) -> RunResult:
    """Run (or resume) an evaluation; returns every row of the selected questions and the report paths."""
    say = log or (lambda message: print(message, file=sys.stderr))
    build_planner(config.planner, dict(config.planner_options))  # an unknown planner or option fails before any work
    if config.budget:
        try:
            Budget.parse(config.budget)
        except ValueError as error:
            raise EvalError(str(error)) from None
    if config.limit is not None and config.limit < 1:
        raise EvalError("--limit must be at least 1")
    dataset = load_dataset(config.dataset, config.format)
    selected = Dataset(dataset.source, dataset.format, dataset.items[: config.limit] if config.limit else dataset.items)
    namespace = memory_namespace(dataset, config, settings)
    config = replace(config, memories=namespace)
    runnable, missing = resolve_memories(selected, namespace, settings) if namespace else resolve_videos(selected, config)
    out = Path(config.out) if config.out else default_out(dataset, config.planner, config.planner_options, config.teach,
                                                          config.budget)
    if not runnable and namespace:
        raise EvalError(f"none of the videos of {dataset.source.name} has a memory {namespace}:<video> in "
                        f"{settings.library_path} (import its captions with `vidagent import`)")
    if not runnable:
        where = ", ".join(str(v) for v in config.videos) or str(dataset.source.parent)
        raise EvalError(f"none of the videos of {dataset.source.name} was found under {where} (use --videos DIR, "
                        "or --memories NAMESPACE for memories imported from captions)")

    if missing:
        videos = sorted({video for _, video in missing})
        shown = ", ".join(videos[:3]) + (f" and {len(videos) - 3} more" if len(videos) > 3 else "")
        say(f"skipping {len(missing)} of {len(selected.items)} questions: {len(videos)} videos not found ({shown}); "
            f"listed in {out / 'missing.txt'}")
    settings = _experience_settings(config, settings, out)
    identity = _identity(dataset, config, settings)
    out.mkdir(parents=True, exist_ok=True)
    _check_folder(out, identity, settings.answer_settings())
    meta = {**identity, "answer_settings": settings.answer_settings(),  # what the settings digest is of, to read
            "dataset_name": dataset.name, "limit": config.limit, "missing": len(missing),
            "question_ids": [item.id for item in runnable], "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
    (out / RUN_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    (out / "missing.txt").write_text("".join(f"{qid}\t{video}\n" for qid, video in missing), encoding="utf-8")

    results = ResultsFile(out / RESULTS)
    done = results.load()
    selected_ids = {item.id for item in runnable}
    pending = [item for item in runnable if item.id not in done]
    if settings.experience_scope:  # also with experience none: PEIL's example bank fills the run's scope
        _reset_experience(settings, set(done))
    rows = {qid: row for qid, row in done.items() if qid in selected_ids}
    worker = WorkerConfig(settings=settings, planner=config.planner, planner_options=config.planner_options,
                          judge=config.judge, teach=config.teach, budget=config.budget,
                          clips_dir=str(settings.home / "eval-clips") if config.cut_clips else None)
    scored = [r["correct"] for r in rows.values() if r.get("correct") is not None]
    bar = tqdm(total=len(runnable), initial=len(rows), desc=f"{config.planner} on {dataset.name}", unit="q",
               disable=not config.progress, dynamic_ncols=True)
    if scored:
        bar.set_postfix(acc=f"{sum(scored) / len(scored):.3f}")
    answered = 0
    try:
        if pending:
            for row in make_backend(config, worker).run(group_by_video(pending)):
                results.append(row)
                rows[str(row["id"])] = row
                answered += 1
                if row.get("correct") is not None:
                    scored.append(bool(row["correct"]))
                bar.update(1)
                if scored:
                    bar.set_postfix(acc=f"{sum(scored) / len(scored):.3f}")
    finally:
        bar.close()
        results.close()
    reports = write_run_report(out)
    ordered = [rows[item.id] for item in runnable if item.id in rows]
    return RunResult(out=out, rows=ordered, missing=missing, reports=reports, answered_now=answered)
