"""Typed steps of a planner's run, kept as a tree.

Every step has an ``id`` and the ``parent_id`` of the step it follows: ReAct's trace is a chain
(task, tool call, observation, tool call, ..., final answer), MCTS's trace is its search tree.
A ``Trace`` numbers the steps as they are added and tells an ``on_step`` callback at once, so a
caller (the CLI, the server) sees each step while the planner is still working.

The steps are also the conversation: a step the model made renders the messages it adds (its reply,
and the observation or correction it got back), and ``Trace.conversation(step_id)`` is the path to a
step rendered, so a branch's conversation is its path and no planner keeps a second record of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Iterator, Mapping, TypeVar

from vidagent.llm.base import Completion, Message
from vidagent.tools.base import Evidence


@dataclass(kw_only=True)
class Step:
    """What every step has: its place in the tree and what it cost (model tokens and seconds)."""

    kind: ClassVar[str] = "step"
    id: int = -1
    parent_id: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        """One line for a human reading the trace."""
        return self.kind

    def messages(self, trace: "Trace") -> list[Message]:
        """What this step adds to the model's conversation (most steps add nothing)."""
        return []

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.kind}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "evidence":
                value = [e.to_dict() for e in value]
            elif item.name == "seconds":
                value = round(value, 3)
            data[item.name] = value
        return data


@dataclass(kw_only=True)
class TaskStep(Step):
    """The root: the question, its options and the sources it is about."""

    kind: ClassVar[str] = "task"
    question: str
    choices: list[str] | None = None
    sources: list[str] = field(default_factory=list)

    def summary(self) -> str:
        options = f" ({len(self.choices)} options)" if self.choices else ""
        return f"Question: {self.question}{options}"


@dataclass(kw_only=True)
class ToolCallStep(Step):
    """The model chose a tool: its reasoning, the tool, and the arguments as parsed for the tool."""

    kind: ClassVar[str] = "tool_call"
    thought: str
    tool: str
    arguments: dict[str, Any]
    raw_arguments: str
    model_output: str = ""  # the reply as the conversation holds it (an automatic step: written in the model's name)
    automatic: bool = False  # made by the planner itself (e.g. ReAct's opening overview), not chosen by the model

    def summary(self) -> str:
        thought = f"Thought: {self.thought}\n" if self.thought else ""
        made = " (automatic)" if self.automatic else ""
        return f"{thought}Action{made}: {self.tool}({self.raw_arguments})"


@dataclass(kw_only=True)
class ObservationStep(Step):
    """What a tool returned. Its tokens are those of the model calls the tool itself made."""

    kind: ClassVar[str] = "observation"
    tool: str
    text: str
    evidence: tuple[Evidence, ...] = ()
    artifacts: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False

    def summary(self) -> str:
        refined = self.artifacts.get("refined")  # what a partial memory described in full for this read
        said = f"{'Error' if self.is_error else 'Observation'}: {self.text}"
        return said if not refined else \
            f"[refined for this read: {', '.join(f'{a:g}-{b:g} s' for a, b in refined)}] {said}"

    def messages(self, trace: "Trace") -> list[Message]:
        """The call's reply and what the tool returned (an observation of a call the model made)."""
        call = trace[self.parent_id] if self.parent_id is not None else None
        if not isinstance(call, ToolCallStep) or not call.model_output:  # a call no conversation asked for
            return []
        return _reply_and_observation(call.model_output, self.text)


@dataclass(kw_only=True)
class FormatErrorStep(Step):
    """The model's reply could not be used (no action, an unknown tool, a repeated call)."""

    kind: ClassVar[str] = "format_error"
    model_output: str
    message: str

    def summary(self) -> str:
        return f"Unusable reply: {self.message}"

    def messages(self, trace: "Trace") -> list[Message]:
        """The unusable reply and the correction it got."""
        return _reply_and_observation(self.model_output, self.message)


@dataclass(kw_only=True)
class PlanStep(Step):
    """A plan or a re-plan written by the model."""

    kind: ClassVar[str] = "plan"
    text: str
    model_output: str = ""

    def summary(self) -> str:
        return f"Plan: {self.text}"


@dataclass(kw_only=True)
class EvaluationStep(Step):
    """A judgement of the steps before it: a reward, a self-check, an evaluator's verdict."""

    kind: ClassVar[str] = "evaluation"
    text: str
    score: float | None = None
    model_output: str = ""

    def summary(self) -> str:
        score = f" [{self.score:+.3g}]" if self.score is not None else ""
        return f"Evaluation{score}: {self.text}"


@dataclass(kw_only=True)
class MemoryStep(Step):
    """The planner's working memory changed: entries stored, summarised, or replayed into its context."""

    kind: ClassVar[str] = "memory"
    action: str
    text: str
    model_output: str = ""

    def summary(self) -> str:
        return f"Memory ({self.action}): {self.text}"


@dataclass(kw_only=True)
class InspectionStep(Step):
    """The Inspector recorded a source: one the user gave, or a clip or crop a tool cut."""

    kind: ClassVar[str] = "inspection"
    label: str  # how the planner refers to it, e.g. "visual[2]"
    source: dict[str, Any]
    origin: str
    text: str

    def summary(self) -> str:
        return f"Source {self.text}"


