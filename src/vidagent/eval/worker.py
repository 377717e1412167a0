"""Answering one question and turning the answer into a result row; the same code runs in the
serial runner, in local worker processes and in Ray actors."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vidagent.agent.answer import Answer
from vidagent.agent.planner import build_planner
from vidagent.agent.steps import ObservationStep
from vidagent.agent.task import Question, Reference
from vidagent.config import Settings
from vidagent.errors import ToolInputError, VidagentError
from vidagent.eval.clips import cut_clip
from vidagent.eval.dataset import LOCALIZATION, MULTIPLE_CHOICE, OPEN_ENDED, REFERRING_SEGMENTATION, EvalItem
from vidagent.eval.errors import EvalError
from vidagent.eval.judge import judge_answer
from vidagent.eval.scoring import score_answer
from vidagent.session import Session

# Keys of a row that measure time and so differ between otherwise identical runs.
TIMING_KEYS = ("wall_s",)


@dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker needs to answer questions (picklable, sent to processes and Ray actors)."""

    settings: Settings
    planner: str
    planner_options: tuple[tuple[str, str], ...] = ()
    judge: bool = False
    teach: bool = False  # pass each question's known answer as the task's reference (learning planners check with it)
    clips_dir: str | None = None  # where the parts of videos that questions are about are cut to
    budget: str | None = None  # each question's budget (``calls=N,tokens=T,seconds=S,frames=F``)


class QuestionWorker:
    """Holds a ``Session`` (models stay loaded) and answers questions one at a time."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.planner = build_planner(config.planner, dict(config.planner_options))
        self.session = Session(config.settings)

    def answer(self, item: EvalItem) -> dict[str, Any]:
        started = time.perf_counter()
        row = base_row(item, self.config.planner)
        try:
            asked = item
            if item.clip is not None and self.config.clips_dir and item.video_path and Path(item.video_path).is_file():
                clip = cut_clip(Path(item.video_path), item.clip[0], item.clip[1], Path(self.config.clips_dir))
                asked = replace(item, video_path=str(clip))
            if not asked.video_path:
                raise EvalError(f"question {item.id} has no video file")
            if item.task == REFERRING_SEGMENTATION:
                row.update(self.segment(asked))
                row["wall_s"] = round(time.perf_counter() - started, 3)
                return row
            question = Question(item.question, tuple(item.choices) if item.choices else None, id=item.id,
                                wants_time=item.task == LOCALIZATION,
                                reference=reference(item) if self.config.teach else None,
                                task_type=item.group if item.group not in ("", "all") else "")
            answer = self.session.ask(asked.video_path, question, planner=self.planner, budget=self.config.budget,
                                          glance=0)  # a benchmark answers from whole memories
            row.update(answer_fields(answer))
            row.update(score_answer(item, answer))
            if self.config.judge and item.task == OPEN_ENDED and item.has_key:
                verdict = judge_answer(self.session.llm, item, answer.text)
                row["correct"] = verdict.correct
                row["judge"] = {"correct": verdict.correct, "reply": verdict.reply}
                row["judge_usage"] = verdict.usage.to_dict()
        except VidagentError as error:
            row["error"] = str(error)
            row["correct"] = False if item.has_key else None
        except Exception as error:  # noqa: BLE001 - one broken question must not end a long run
            row["error"] = f"internal error: {error.__class__.__name__}: {error}"
            row["correct"] = False if item.has_key else None
        row["wall_s"] = round(time.perf_counter() - started, 3)
        return row

    __call__ = answer  # a worker of vidagent.parallel

    def segment(self, item: EvalItem) -> dict[str, Any]:
        """A referring segmentation question's row fields: the referred object and J&F of its masks. A
        benchmark that ships frames (``video_path`` their folder) gets its video made once, under
        ``<home>/eval-videos/<benchmark>/``."""
        from vidagent.eval.referring import predict_referred_masks, score_referring_segmentation
        from vidagent.eval.refvos import RefFrames, frames_video

        path = Path(str(item.video_path))
        if path.is_dir():
            path = frames_video(RefFrames.from_extra(item.extra["ref"]),
                                self.config.settings.home / "eval-videos" / (item.type or "frames") / f"{item.video}.mp4")
        try:
            masks, found = predict_referred_masks(self.session, item, path)
        except ToolInputError as error:  # no object fits: nothing is segmented, which J&F counts
            return {"error": str(error), **score_referring_segmentation(item, {})}
        fact = found.referent.fact
        return {"prediction": f"object {fact.object_id}: {fact.line}",
                "artifacts": {"object_id": fact.object_id, "how": found.referent.how,
                              "mask_sources": sorted({s for s in found.sources if s})},
                **score_referring_segmentation(item, masks)}

    def close(self) -> None:
        self.session.close()


def reference(item: EvalItem) -> Reference | None:
    """The question's known answer, for a learning planner to check its own against (``--teach``)."""
    if item.task == MULTIPLE_CHOICE and item.answer_index is not None and item.choices:
        return Reference(item.choices[item.answer_index], item.answer_index)
    if item.task == OPEN_ENDED and item.answer:
        return Reference(item.answer)
    return None


def base_row(item: EvalItem, planner: str) -> dict[str, Any]:
    return {
        "id": item.id, "video": item.video, "video_path": item.video_path, "type": item.type, "group": item.group,
        "task": item.task, "question": item.question, "choices": list(item.choices) if item.choices else None,
        "gold": item.gold(), "dataset_grounded": bool(item.extra.get("grounded")), "planner": planner,
        "prediction": "", "choice_index": None, "correct": None, "match": None, "windows": [], "iou": None,
        "judge": None, "usage": {}, "judge_usage": {}, "evidence": [], "candidates": [], "artifacts": {},
        "segments_read": 0, "confidence": None, "measured_confidence": None, "abstained": False,
        "abstain_reason": "", "trace": [], "error": None, "wall_s": 0.0,
    }


def answer_fields(answer: Answer) -> dict[str, Any]:
    data = answer.to_dict()
    return {"prediction": data["answer"], "choice_index": data["choice_index"], "usage": data["usage"],
            "confidence": data["confidence"], "measured_confidence": data["measured_confidence"],
            "abstained": data["abstained"], "abstain_reason": data["abstain_reason"],
            "evidence": data["evidence"], "candidates": data["candidates"], "artifacts": data["artifacts"],
            "segments_read": segments_read(answer), "trace": data["trace"]}


def segments_read(answer: Answer) -> int:
    """How many distinct segments (captions, for a memory imported from captions) the planner was
    shown: the spans of every observation's evidence (a knowledge source's places are no segments), or what a planner that reads without tools
    says it read (``artifacts["segments_read"]``)."""
    spans = {(e.source, round(e.start_s, 3), round(e.end_s, 3))
             for step in answer.trace.of_type(ObservationStep) for e in step.evidence if not e.where}
    return len(spans) + int(answer.artifacts.get("segments_read", 0) or 0)
