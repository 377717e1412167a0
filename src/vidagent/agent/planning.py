"""What a planner is: the ``Planner`` protocol, the ``Needs`` it declares, and what every planner does first.

A planner answers one ``Task`` with a ``Toolbox`` and a chat model and returns an ``Answer`` whose
trace is the tree of steps it made. It says what it needs for a question in one typed value,
``needs``: the session builds exactly that (the memory stages, the tools or modules, the sources it
takes) and nothing else, and refuses a question the planner cannot take before any work. The
built-in planners import this module, never the registry, so registering them makes no import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, Sequence, runtime_checkable

from vidagent.agent.answer import Answer, Candidate, answer_key, dedupe_evidence, group_answers
from vidagent.agent.orders_guard import Guarded, guard_answer, guarded_artifacts
from vidagent.agent.text_guard import withhold_text
from vidagent.agent.parsing import extract_choice
from vidagent.agent.steps import FinalAnswerStep, MemoryStep, ObservationStep, Step, TaskStep, Trace
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.config import ToolShapes
from vidagent.errors import PlannerError
from vidagent.llm.base import ChatModel, Completion, Message
from vidagent.llm.metered import MeteredChat
from vidagent.memory.video_memory import VideoMemory
from vidagent.tools.base import Evidence


def option(default: Any, low: float, high: float) -> Any:
    """A planner option with the range a face accepts (``build_planner`` refuses a value outside it, so that one
    request cannot hold the model for hours: ``mcts n=1000000``); ``None`` stays allowed where it is the default."""
    return field(default=default, metadata={"range": (low, high)})


@dataclass(frozen=True)
class Needs:
    """What a planner needs for one question.

    ``memory``: every video's temporal memory (segments, captions, speech; False: only each file's
    length). ``tools``: the tools over the video offered to the model, by name (``None``: every tool
    its declaration offers by default, ``Declaration.offered``; ``()``: none); naming a tool that reads the
    object memory lets the session build that memory ahead of the question. ``modules``: AssistGPT's modules,
    each taking any of the sources.
    ``max_sources``: how many sources a question may name (``None``: any number). ``images``: whether
    images are sources it takes. ``llm``: whether it calls a chat model at all (if not, none is loaded).
    ``lines_read``: the most lines of a video's temporal memory it reads, spread evenly over the video whatever
    the question asks (``None``: any of them, chosen by the question or through tools); a glance at a video not
    indexed yet then looks at no more stretches than that (``coverage.glance_every``).
    """

    memory: bool = True
    tools: tuple[str, ...] | None = ()
    modules: bool = False
    max_sources: int | None = 1
    images: bool = False
    llm: bool = True
    knowledge: bool = False
    lines_read: int | None = None

    def check(self, planner: str, kinds: Sequence[str], knowledge: int = 0) -> None:
        """Refuse sources the planner cannot take (``kinds``: each source's kind, in order; ``knowledge``:
        how many knowledge sources come with the question)."""
        if knowledge and not self.knowledge:
            raise PlannerError(f"the {planner} planner offers its model no tools, so it cannot use knowledge "
                               f"sources; use react, mcts, peil or caption_only")
        several = self.max_sources is None or self.max_sources > 1
        if (self.max_sources is not None and len(kinds) > self.max_sources) or ("image" in kinds and not self.images):
            given = f"{len(kinds)} sources" if len(kinds) != 1 else "an image"
            what = "one video" if not several else f"at most {self.max_sources} sources"
            raise PlannerError(f"the {planner} planner answers about {what}, and was given {given}; "
                               f"for images or several sources use the peil planner")


@runtime_checkable
class Planner(Protocol):
    """``name``: how answers and reports call it. ``needs``: what the session builds for it.
    ``run`` is always given a chat model; one whose ``needs.llm`` is False gets a model that refuses
    every call (the session loads none for it)."""

    name: str

    @property
    def needs(self) -> Needs: ...

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel, trace: Trace | None = None) -> Answer: ...


class NoChatModel:
    """The chat model of a planner that declared it needs none: every call is an error naming it."""

    supports_images = False

    def __init__(self, planner: str) -> None:
        self.name = "none"
        self.planner = planner

    def chat(self, messages: Sequence[Message], **_: object) -> Completion:
        raise PlannerError(f"the {self.planner} planner declared it needs no chat model, and called one")


def start(task: Task, trace: Trace | None, toolbox: Toolbox | None = None) -> tuple[Trace, Step]:
    """What every planner does first: open the trace (the caller's, if given) with the task as its
    root, followed by a ``MemoryStep`` of the memory selection (which memories were built for the
    question, with the model's reply) and one of the experience replayed, when the toolbox holds
    them. The step returned is the one the planner's own steps follow."""
    trace = trace if trace is not None else Trace()
    root: Step = trace.add(TaskStep(question=task.question, choices=list(task.choices) if task.choices else None,
                                    sources=[s.id for s in task.sources]))
    selection = toolbox.selection if toolbox is not None else None
    if selection is not None and selection.how != "built":  # a decision was made (not an object memory found)
        root = trace.add(MemoryStep(parent_id=root.id, action="selected", text=selection.describe(),
                                    model_output=selection.model_output, **selection.cost))
    replay = toolbox.replay if toolbox is not None else None
    if replay:
        root = trace.add(MemoryStep(parent_id=root.id, action="replayed", text=replay.describe(),
                                    model_output=replay.rating_output, **replay.cost))
    return trace, root


def metered(llm: ChatModel) -> MeteredChat:
    """The model with its usage counted; a caller's ``MeteredChat`` is kept as it is, so the calls
    the tools make through it count towards the same answer."""
    return llm if isinstance(llm, MeteredChat) else MeteredChat(llm)


def guarded_answer(task: Task, text: str, choice_index: int | None, candidates: Sequence[Candidate] | None,
                   trace: Trace, memories: Sequence[VideoMemory], llm: ChatModel,
                   shapes: ToolShapes | None = None) -> Guarded:
    """An answer through both guards of the video's text: text that gives orders names nothing
    (``orders_guard``, the model shown ``shapes.guard_material_chars`` of ordinary text to choose again), and an
    answer only the video's own text names is decided again without it (``text_guard``); ``Guarded.excluded``
    holds what either set aside."""
    guarded = guard_answer(task, text, choice_index, candidates, trace, memories, llm, shapes)
    if guarded.excluded or guarded.abstained:
        return guarded
    withheld = withhold_text(task, guarded.text, guarded.choice_index, guarded.candidates, trace, memories, llm,
                             shapes)
    if not withheld.withheld:
        return guarded
    return Guarded(withheld.text, withheld.choice_index, withheld.candidates, excluded=(),
                   abstained=withheld.abstained, withheld=withheld.withheld)


@dataclass
class Run:
    """One planner's work on one question: the task and its toolbox, the model with the question's
    usage counted, and the trace opened with the task (``start``); the planner's own steps follow
    ``root``. ``answer`` closes it into the ``Answer`` every planner returns."""

    planner: str
    task: Task
    toolbox: Toolbox
    llm: MeteredChat
    trace: Trace
    root: Step

    @classmethod
    def begin(cls, planner: str, task: Task, toolbox: Toolbox, llm: ChatModel, trace: Trace | None = None) -> "Run":
        model = metered(llm)
        opened, root = start(task, trace, toolbox)
        return cls(planner, task, toolbox, model, opened, root)

    def answer(self, text: str, choice_index: int | None = None, *, step_id: int | None = None,
               likelihood: float | None = None, candidates: Sequence[Candidate] | None = None,
               evidence: Iterable[Evidence] = (), artifacts: Mapping[str, Any] | None = None,
               abstained: str = "") -> Answer:
        """The answer ``text`` (the option ``choice_index``), with its candidates (default: itself
        alone, reached at step ``step_id``), the evidence of the tool calls (duplicates dropped), what
        the planner wants to show besides, the trace and the question's model usage. An answer named
        only by video text that gives orders to a model is replaced first (``orders_guard``). ``abstained``:
        why the planner gives no answer (its guesses stay candidates)."""
        chosen = list(candidates) if candidates is not None else [
            Candidate(text, choice_index, step_id=step_id, likelihood=likelihood)]
        guarded = guarded_answer(self.task, text, choice_index, chosen, self.trace,
                                 list(self.toolbox.memories.values()), self.llm, self.toolbox.shapes)
        return Answer(task=self.task, text=guarded.text, planner=self.planner, choice_index=guarded.choice_index,
                      evidence=dedupe_evidence(list(evidence)), candidates=guarded.candidates or chosen,
                      artifacts=guarded_artifacts(dict(artifacts or {}), guarded), trace=self.trace,
                      usage=self.llm.usage, abstained=abstained or guarded.abstained)


def anytime_answer(planner: str, task: Task, trace: Trace, llm: MeteredChat, why: str,
                   memories: Iterable[VideoMemory] = (), shapes: ToolShapes | None = None) -> Answer:
    """The answer of a planner its budget stopped (``why``): the answer its trace reached most often (a
    search's chains vote; a tie goes to the latest), mapped to an option where it names one, else none;
    recorded as a final answer reached ``how="budget"``, and guarded like every answer (``orders_guard``,
    which then has no call left to choose again with)."""
    reached = []
    for step in trace.of_type(FinalAnswerStep):
        if step.answer.strip():
            index = extract_choice(step.answer, task.choices) if task.choices else None
            reached.append((task.answer_text(step.answer, index), index))
    groups = group_answers(reached, lambda item: answer_key(*item))
    best = max(groups, key=lambda group: (len(group), max(reached.index(item) for item in group)), default=[])
    text, choice = best[-1] if best else ("", None)
    last = trace.last
    step = trace.add(FinalAnswerStep(parent_id=last.id if last else None, answer=text or "(none)", how="budget",
                                     thought=f"({why})"))
    guarded = guarded_answer(task, text, choice, [Candidate(text, choice, step_id=step.id)] if text else [], trace,
                             list(memories), llm, shapes)
    evidence = [item for observation in trace.of_type(ObservationStep) for item in observation.evidence]
    return Answer(task=task, text=guarded.text, planner=planner, choice_index=guarded.choice_index,
                  evidence=dedupe_evidence(evidence), candidates=guarded.candidates or [], trace=trace,
                  artifacts=guarded_artifacts({}, guarded), usage=llm.usage,
                  abstained=guarded.abstained or ("" if guarded.text else f"no answer was reached before {why}"))
