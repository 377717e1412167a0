"""ReAct steps, shared by every planner that speaks ReAct (the ReAct chain, each MCTS node).

One ``step`` asks the model for ``Thought / Action / Action Input`` (or ``Final Answer``),
parses it leniently, runs the tool and records typed steps in the trace: a ``ToolCallStep`` with
the parsed arguments and an ``ObservationStep``, a ``FinalAnswerStep``, or a ``FormatErrorStep``
whose message goes back to the model.

The conversation is the planner's opening followed by the trace's path to the step
(``Trace.conversation``); it only grows at its end, so a local model reuses its KV cache for everything
before the newest observation.

No call is spent on a model that is stuck (issue 42): a call the conversation already made is not run
again, and its correction asks for the answer in the same turn (the step ends in that answer); an
unusable reply is told to the model once, and a second one in a row ends a chain with its answer forced.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

from vidagent.agent.option_scoring import OptionScores, choose
from vidagent.agent.parsing import (extract_choice, is_bare_number, lone_option_number, parse_react,
                                    reaches_no_answer)
from vidagent.agent.steps import FinalAnswerStep, FormatErrorStep, Trace, model_cost
from vidagent.agent.task import Task, open_answer
from vidagent.agent.toolbox import Toolbox
from vidagent.errors import PlannerError
from vidagent.llm.base import Completion, Message
from vidagent.llm.metered import MeteredChat
from vidagent.prompts import Prompt, prompt
from vidagent.tools import catalogue
from vidagent.tools.base import Evidence

PROMPTS = "vidagent.agent"
CallKey = tuple[str, Hashable]


@dataclass(frozen=True)
class StepOutcome:
    """What one step produced; ``step_id`` is the step the next one hangs from in the trace (its
    messages are that step's: ``Trace.conversation``)."""

    model_output: str
    step_id: int
    feedback: str = ""
    call: CallKey | None = None
    tool: str = ""
    raw_arguments: str = ""
    final_answer: str | None = None
    is_error: bool = False
    evidence: tuple[Evidence, ...] = ()

    @property
    def unusable(self) -> bool:
        """A reply that could not be used (no action or answer, an unknown tool, a bare number for words):
        neither an answer nor a call (a call refused as a sibling's keeps its call)."""
        return self.is_error and self.call is None and self.final_answer is None

    def label(self) -> str:
        """The action as a line for a prompt that lists actions already taken."""
        if self.final_answer is not None:
            return f"Final Answer: {self.final_answer}"
        if not self.tool:
            return f"(an unusable reply: {' '.join(self.model_output.split())[:80]})"
        return f"Action: {self.tool}; Action Input: {self.raw_arguments}"


@dataclass(frozen=True)
class ChainLimits:
    """When a chain stops trying (issue 42), from its planner's options: ``unusable_replies`` unusable replies in a
    row (a reply and its one retry), or ``failed_steps`` unusable replies and, where errors count, failed tool
    calls in a row."""

    unusable_replies: int
    failed_steps: int


@dataclass(frozen=True)
class Chain:
    """A finished chain: its final answer step, the option it names, and the evidence of its tool calls."""

    final: FinalAnswerStep
    choice_index: int | None
    evidence: tuple[Evidence, ...]
    option_probabilities: tuple[float, ...] | None = None
    unusable: bool = False  # ended by an unusable reply and its unusable retry (its answer forced)
    # the final answer said none was reached ("None", "unknown"): no option is mapped for it; ``guess`` is the
    # option the scores favoured (a candidate of an answer that abstains), None where none was scored
    no_answer: bool = False
    guess: int | None = None

    @property
    def likelihood(self) -> float | None:
        """The chosen option's probability, when it was chosen by likelihood."""
        if self.option_probabilities is None or self.choice_index is None:
            return None
        return round(self.option_probabilities[self.choice_index], 4)


class ReActSteps:
    """Makes ReAct steps for one question with one model, toolbox and trace."""

    def __init__(self, llm: MeteredChat, toolbox: Toolbox, trace: Trace) -> None:
        self.llm = llm
        self.toolbox = toolbox
        self.trace = trace
        self.words_wanted = ""  # set by ``opening`` for an open question that asks for words: what it asks

    # -- the conversation's start ------------------------------------------------------------
    def opening(self, task: Task) -> list[Message]:
        """The system prompt (tools and rules for whatever the toolbox holds) and the question."""
        self.words_wanted = _asks(task.question) if wants_words(task) else ""
        rules = "\n".join(f"{i}. {hint}" for i, hint in enumerate(self.toolbox.hints(), 1))
        system = prompt(PROMPTS, "react_system").render(memory_note=self.toolbox.memory_note,
                                                        tools=self.toolbox.describe(),
                                                        tool_names=", ".join(self.toolbox.names), rules=rules)
        video = self.toolbox.video
        question = prompt(PROMPTS, "question").render(
            duration=f"{video.duration_s:.1f}" if video else "?",
            segment_count=video.segment_count if video else 0,
            last_segment=max(0, video.segment_count - 1) if video else 0,
            segment_seconds=f"{video.segment_seconds:g}" if video else "?",
            question=task.question, options=task.options_text(), answer_format=answer_format(task),
        ).strip()
        return [Message("system", system), Message("user", self.toolbox.experience() + question)]

    def overview(self, parent_id: int, segments: int) -> StepOutcome | None:
        """Read the first segments' descriptions, written as the model's own first step; on a long
        video (more than twice ``segments``), skim the whole of it instead (caption_retrieval spreads
        a wide range evenly), as VideoAgent (Wang et al.) first reads frames sampled evenly.

        It saves a model call on short videos, where reading every description is the right first
        move anyway, and shows a small model the expected format by example. On a 180-segment video
        the first 15 segments are its first 8 %: every answer on EgoSchema's 180 one-second captions
        came from them (20 dev questions: one call each, 4 right against caption-only's 7).
        """
        video, tool = self.toolbox.video, catalogue.doing("overview")
        if tool not in self.toolbox.tools or segments <= 0 or video is None or not video.segment_count:
            return None
        long_video = video.segment_count > 2 * segments
        end = video.segment_count - 1 if long_video else min(video.segment_count, segments) - 1
        return self.automatic(prompt(PROMPTS, "overview_step").render(start=0, end=end).strip(), parent_id)

    def consult_knowledge(self, question: str, parent_id: int) -> list[StepOutcome]:
        """Ask each knowledge source the user attached the question, as automatic steps after the overview,
        so that what an attached document says reaches the model whether or not it would call the tool."""
        outcomes = []
        for name in self.toolbox.attached:
            if name not in self.toolbox.tools:
                continue
            text = prompt(PROMPTS, "knowledge_step").render(source=name, tool=name, question=json.dumps(question))
            outcome = self.automatic(text.strip(), parent_id)
            outcomes.append(outcome)
            parent_id = outcome.step_id
        return outcomes

    def automatic(self, text: str, parent_id: int) -> StepOutcome:
        """Carry out a step the planner writes in the model's name (``Thought: ... Action: ...``),
        recorded as an automatic tool call holding ``text`` as its reply, so the conversation goes on
        as if the model had replied so."""
        parsed = parse_react(text, self.toolbox.names)
        tool = parsed.action or ""
        _, observation = self.toolbox.call_recorded(self.trace, self.llm.usage, parent_id, tool, parsed.action_input,
                                                    thought=parsed.thought, model_output=text, automatic=True)
        return StepOutcome(text, observation.id, feedback=observation.text,
                           call=self.call_key(tool, parsed.action_input), tool=tool,
                           raw_arguments=parsed.action_input, is_error=observation.is_error,
                           evidence=observation.evidence)

    # -- one step ----------------------------------------------------------------------------
    def step(self, messages: Sequence[Message], parent_id: int, *, task: Task,
             seen: set[CallKey] | frozenset[CallKey] = frozenset(),
             tried: set[CallKey] | frozenset[CallKey] = frozenset(), temperature: float | None = None,
             seed: int | None = None) -> StepOutcome:
        """Ask the model for its next step after ``messages`` and carry it out.

        A call already in ``seen`` (made earlier in this conversation) is not run: its result is in the
        conversation, so the step ends in the answer, asked for in the same turn (``_answer_repeat``). A call
        in ``tried`` (a sibling branch's call) is not run either: it comes back as a format error.
        """
        started = time.perf_counter()
        completion = self.chat(messages, temperature=temperature, seed=seed)
        output = completion.text.strip()
        parsed = parse_react(output, self.toolbox.names)
        if parsed.final_answer is not None and self.words_wanted and is_bare_number(parsed.final_answer):
            asks, self.words_wanted = self.words_wanted, ""  # said once: a second bare answer stands
            message = prompt(PROMPTS, "answer_in_words").render(asks=asks).strip()
            return self._format_error(parent_id, output, message, completion, started)
        if parsed.final_answer is not None:
            step = self.trace.add(FinalAnswerStep(parent_id=parent_id, thought=parsed.thought, answer=parsed.final_answer,
                                                  model_output=output, **model_cost(completion, started)))
            return StepOutcome(output, step.id, final_answer=parsed.final_answer)
        if parsed.error is not None:
            return self._format_error(parent_id, output, parsed.error, completion, started)
        call = self.call_key(parsed.action or "", parsed.action_input)
        if call in seen:
            return self._answer_repeat(messages, parent_id, output, completion, started, call, task)
        if call in tried:
            return self._format_error(parent_id, output, prompt(PROMPTS, "tried_call").text, completion, started, call)
        return self._run_tool(parent_id, parsed.thought, parsed.action or "", parsed.action_input, output,
                              completion, started)

    def conversation(self, opening: Sequence[Message], step_id: int) -> list[Message]:
        """The messages that lead to ``step_id``: the opening, then each step on its path."""
        return [*opening, *self.trace.conversation(step_id)]

    def chain(self, task: Task, opening: Sequence[Message], parent_id: int, *, max_steps: int,
              seen: set[CallKey] | None = None, temperature: float | None = None, seed: int | None = None,
              after_step: Callable[[StepOutcome], int] | None = None, errors_count: bool = False,
              choose_by: str = "text", limits: ChainLimits) -> Chain:
        """Steps until a final answer (a repeated call ends in one), ``max_steps`` model steps,
        ``limits.unusable_replies`` unusable replies in a row, or ``limits.failed_steps`` unusable replies (and,
        with ``errors_count``, tool errors) in a row (the planner's options); then the answer is forced if needed
        and mapped to an
        option. ``after_step`` may record more steps after each one and returns the id the next step hangs
        from. The conversation is ``opening`` and the path to each step. ``choose_by="likelihood"`` picks
        the option by the model's probabilities after the whole chain (falling back to reading the answer
        when the backend gives none); ``"permuted"`` asks so once per cyclic order of the options and averages."""
        seen = set() if seen is None else seen
        evidence: list[Evidence] = []
        final: FinalAnswerStep | None = None
        parent, unusable, failed = parent_id, 0, 0
        for _ in range(max_steps):
            if self.last_call_left():  # a budget's last call is kept for the answer
                break
            outcome = self.step(self.conversation(opening, parent), parent, task=task, seen=seen,
                                temperature=temperature, seed=seed)
            parent = outcome.step_id
            if outcome.final_answer is not None:
                final = self.trace[outcome.step_id]  # type: ignore[assignment]
                break
            if after_step is not None:
                parent = after_step(outcome)
            if outcome.unusable:
                unusable, failed = unusable + 1, failed + 1
            else:
                if outcome.call is not None:
                    seen.add(outcome.call)
                evidence.extend(outcome.evidence)
                unusable, failed = 0, failed + 1 if errors_count and outcome.is_error else 0
            if unusable >= limits.unusable_replies or failed >= limits.failed_steps:
                break
        messages = self.conversation(opening, final.parent_id if final is not None else parent)  # type: ignore[arg-type]
        gave_up = final is None and unusable >= limits.unusable_replies
        if final is None:
            final = self.force_final(messages, parent, task, thought="(unusable replies)" if gave_up else
                                     "(step limit reached)")
        none = bool(task.choices) and reaches_no_answer(final.answer, task.choices)
        scores = self.scored_after(messages, final, task, choose_by)
        if scores is not None and none:
            return Chain(final, None, tuple(evidence), scores.probabilities, unusable=gave_up, no_answer=True,
                         guess=scores.index)
        if scores is not None:
            return Chain(final, scores.index, tuple(evidence), scores.probabilities, unusable=gave_up)
        if none:
            return Chain(final, None, tuple(evidence), unusable=gave_up, no_answer=True)
        return Chain(final, self.choose_option(messages, final.answer, task, final.id), tuple(evidence),
                     unusable=gave_up)

    def scored_after(self, messages: Sequence[Message], final: FinalAnswerStep, task: Task,
                     choose_by: str) -> OptionScores | None:
        """The options scored (``choose_by``) after ``messages`` and the model's reply that gave ``final``, each
        scoring a child of ``final`` in the trace; None where they are read from the answer instead (``text``, an
        open question, no call left, or a backend that cannot score)."""
        if choose_by == "text" or not task.choices or self.llm.calls_left() == 0:
            return None
        ended = [*messages, Message("assistant", final.model_output or f"Final Answer: {final.answer}")]
        return choose(self.llm, ended, task, self.trace, final.id, choose_by)

    def chat(self, messages: Sequence[Message], *, contract: str = "react_step", temperature: float | None = None,
             seed: int | None = None) -> Completion:
        """The model's reply to ``messages`` under the budget and stop strings of the prompt ``contract``
        (``react_step`` for a step; the prompt the last message was rendered from otherwise)."""
        wanted: Prompt = prompt(PROMPTS, contract)
        return self.llm.chat(messages, stop=wanted.stop, max_tokens=wanted.budget, temperature=temperature, seed=seed)

    def call_key(self, tool: str, raw_arguments: str) -> CallKey:
        """A tool call by its parsed arguments, so "(0, 2)" and "0, 2" are one call."""
        arguments = self.toolbox.parse(tool, raw_arguments)
        if arguments is not None:
            return tool, tuple(sorted((k, v) for k, v in arguments.items()))
        return tool, " ".join(raw_arguments.lower().split())

    # -- ending ------------------------------------------------------------------------------
    def force_final(self, messages: Sequence[Message], parent_id: int, task: Task, *,
                    thought: str = "(step limit reached)") -> FinalAnswerStep:
        """Out of steps (or of usable replies: ``thought`` says which): ask for the best answer now."""
        request = prompt(PROMPTS, "force_final").render(answer_format=answer_format(task))
        return self._answer_now([*messages, Message("user", request)], parent_id, "force_final", thought)

    def _answer_repeat(self, messages: Sequence[Message], parent_id: int, output: str, completion: Completion,
                       started: float, call: CallKey, task: Task) -> StepOutcome:
        """A call this conversation already made (its reply ``output``): not run, and not answered by a
        correction of its own either, which cost the 1.5B model a call each time it looped. The correction
        (``repeated_call``: the result is above) asks for the answer in the same turn, and the step ends in
        that answer; so a repetition costs one call, the answer's, and cannot loop."""
        message = prompt(PROMPTS, "repeated_call").render(answer_format=answer_format(task)).strip()
        refused = self._format_error(parent_id, output, message, completion, started, call)
        told = self.trace[refused.step_id].messages(self.trace)
        final = self._answer_now([*messages, *told], refused.step_id, "repeated_call", "(a repeated call)")
        return StepOutcome(final.model_output, final.id, final_answer=final.answer)

    def choose_option(self, messages: Sequence[Message], answer: str, task: Task, parent_id: int, *,
                      allow_none: bool = False) -> int | None:
        """The option a final answer names; when it names none, ask the model once which it means.
        ``allow_none`` lets the model say the answer is none of them (a vote over answers must not count
        "the ball is not held by anyone" for an option it was only pushed to)."""
        if not task.choices or reaches_no_answer(answer, task.choices):  # "None": no option is pushed on it
            return None
        index = extract_choice(answer, task.choices, bare_numbers=False)
        if index is None:
            index = lone_option_number(answer, len(task.choices))
        if index is not None or self.llm.calls_left() == 0:  # no call left to ask with: no option
            return index
        started = time.perf_counter()
        which = "which_option_or_none" if allow_none else "which_option"
        request = prompt(PROMPTS, which).render(answer=answer, options=task.options_text()).strip()
        completion = self.chat(list(messages) + [Message("user", request)], contract=which)
        says_none = allow_none and re.match(r"\W*none\b", completion.text.strip(), re.IGNORECASE) is not None
        index = None if says_none else extract_choice(completion.text, task.choices)
        self.trace.add(FinalAnswerStep(parent_id=parent_id, thought="(mapping the answer to an option)",
                                       answer=completion.text.strip(), how="option", model_output=completion.text,
                                       **model_cost(completion, started)))
        return index

    def last_call_left(self) -> bool:
        """Whether the question's budget allows one more model call at most (keep it for the answer)."""
        left = self.llm.calls_left()
        return left is not None and left <= 1

    # -- helpers -----------------------------------------------------------------------------
    def _answer_now(self, messages: Sequence[Message], parent_id: int, contract: str, thought: str) -> FinalAnswerStep:
        """The model's answer to ``messages``, which end in a request for it (the prompt ``contract``),
        recorded as a forced final answer (its text as it is where it has no ``Final Answer:``)."""
        started = time.perf_counter()
        completion = self.chat(messages, contract=contract)
        parsed = parse_react(completion.text, self.toolbox.names)
        answer = parsed.final_answer or completion.text.strip()
        return self.trace.add(FinalAnswerStep(parent_id=parent_id, thought=thought, answer=answer, how="forced",
                                              model_output=completion.text, **model_cost(completion, started)))

    def _run_tool(self, parent_id: int, thought: str, tool: str, raw_arguments: str, output: str,
                  completion: Completion, started: float) -> StepOutcome:
        cost = model_cost(completion, started)
        _, observation = self.toolbox.call_recorded(self.trace, self.llm.usage, parent_id, tool, raw_arguments,
                                                    thought=thought, model_output=output, cost=cost)
        return StepOutcome(output, observation.id, feedback=observation.text, call=self.call_key(tool, raw_arguments),
                           tool=tool, raw_arguments=raw_arguments, is_error=observation.is_error,
                           evidence=observation.evidence)

    def _format_error(self, parent_id: int, output: str, message: str, completion: Completion, started: float,
                      call: CallKey | None = None) -> StepOutcome:
        step = self.trace.add(FormatErrorStep(parent_id=parent_id, model_output=output, message=message,
                                              **model_cost(completion, started)))
        return StepOutcome(output, step.id, feedback=message, call=call, is_error=True)


def offered_tools(toolbox: Toolbox, planner: str, described_vqa: bool) -> Toolbox:
    """The tools a ReAct-speaking planner offers its model: all it was given, less the tool declared to look at
    segments (``does="looks"``: visual_question_answering) when its model only re-reads frame descriptions (unless
    ``described_vqa``) and another tool is left; none at all is an error."""
    if not toolbox.tools:
        raise PlannerError(f"the {planner} planner needs at least one tool")
    if not (toolbox.sees_frames or described_vqa) and len(toolbox.tools) > 1:
        looks = catalogue.names(does="looks")
        return toolbox.select([name for name in toolbox.names if name not in looks])
    return toolbox


def answer_format(task: Task) -> str:
    """How the answer should be written, by the task's answer type (``answer_format_*`` in ``prompts/answers.toml``).

    For options it asks for the option's text: small models asked for an option *number* mostly
    echo the last number they read; asked to copy the text they pick by meaning. An open question
    asks for words, or for a time where the question asks when (``open_answer``): one format for every
    open question ("a short answer (for a 'when' question, the time in seconds)") had the 1.5B model
    answer why/what/how questions with a bare time it read in an observation.
    """
    kind = task.answer_type
    if kind == "text" and open_answer(task.question) != "words":
        kind = open_answer(task.question)
    return prompt(PROMPTS, f"answer_format_{kind}").text.strip()


def _asks(question: str) -> str:
    """What a question asks, in a few words for the model: "why", "what", "how" or "for a description"."""
    first = question.strip().split()[0].lower().strip("?,.") if question.strip() else ""
    return f"{first!r}" if first in ("why", "what", "how", "who", "where", "which") else "for a description"


def wants_words(task: Task) -> bool:
    """An open question whose answer must be words (not a time, a count or an option)."""
    return task.answer_type == "text" and open_answer(task.question) == "words"
