"""The result of a question: the answer, every candidate with its support, evidence, trace and cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence, TypeVar

from vidagent.agent.confidence import confidence_cap
from vidagent.agent.steps import Trace
from vidagent.agent.task import Task
from vidagent.llm.base import Usage
from vidagent.text import fold
from vidagent.tools.base import Evidence

T = TypeVar("T")


@dataclass(frozen=True)
class Candidate:
    """One answer a planner reached, with what supports it: how many of its attempts gave it
    (``votes``), their search reward, a likelihood where the planner has one, and the step it
    came from in the trace."""

    text: str
    choice_index: int | None = None
    votes: int = 1
    reward: float | None = None
    likelihood: float | None = None
    step_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "choice_index": self.choice_index, "votes": self.votes,
                "reward": None if self.reward is None else round(self.reward, 4),
                "likelihood": self.likelihood, "step_id": self.step_id}


@dataclass(frozen=True)
class Check:
    """What the check found: the evidence items it re-read and those it found supporting (indices into
    the answer's evidence), the options' probabilities on that evidence (None: open question, or a
    backend without log-probabilities), and the verdict."""

    read: tuple[int, ...]
    supporting: tuple[int, ...]
    probabilities: tuple[float, ...] | None
    verdict: str  # "supported", "unsupported", "no evidence", or "not checked: <why>"

    @property
    def supported(self) -> bool:
        return self.verdict == "supported"

    @property
    def checked(self) -> bool:
        return not self.verdict.startswith("not checked")

    def probability(self, choice_index: int | None) -> float | None:
        """The chosen option's probability on the cited evidence."""
        if self.probabilities is None or choice_index is None or choice_index >= len(self.probabilities):
            return None
        return round(self.probabilities[choice_index], 4)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "read": len(self.read), "supporting": len(self.supporting),
                "probabilities": None if self.probabilities is None else [round(p, 4) for p in self.probabilities]}


@dataclass
class Answer:
    """What a planner returns and ``vidagent.ask`` gives back.

    ``candidates`` holds every distinct answer the planner considered (one for a single chain);
    ``artifacts`` holds what the planner wants to show besides (JSON values: its search tree's
    rewards, frame times, ...).
    """

    task: Task
    text: str
    planner: str
    choice_index: int | None = None
    evidence: list[Evidence] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    trace: Trace = field(default_factory=Trace)
    usage: Usage = field(default_factory=Usage)
    abstained: str = ""  # why there is no answer ("" when there is one); a multiple-choice guess stays a candidate
    check: Check | None = None  # the check of the answer against the evidence it cites (None: not run)
    calibrated: float | None = None  # the measured confidence mapped to P(right) (``agent.calibration``; None: no map)

    @property
    def confidence(self) -> float | None:
        """The probability that the answer is right where a calibration maps its planner's measure
        (``calibrated``), else how sure the planner was (``measured_confidence``); 0 when it abstained. Capped where
        the run cannot support a high one (``agent.confidence``: a failed check, a budget-stopped run)."""
        if self.abstained:
            return 0.0
        raw = self.calibrated if self.calibrated is not None else self.measured_confidence
        cap = confidence_cap(check_failed=self.check is not None and self.check.checked and not self.check.supported,
                             budget_stopped=bool((self.artifacts.get("budget") or {}).get("stopped")))
        return raw if raw is None or cap is None else min(raw, cap[0])

    @property
    def measured_confidence(self) -> float | None:
        """How sure the planner was, from what it has: the chosen option's probability where it chose by
        likelihood, else the share of its attempts' votes the answer got when several voted (all of them: 1.0), else
        the option's probability on the cited evidence (the check's), else an open answer's rating (P(yes) that it
        is right, ``agent.answer_rating``); None when it has none of them."""
        chosen = next((c for c in self.candidates if answer_key(c.text, c.choice_index) ==
                       answer_key(self.text, self.choice_index)), None)
        if chosen is not None and chosen.likelihood is not None:
            return round(chosen.likelihood, 4)
        votes = sum(c.votes for c in self.candidates)
        if chosen is not None and votes > 1:  # several attempts voted (one that all agreed on: 1.0)
            return round(chosen.votes / votes, 4)
        checked = self.check.probability(self.choice_index) if self.check is not None else None
        return checked if checked is not None else self.artifacts.get("rating")

    @property
    def question(self) -> str:
        return self.task.question

    @property
    def choices(self) -> list[str] | None:
        return list(self.task.choices) if self.task.choices else None

    @property
    def choice(self) -> str | None:
        if not self.task.choices or self.choice_index is None:
            return None
        return self.task.choices[self.choice_index]

    @property
    def video(self) -> str:
        """The path of the (first) video the question was about."""
        videos = self.task.videos
        return videos[0].path if videos else ""

    @property
    def video_id(self) -> str:
        videos = self.task.videos
        return videos[0].id if videos else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.text,
            "choices": self.choices,
            "choice_index": self.choice_index,
            "choice": self.choice,
            "planner": self.planner,
            "confidence": self.confidence,
            "measured_confidence": self.measured_confidence,
            "abstained": bool(self.abstained),
            "abstain_reason": self.abstained,
            "check": self.check.to_dict() if self.check is not None else None,
            "evidence": [e.to_dict() for e in self.evidence],
            "candidates": [c.to_dict() for c in self.candidates],
            "artifacts": self.artifacts,
            "usage": self.usage.to_dict(),
            "trace": self.trace.to_list(),
            "task": self.task.to_dict(),
            "video": self.video,
            "video_id": self.video_id,
        }


def dedupe_evidence(evidence: list[Evidence]) -> list[Evidence]:
    """One item per (source, span or place), in time order."""
    seen: dict[tuple[str, float, float, str], Evidence] = {}
    for item in evidence:
        seen.setdefault((item.source, item.start_s, item.end_s, item.where), item)
    return sorted(seen.values(), key=lambda e: (e.source, e.start_s, e.end_s, e.where))


def answer_key(text: str, choice_index: int | None = None) -> tuple[Any, ...]:
    """How answers are told apart when they are counted: by the option they name, else by their text
    folded (case, spacing and a closing full stop aside); an answer naming no option never joins one
    that does."""
    return (choice_index,) if choice_index is not None else (None, fold(text.strip(" .")))


def mean_probability(scored: Sequence[Sequence[float]], index: int | None) -> float | None:
    """Option ``index``'s mean probability over several scorings of the options (a search's chains, a learner's
    attempts), as a candidate's likelihood; None where nothing was scored or the answer names no option."""
    if not scored or index is None:
        return None
    return round(sum(probabilities[index] for probabilities in scored) / len(scored), 4)


def group_answers(items: Sequence[T], key: Callable[[T], Hashable]) -> list[list[T]]:
    """``items`` grouped by ``key`` (an ``answer_key``), groups in the order their first item came."""
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return list(groups.values())