@dataclass(kw_only=True)
class FinalAnswerStep(Step):
    """An answer: the model's own (``how="model"``), or one reached otherwise: ``forced`` at the
    step limit, ``option`` (mapped to an option), ``vote``, ``summary``."""

    kind: ClassVar[str] = "final_answer"
    answer: str
    thought: str = ""
    how: str = "model"
    model_output: str = ""

    def summary(self) -> str:
        label = "Final Answer" if self.how == "model" else f"Final Answer ({self.how})"
        thought = f"Thought: {self.thought}\n" if self.thought else ""
        return f"{thought}{label}: {self.answer}"

    def messages(self, trace: "Trace") -> list[Message]:
        """The model's own answer, as it replied (an answer reached otherwise was never said to it)."""
        return [Message("assistant", self.model_output or "(empty reply)")] if self.how == "model" else []


def _reply_and_observation(reply: str, observation: str) -> list[Message]:
    return [Message("assistant", reply or "(empty reply)"), Message("user", f"Observation: {observation}")]


def model_cost(completion: Completion, started: float) -> dict[str, Any]:
    """A step's cost fields for a model call that began at ``started`` (``time.perf_counter``):
    its tokens (none for a cached reply, which cost nothing) and the seconds since."""
    return {"prompt_tokens": 0 if completion.cached else completion.prompt_tokens,
            "completion_tokens": 0 if completion.cached else completion.completion_tokens,
            "seconds": time.perf_counter() - started}


S = TypeVar("S", bound=Step)
STEP_TYPES: Mapping[str, type[Step]] = {cls.kind: cls for cls in (
    TaskStep, ToolCallStep, ObservationStep, FormatErrorStep, PlanStep, EvaluationStep, MemoryStep, InspectionStep,
    FinalAnswerStep)}


class Trace:
    """The steps of one run, in the order they were made, forming a tree by ``parent_id``."""

    def __init__(self, on_step: Callable[[Step], None] | None = None) -> None:
        self._steps: list[Step] = []
        self._children: dict[int | None, list[int]] = {}
        self.on_step = on_step

    def add(self, step: S) -> S:
        """Number ``step``, keep it, and tell the ``on_step`` callback."""
        if step.parent_id is not None and not 0 <= step.parent_id < len(self._steps):
            raise ValueError(f"step parent {step.parent_id} is not in the trace")
        step.id = len(self._steps)
        self._steps.append(step)
        self._children.setdefault(step.parent_id, []).append(step.id)
        if self.on_step is not None:
            self.on_step(step)
        return step

    def __getitem__(self, step_id: int) -> Step:
        return self._steps[step_id]

    def __iter__(self) -> Iterator[Step]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    @property
    def last(self) -> Step | None:
        return self._steps[-1] if self._steps else None

    def children(self, step_id: int | None) -> list[Step]:
        """The steps that follow ``step_id`` directly (``None``: the roots)."""
        return [self._steps[i] for i in self._children.get(step_id, [])]

    def path(self, step_id: int) -> list[Step]:
        """The steps from the root down to ``step_id``."""
        chain: list[Step] = []
        current: int | None = step_id
        while current is not None:
            step = self._steps[current]
            chain.append(step)
            current = step.parent_id
        return chain[::-1]

    def conversation(self, step_id: int | None) -> list[Message]:
        """The messages of the steps from the root down to ``step_id`` (``None``: none), oldest first:
        what the model said and was told on the way there, after the planner's opening."""
        if step_id is None:
            return []
        return [message for step in self.path(step_id) for message in step.messages(self)]

    def of_type(self, kind: type[S]) -> list[S]:
        return [s for s in self._steps if isinstance(s, kind)]

    def chain_text(self, step_id: int, *, step_chars: int = 300) -> str:
        """The thoughts, actions and observations on the way to ``step_id``, one per line (long ones cut)."""
        lines = []
        for step in self.path(step_id):
            if step.kind in ("tool_call", "observation", "format_error"):
                text = step.summary()
                lines.append(text if len(text) <= step_chars else text[:step_chars] + " ...")
        return "\n".join(lines)

    def to_list(self) -> list[dict[str, Any]]:
        return [step.to_dict() for step in self._steps]

    @classmethod
    def from_list(cls, rows: list[Mapping[str, Any]]) -> "Trace":
        """Rebuild a trace from ``to_list`` output (ids are kept as they were)."""
        trace = cls()
        for row in rows:
            values = {k: v for k, v in row.items() if k not in ("type", "id")}
            if "evidence" in values:
                values["evidence"] = tuple(Evidence(**e) for e in values["evidence"])
            trace.add(STEP_TYPES[row["type"]](**values))
        return trace

    def render(self, *, max_chars: int = 600) -> str:
        """The tree as indented text: a chain stays flat, and each branch of a fork is indented."""
        lines: list[str] = []

        def show(step: Step, indent: str, marker: str) -> None:
            cost = ""
            if step.prompt_tokens or step.completion_tokens or step.seconds >= 0.05:
                cost = f"  ({step.seconds:.1f} s, {step.prompt_tokens}+{step.completion_tokens} tokens)"
            text = step.summary()
            if len(text) > max_chars:
                text = text[:max_chars] + f" ... [{len(text) - max_chars} more characters]"
            body = text.splitlines() or [""]
            lines.append(f"{indent}{marker}[{step.id}] {body[0]}{cost}")
            pad = indent + (" " * len(marker)) + " " * (len(str(step.id)) + 3)
            lines.extend(pad + line for line in body[1:])

        def walk(step_id: int | None, indent: str) -> None:
            kids = self._children.get(step_id, [])
            while len(kids) == 1:  # a chain: no indentation
                show(self._steps[kids[0]], indent, "")
                kids = self._children.get(kids[0], [])
            for child in kids:
                show(self._steps[child], indent, "+ ")
                walk(child, indent + "  | ")

        walk(None, "")
        return "\n".join(lines)
