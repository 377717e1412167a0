"""ReAct planner (VideoAgent): Thought / Action / Action Input / Observation until a Final Answer.

The trace is a chain: the task, an automatic overview of the first segments, then each tool call
with its observation (or an unusable reply with the message sent back), and the final answer.
After ``max_steps`` model steps, or two unusable replies in a row (an unusable reply is retried once),
the answer is forced; a call the conversation already made is not run, and the answer is asked for at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from vidagent.agent.answer import Answer, Candidate
from vidagent.agent.option_scoring import check_choose_by
from vidagent.agent.planning import Needs, Run, option
from vidagent.agent.react_steps import CallKey, ChainLimits, ReActSteps, offered_tools
from vidagent.agent.steps import Trace
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.llm.base import ChatModel
from vidagent.tools import catalogue
from vidagent.tools.base import Evidence

VIDEOAGENT_TOOLS = catalogue.names(in_set="videoagent")  # VideoAgent's tools: those declared in its set


@dataclass
class ReActPlanner:
    """Options: ``max_steps`` (model steps before the answer is forced), ``overview_segments``
    (segments read before the model speaks; 0 for none), ``choose_by`` (``auto``, the default: with the
    local model the options are scored after the chain, by their texts where they are sentences and by their
    numbers in every order otherwise, so every multiple-choice answer has a confidence; with an endpoint the
    option the final answer names, as the paper reads it; ``text``: always that; ``likelihood``: the option the
    model gives the highest probability; ``permuted``: that asked once per cyclic order of the options,
    averaged; ``continuation``: the options' texts scored. With the embedded 1.5B model on 100 EgoSchema dev
    questions the scored answer was right 36 times where the named option was 24: p = 0.0075),
    ``described_vqa`` (keep visual_question_answering when it cannot see the frames and only reads
    their descriptions; off: measured on dev with the offline stack, keeping it took ~1,000 more prompt
    tokens a question and 21 points of accuracy: it re-reads descriptions the planner already has and
    makes up what it cannot see), ``unusable_replies`` (unusable replies in a row, a reply and its one retry,
    before the answer is forced; issue 42) and ``failed_steps`` (the same for unusable replies counted with
    the steps after them)."""

    max_steps: int = option(8, 1, 50)
    overview_segments: int = option(15, 0, 200)
    choose_by: str = "auto"
    described_vqa: bool = False
    unusable_replies: int = option(2, 1, 10)
    failed_steps: int = option(3, 1, 20)
    name: ClassVar[str] = "react"
    tools: tuple[str, ...] | None = VIDEOAGENT_TOOLS

    def __post_init__(self) -> None:
        check_choose_by(self.choose_by)

    @property
    def needs(self) -> Needs:
        return Needs(tools=self.tools, knowledge=True)

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel, trace: Trace | None = None) -> Answer:
        toolbox = offered_tools(toolbox, "ReAct", self.described_vqa)
        run = Run.begin(self.name, task, toolbox, llm, trace)
        steps = ReActSteps(run.llm, toolbox, run.trace)
        opening = steps.opening(task)
        evidence: list[Evidence] = []
        seen: set[CallKey] = set()
        parent = run.root.id
        overview = steps.overview(parent, self.overview_segments)
        if overview is not None:
            evidence.extend(overview.evidence)
            seen.add(overview.call)  # type: ignore[arg-type]
            parent = overview.step_id
        for consulted in steps.consult_knowledge(task.question, parent):
            evidence.extend(consulted.evidence)
            seen.add(consulted.call)  # type: ignore[arg-type]
            parent = consulted.step_id
        chain = steps.chain(task, opening, parent, max_steps=self.max_steps, seen=seen, choose_by=self.choose_by,
                            limits=ChainLimits(self.unusable_replies, self.failed_steps))
        if chain.no_answer:  # "Final Answer: None": it abstains, the option its scores favoured kept as a guess
            guesses = [] if chain.guess is None else [Candidate(
                task.answer_text("", chain.guess), chain.guess, step_id=chain.final.id,
                likelihood=round(chain.option_probabilities[chain.guess], 4) if chain.option_probabilities else None)]
            return run.answer("", None, candidates=guesses, evidence=[*evidence, *chain.evidence],
                              abstained=f"the planner reached no answer (its final answer: {chain.final.answer!r})")
        text = task.answer_text(chain.final.answer, chain.choice_index)
        return run.answer(text, chain.choice_index, step_id=chain.final.id, likelihood=chain.likelihood,
                          evidence=[*evidence, *chain.evidence])
