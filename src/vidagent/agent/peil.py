"""AssistGPT's Plan, Execute, Inspect, Learn as a planner over any number of sources.

One attempt is a ReAct-style chain whose actions are code-like module calls,
``Action: narration_ground("a dog", visual[1])``: the Executor checks each call against the
module's accepted source kinds before running it, and the Inspector adds every clip or crop a
module cuts as a new source, ``visual[n]``, summarised in the observation. The Learner then
checks the finished attempt (against a known answer when teaching, else by the model's
self-check); a failed attempt is tried again (up to ``attempts``) with the check's reason, at a
higher temperature. A trace that succeeded after a failed try is kept in the library's example
bank when its success is known (checked against a reference: teaching; ``keep_self_checked`` lets the model's
self-check count too), and the most similar kept traces are shown to later questions as in-context examples.
An attempt whose chain ended in an unusable reply and its unusable retry (its answer forced) is the
last: it is not checked and not tried again, and the answer is chosen among the attempts made (issue 42).

The trace: the task, one inspection step per user source, any examples replayed, then one branch
per attempt (its tool calls, observations and new sources, its final answer and the Learner's
verdict), and the stored example if one was kept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from vidagent.agent.answer import Answer, Candidate, answer_key, group_answers, mean_probability
from vidagent.agent.inspector import Executor, Inspector
from vidagent.agent.learning.learner import Learner, Verdict
from vidagent.agent.option_scoring import check_choose_by
from vidagent.agent.planning import Needs, Run, option
from vidagent.agent.react_steps import CallKey, ChainLimits, ReActSteps, StepOutcome, answer_format
from vidagent.agent.steps import EvaluationStep, FinalAnswerStep, InspectionStep, MemoryStep, Trace
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox, select_tools
from vidagent.errors import PlannerError
from vidagent.experience.store import Entry
from vidagent.llm.base import ChatModel, Message
from vidagent.llm.metered import MeteredChat
from vidagent.prompts import prompt
from vidagent.tools import catalogue
from vidagent.tools.base import Evidence, Tool

PROMPTS = "vidagent.agent"
EXAMPLE_KIND = "trace"


@dataclass(frozen=True)
class Attempt:
    number: int
    final: FinalAnswerStep
    text: str
    choice_index: int | None
    steps: str  # the attempt's steps as text, for the self-check and the example bank
    evidence: tuple[Evidence, ...]
    verdict: Verdict | None = None
    unusable: bool = False  # its chain ended in unusable replies (``Chain.unusable``)
    option_probabilities: tuple[float, ...] | None = None  # the options' scores after its answer (``choose_by``)


@dataclass
class PEILPlanner:
    """Options: ``max_steps`` (module calls per attempt), ``attempts`` (tries, the Learner's N),
    ``self_check`` (judge attempts with the model when no known answer is given), ``examples``
    (kept traces shown as examples; 0 switches the example bank off: nothing shown, nothing kept.
    The bank is the planner's own, on whatever ``--experience`` says: it costs no model call, only
    an embedding of the question), ``min_similarity`` (how like the question a kept one must be),
    ``retry_temperature``, ``modules`` (the AssistGPT modules offered; all by default), ``choose_by``
    (as for react: ``auto``, the default, scores the options after each attempt's answer with a model that can,
    so a multiple-choice answer has a confidence, the options' mean probability over the attempts, and reads
    the named option with an endpoint, as the paper; ``text``, ``likelihood``, ``permuted``,
    ``continuation``), ``look_first`` (narrate each video, caption each
    image, as automatic first steps), ``unusable_replies`` (unusable replies in a row before an attempt's
    answer is forced), ``failed_steps`` (unusable replies or failed module calls in a row before it is),
    ``step_chars`` (an observation's length in a stored example or a self-check)."""

    max_steps: int = option(8, 1, 50)
    attempts: int = option(3, 1, 10)
    self_check: bool = True
    examples: int = option(2, 0, 20)
    # A trace enters the example bank only when it is known right (checked against a reference: ``--teach``); the
    # model's self-check is no such knowledge (it failed 86 of 88 attempts on dev, and kept a wrong trace as valid,
    # issue 42): ``keep_self_checked`` lets traces that passed only it in too.
    keep_self_checked: bool = False
    min_similarity: float = option(0.8, 0.0, 1.0)
    retry_temperature: float = option(0.7, 0.0, 2.0)
    modules: tuple[str, ...] | None = None
    choose_by: str = "auto"
    look_first: bool = True
    unusable_replies: int = option(2, 1, 10)
    failed_steps: int = option(3, 1, 20)
    step_chars: int = option(300, 20, 10_000)
    name: ClassVar[str] = "peil"
    needs: ClassVar[Needs] = Needs(modules=True, max_sources=None, images=True, knowledge=True)

    def __post_init__(self) -> None:
        check_choose_by(self.choose_by)

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel, trace: Trace | None = None) -> Answer:
        if self.attempts < 1 or self.max_steps < 1:
            raise PlannerError("attempts and max_steps must be at least 1")
        modules = dict(toolbox.assist.modules)
        if self.modules is not None:  # the modules the sources cannot serve left out; the user's knowledge kept
            modules = select_tools(modules, self.modules, toolbox.assist.withheld, toolbox.attached, what="module")
        if not modules:
            raise PlannerError("the PEIL planner needs at least one module")
        run = Run.begin(self.name, task, toolbox, llm, trace)
        model, trace = run.llm, run.trace
        inspector = Inspector(toolbox.assist.describer)
        parent = run.root.id
        for media in toolbox.sources:
            entry, _ = inspector.add(media, "given by the user")
            parent = trace.add(InspectionStep(parent_id=parent, label=entry.label, source=media.source.to_dict(),
                                              origin=entry.origin, text=entry.summary)).id
        examples = self._recall(task, toolbox, trace, parent)
        if examples:
            parent = trace.last.id  # type: ignore[union-attr]
        learner = Learner(self.self_check)
        attempts: list[Attempt] = []
        for number in range(1, self.attempts + 1):
            attempt = self._attempt(task, toolbox, modules, model, trace, parent, inspector, examples, number,
                                    attempts[-1] if attempts else None)
            if attempt.unusable:  # the model's replies were unusable twice in a row: no check, no further try
                attempts.append(attempt)
                trace.add(EvaluationStep(parent_id=attempt.final.id, text=f"attempt {number} ended in unusable "
                                         "replies: no check and no further attempt"))
                break
            verdict = learner.check(task, attempt.steps, attempt.text, attempt.choice_index, model, trace,
                                    attempt.final.id)
            attempts.append(replace(attempt, verdict=verdict))
            if verdict.passed:
                break
        chosen = self._choose(attempts)
        if chosen.verdict and chosen.verdict.passed and chosen.number > 1:
            self._keep(task, toolbox, trace, chosen)
        return run.answer(inspector.readable(chosen.text), chosen.choice_index, candidates=self._candidates(attempts),
                          evidence=[e for a in attempts for e in a.evidence],
                          artifacts={"attempts": len(attempts),
                                     "checks": [{"attempt": a.number, "answer": a.text,
                                                 "passed": bool(a.verdict and a.verdict.passed),
                                                 "mode": a.verdict.mode if a.verdict else None,
                                                 "reason": a.verdict.reason if a.verdict else ""} for a in attempts],
                                     "examples_used": len(examples),
                                     "sources": [entry.summary for entry in inspector.entries]})

    # -- one attempt -----------------------------------------------------------------------------
    def _attempt(self, task: Task, toolbox: Toolbox, modules: dict[str, Tool], model: MeteredChat,
                 trace: Trace, parent: int,
                 given: Inspector, examples: list[Entry], number: int, previous: Attempt | None) -> Attempt:
        inspector = Inspector(given.describer, list(given.entries))
        executor = Executor(modules, inspector, task.question)
        steps = ReActSteps(model, Toolbox.of(executor.tools(), shapes=toolbox.shapes), trace)
        opening = self._opening(task, toolbox, steps, inspector, examples, previous)
        parent, seen, opened = self._look_first(steps, inspector, parent)
        temperature = None if number == 1 else self.retry_temperature
        seed = None if number == 1 else task.seed % (1 << 31) + number

        def inspect(outcome: StepOutcome) -> int:
            """Record the sources the step's module cut (already summarised in its observation)."""
            parent = outcome.step_id
            for entry in executor.added:
                parent = trace.add(InspectionStep(parent_id=parent, label=entry.label,
                                                  source=entry.media.source.to_dict(), origin=entry.origin,
                                                  text=entry.summary)).id
            executor.added.clear()
            return parent

        chain = steps.chain(task, opening, parent, max_steps=self.max_steps, seen=seen, temperature=temperature,
                            seed=seed, after_step=inspect, errors_count=True, choose_by=self.choose_by,
                            limits=ChainLimits(self.unusable_replies, self.failed_steps))
        text = trace.chain_text(chain.final.id, step_chars=self.step_chars)
        return Attempt(number, chain.final, task.answer_text(chain.final.answer, chain.choice_index),
                       chain.choice_index, text, chain.evidence + opened, unusable=chain.unusable,
                       option_probabilities=chain.option_probabilities)

    def _look_first(self, steps: ReActSteps, inspector: Inspector,
                    parent: int) -> tuple[int, set[CallKey], tuple[Evidence, ...]]:
        """Narrate each of the user's videos (and an image's caption) as the model's own first steps:
        what AssistGPT does with ASR on arrival and ReAct with its overview. It shows a small model
        the call format by example and the content it would otherwise guess."""
        seen: set[CallKey] = set()
        evidence: list[Evidence] = []
        if not self.look_first:
            return parent, seen, ()
        for index, entry in enumerate(inspector.entries):
            module = catalogue.doing("looks_first", accepts=entry.media.source.kind)
            if module not in steps.toolbox.tools:
                continue
            text = prompt(PROMPTS, "peil_opening_step").render(module=module, source=f"visual[{index}]").strip()
            outcome = steps.automatic(text, parent)
            seen.add(outcome.call)  # type: ignore[arg-type]
            evidence.extend(outcome.evidence)
            parent = outcome.step_id
        return parent, seen, tuple(evidence)

    def _opening(self, task: Task, toolbox: Toolbox, steps: ReActSteps, inspector: Inspector,
                 examples: list[Entry], previous: Attempt | None) -> list[Message]:
        shown = "\n\n".join(f"Question: {e.question}\n{e.text}\nFinal Answer: {e.answer}" for e in examples)
        system = prompt(PROMPTS, "peil_system").render(
            memory_note=toolbox.memory_note,
            modules="\n".join(f"- {tool.description}" for tool in steps.toolbox.tools.values()),
            examples=prompt(PROMPTS, "peil_examples").render(examples=shown) if examples else "")
        feedback = ""
        if previous is not None and previous.verdict is not None:
            feedback = "\n" + prompt(PROMPTS, "peil_retry").render(answer=previous.text,
                                                                  reason=previous.verdict.reason).strip() + "\n"
        question = prompt(PROMPTS, "peil_question").render(
            sources=inspector.summaries() or "(none)", question=task.question, options=task.options_text(),
            feedback=feedback, answer_format=answer_format(task))
        return [Message("system", system.strip()), Message("user", toolbox.experience() + question.strip())]

    # -- learning ----------------------------------------------------------------------------------
    def _recall(self, task: Task, toolbox: Toolbox, trace: Trace, parent: int) -> list[Entry]:
        bank = toolbox.assist.examples
        if bank is None or self.examples <= 0:
            return []
        found = bank.similar(task.question, EXAMPLE_KIND, planner=self.name, scope=toolbox.assist.bank_scope,
                                         limit=self.examples, min_similarity=self.min_similarity)
        if found:
            listed = "; ".join(f"{e.question!r} ({e.similarity:.2f})" for e in found)
            trace.add(MemoryStep(parent_id=parent, action="replayed", text=f"{len(found)} example(s): {listed}"))
        return found

    def _keep(self, task: Task, toolbox: Toolbox, trace: Trace, attempt: Attempt) -> None:
        bank = toolbox.assist.examples
        if bank is None or attempt.verdict is None or self.examples <= 0:
            return
        if attempt.verdict.mode != "reference" and not self.keep_self_checked:
            return
        kept = bank.add(Entry(EXAMPLE_KIND, self.name, task.question, attempt.steps, attempt.text,
                              attempt.verdict.mode, attempt.number, scope=toolbox.assist.bank_scope))
        if kept is not None:
            trace.add(MemoryStep(parent_id=attempt.final.id, action="stored",
                                 text=f"attempt {attempt.number}'s trace kept as an example ({attempt.verdict.mode})"))

    @staticmethod
    def _choose(attempts: list[Attempt]) -> Attempt:
        """The attempt that passed its check; when none did, the answer most attempts gave (the earliest on a tie)."""
        passed = [a for a in attempts if a.verdict and a.verdict.passed]
        if passed:
            return passed[-1]
        most = max(group_answers(attempts, _answer_key), key=len)  # max keeps the first of equal groups
        return most[0]

    @staticmethod
    def _candidates(attempts: list[Attempt]) -> list[Candidate]:
        """One candidate per distinct answer: its votes, the share of its attempts that passed their check and,
        where the options were scored, its option's mean probability over the scored attempts."""
        scored = [a.option_probabilities for a in attempts if a.option_probabilities is not None]
        return [Candidate(group[0].text, group[0].choice_index, votes=len(group),
                          reward=sum(1.0 for a in group if a.verdict and a.verdict.passed) / len(group),
                          likelihood=mean_probability(scored, group[0].choice_index),
                          step_id=group[-1].final.id) for group in group_answers(attempts, _answer_key)]


def _answer_key(attempt: Attempt) -> tuple[object, ...]:
    return answer_key(attempt.text, attempt.choice_index)
