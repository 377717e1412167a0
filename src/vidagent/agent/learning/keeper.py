"""Keeping experience (DigimonGPT's memory that evolves across questions), around any planner.

Before a planner runs, ``Experience.recall`` chooses what to replay (``experience/replay.py``):
validated answers about the same video and workflows (with decision patterns) of the same planner
and task type. The toolbox carries the replay; every planner shows it before the question, and the
trace records it as a ``MemoryStep`` under the task.

After the answer, ``Experience.learn`` validates it (AssistGPT's Learner: against the known answer
when one is given, else the model's check that the steps support the answer; a check the planner
already made is reused), then keeps a one-sentence summary of a valid answer as semantic memory
(a failed one is kept as ``rejected``, never replayed) and the workflow of a valid episode as
procedural memory. When a task type's workflows reach a multiple of ``pattern_every`` (six: "more
than five"), the model abstracts the latest of them into decision patterns. Each of these is a step
in the answer's trace, and its model calls count towards the answer's usage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from vidagent.agent.answer import Answer
from vidagent.agent.learning.learner import Learner, Verdict
from vidagent.agent.steps import EvaluationStep, MemoryStep, ObservationStep, ToolCallStep, Trace, model_cost
from vidagent.agent.task import Task
from vidagent.errors import PlannerError
from vidagent.experience.complexity import ReplaySizing
from vidagent.experience.distill import abstract_patterns, summarise_answer
from vidagent.experience.replay import DEFAULT_TAU, Replay, recall
from vidagent.experience.store import REJECTED, VALID, Entry, ExperienceStore
from vidagent.experience.task_types import task_type
from vidagent.experience.workflow import ToolUse, workflow_of
from vidagent.llm.metered import MeteredChat

MODES = ("none", "semantic", "procedural", "all")
PATTERN_SOURCES = 10  # the latest workflows of a type that a pattern is abstracted from


def check_mode(mode: str) -> str:
    """``mode`` if it is one of ``none``, ``semantic``, ``procedural``, ``all``; else a ``PlannerError``."""
    if mode not in MODES:
        raise PlannerError(f"experience must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


@dataclass(frozen=True)
class ExperienceOptions:
    """``mode``: which kinds of experience are replayed and kept; ``scope``: whose they are ('' the user's);
    ``tau``: the similarity a remembered question needs; ``sizing``: the replay sizes;
    ``pattern_every``: workflows of a type per abstraction of its decision patterns."""

    mode: str = "all"
    scope: str = ""
    tau: float = DEFAULT_TAU
    sizing: ReplaySizing = field(default_factory=ReplaySizing)
    pattern_every: int = 6

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.pattern_every < 1:
            raise PlannerError("pattern_every must be at least 1")

    @property
    def semantic(self) -> bool:
        return self.mode in ("semantic", "all")

    @property
    def procedural(self) -> bool:
        return self.mode in ("procedural", "all")


class Experience:
    """Recalls experience for a question and learns from its answer, in one store."""

    def __init__(self, store: ExperienceStore, options: ExperienceOptions) -> None:
        self.store = store
        self.options = options

    def recall(self, task: Task, planner: str, video_key: str, llm: MeteredChat) -> Replay | None:
        if self.options.mode == "none":
            return None
        replay = recall(self.store, llm, task.question, planner=planner, video_id=video_key,
                        task_type=kind_of(task), scope=self.options.scope,
                        semantic=self.options.semantic, procedural=self.options.procedural, tau=self.options.tau,
                        sizing=self.options.sizing)
        return replay or None

    def learn(self, task: Task, answer: Answer, planner: str, video_key: str, llm: MeteredChat) -> None:
        """Validate the answer and keep what the mode asks for; steps go into the answer's trace."""
        final_id = _answer_step(answer)
        if self.options.mode == "none" or final_id is None or not answer.text.strip():
            return
        trace = answer.trace
        verdict, parent = self._validate(task, answer, llm, trace, final_id)
        kind_of_task = kind_of(task)
        provenance: dict[str, Any] = {
            "task_id": task.id, "question": task.question, "choices": list(task.choices) if task.choices else None,
            "answer": answer.text, "choice_index": answer.choice_index, "planner": planner, "model": llm.name,
            "verdict": {"passed": verdict.passed, "reason": verdict.reason, "mode": verdict.mode},
            "trace": trace.to_list()}
        common = dict(video_id=video_key, task_type=kind_of_task, model=llm.name, scope=self.options.scope)
        if self.options.semantic:
            parent = self._keep_semantic(task, answer, planner, verdict, provenance, common, llm, trace, parent)
        if self.options.procedural and verdict.passed:
            self._keep_workflow(task, answer, planner, verdict, provenance, common, llm, trace, parent, final_id)

    # -- steps of learning ---------------------------------------------------------------------
    def _validate(self, task: Task, answer: Answer, llm: MeteredChat, trace: Trace,
                  final_id: int) -> tuple[Verdict, int]:
        checks = answer.artifacts.get("checks") or []
        if checks:  # the planner's own Learner judged its attempts: the same check, not made twice
            passed = any(c.get("passed") and c.get("answer") == answer.text for c in checks)
            last = checks[-1]
            verdict = Verdict(passed, "the planner's check passed this answer" if passed
                              else str(last.get("reason") or "the planner's check failed"),
                              last.get("mode") or "self_check")
            step = trace.add(EvaluationStep(parent_id=final_id, text=f"validation: {verdict.reason} (reused)",
                                            score=1.0 if passed else 0.0))
            return verdict, step.id
        verdict = Learner(self_check=True).check(task, trace.chain_text(final_id), answer.text, answer.choice_index,
                                                 llm, trace, final_id)
        return verdict, len(trace) - 1

    def _keep_semantic(self, task: Task, answer: Answer, planner: str, verdict: Verdict, provenance: dict[str, Any],
                       common: dict[str, Any], llm: MeteredChat, trace: Trace, parent: int) -> int:
        started = time.perf_counter()
        cost: dict[str, Any] = {}
        output = ""
        if verdict.passed:
            text, completion = summarise_answer(llm, task.question, task.options_text(), answer.text)
            cost, output = model_cost(completion, started), completion.text
        else:
            text = f"Asked {task.question!r}, the answer given was {answer.text!r}."
        status = VALID if verdict.passed else REJECTED
        entry_id = self.store.add(Entry("semantic", planner, task.question, text, answer.text, verdict.mode,
                                        status=status, provenance=provenance, **common))
        said = (f"semantic #{entry_id}: {text}" if entry_id is not None else f"semantic (already kept): {text}")
        if status == REJECTED:
            said += " [rejected: failed validation, never replayed]"
        return trace.add(MemoryStep(parent_id=parent, action="stored", text=said, model_output=output, **cost)).id

    def _keep_workflow(self, task: Task, answer: Answer, planner: str, verdict: Verdict, provenance: dict[str, Any],
                       common: dict[str, Any], llm: MeteredChat, trace: Trace, parent: int, final_id: int) -> None:
        workflow = workflow_of(task.question, _tool_uses(trace, final_id))
        if not workflow.calls:
            return
        values = {**common, "video_id": ""}  # a workflow carries over to other videos
        entry_id = self.store.add(Entry("workflow", planner, task.question, workflow.render(), answer.text,
                                        verdict.mode, provenance={**provenance, "workflow": workflow.to_list()},
                                        **values))
        if entry_id is None:
            return
        parent = trace.add(MemoryStep(parent_id=parent, action="stored",
                                      text=f"workflow #{entry_id} ({values['task_type']}): {workflow.render()}")).id
        self._abstract_patterns(planner, values, llm, trace, parent)

    def _abstract_patterns(self, planner: str, values: dict[str, Any], llm: MeteredChat, trace: Trace,
                           parent: int) -> None:
        scope, kind_of_task = values["scope"], values["task_type"]
        flows = self.store.entries(scope=scope, kind="workflow", planner=planner, task_type=kind_of_task,
                                   status=VALID)
        made = self.store.count("pattern", scope=scope, planner=planner, task_type=kind_of_task)
        if len(flows) < self.options.pattern_every * (made + 1):
            return
        started = time.perf_counter()
        recent = flows[-PATTERN_SOURCES:]
        text, completion = abstract_patterns(llm, kind_of_task, [(e.question, e.text) for e in recent])
        cost = model_cost(completion, started)
        if not text:
            trace.add(MemoryStep(parent_id=parent, action="abstracted", text="no decision patterns in the model's reply",
                                 model_output=completion.text, **cost))
            return
        entry_id = self.store.add(Entry("pattern", planner, f"{kind_of_task} questions", text, "", "patterns",
                                        provenance={"entries": [e.entry_id for e in recent], "model": llm.name},
                                        **values))
        trace.add(MemoryStep(parent_id=parent, action="abstracted",
                             text=f"pattern #{entry_id} from {len(recent)} {kind_of_task} workflows: {text}",
                             model_output=completion.text, **cost))


def kind_of(task: Task) -> str:
    """The task type experience keeps a question's workflow under: the dataset's own label when the
    task has one, else the type its cue phrases give (``experience/task_types.txt``)."""
    return task.task_type.strip().lower() or task_type(task.question)


def _answer_step(answer: Answer) -> int | None:
    """The step the answer came from: the chain of its candidate when a search chose among several
    (so the workflow is that chain's), else the last final answer."""
    for candidate in answer.candidates:
        same = (candidate.choice_index == answer.choice_index if answer.choice_index is not None
                else candidate.text == answer.text)
        if same and candidate.step_id is not None and 0 <= candidate.step_id < len(answer.trace):
            return candidate.step_id
    finals = [step.id for step in answer.trace if step.kind == "final_answer"]
    return finals[-1] if finals else None


def _tool_uses(trace: Trace, step_id: int) -> list[ToolUse]:
    """The tool calls the model chose on the way to ``step_id`` (automatic ones left out), each with its
    observation."""
    path = trace.path(step_id)
    observed = {step.parent_id: step.text for step in path if isinstance(step, ObservationStep)}
    return [ToolUse(step.tool, step.arguments or {"input": step.raw_arguments}, observed.get(step.id, ""))
            for step in path if isinstance(step, ToolCallStep) and not step.automatic]
