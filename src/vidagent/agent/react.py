"""ReAct planner (VideoAgent): Thought / Action / Action Input / Observation until a Final Answer.

The trace is a chain: the task, an automatic overview of the first segments, then each tool call
with its observation (or an unusable reply with the message sent back), and the final answer.
After ``max_steps`` model steps, or three unusable or repeated steps in a row, the answer is forced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from vidagent.agent.answer import Answer, Candidate, dedupe_evidence
from vidagent.agent.planner import metered, register_planner, start
from vidagent.agent.react_steps import CallKey, ReActSteps
from vidagent.agent.steps import FinalAnswerStep, Trace
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.errors import PlannerError
from vidagent.llm.base import ChatModel
from vidagent.tools.base import Evidence

MAX_FORMAT_ERRORS = 3  # unusable or repeated steps in a row before the answer is forced
VIDEOAGENT_TOOLS = ("caption_retrieval", "segment_localization", "visual_question_answering",
                    "object_memory_querying")


@register_planner("react")
@dataclass
class ReActPlanner:
    """Options: ``max_steps`` (model steps before the answer is forced), ``overview_segments``
    (segments read before the model speaks; 0 for none)."""

    max_steps: int = 8
    overview_segments: int = 15
    name: ClassVar[str] = "react"
    tools: tuple[str, ...] | None = VIDEOAGENT_TOOLS
    reads_memory: ClassVar[bool] = True
    uses_llm: ClassVar[bool] = True

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel | None, trace: Trace | None = None) -> Answer:
        if not toolbox.tools:
            raise PlannerError("the ReAct planner needs at least one tool")
        if llm is None:
            raise PlannerError("the ReAct planner needs a chat model")
        model = metered(llm)
        trace, root = start(task, trace)
        steps = ReActSteps(model, toolbox, trace)
        messages = steps.opening(task)
        evidence: list[Evidence] = []
        seen: set[CallKey] = set()
        parent = root.id
        overview = steps.overview(root.id, self.overview_segments)
        if overview is not None:
            messages += overview.messages
            evidence.extend(overview.evidence)
            seen.add(overview.call)  # type: ignore[arg-type]
            parent = overview.step_id
        final: FinalAnswerStep | None = None
        format_errors = 0
        for _ in range(self.max_steps):
            outcome = steps.step(messages, parent, seen=seen)
            parent = outcome.step_id
            if outcome.final_answer is not None:
                final = trace[outcome.step_id]  # type: ignore[assignment]
                break
            messages += outcome.messages
            if outcome.call is not None and outcome.tool:
                seen.add(outcome.call)
                evidence.extend(outcome.evidence)
                format_errors = 0
            else:
                format_errors += 1
                if format_errors >= MAX_FORMAT_ERRORS:
                    break
        if final is None:
            final = steps.force_final(messages, parent, task)
        choice_index = steps.choose_option(messages, final.answer, task, final.id)
        text = task.answer_text(final.answer, choice_index)
        return Answer(task=task, text=text, planner=self.name, choice_index=choice_index,
                      evidence=dedupe_evidence(evidence), candidates=[Candidate(text, choice_index, step_id=final.id)],
                      trace=trace, usage=model.usage)
