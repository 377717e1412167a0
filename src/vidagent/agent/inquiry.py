"""A question's life as explicit stages, each a small function over one ``Inquiry``.

``Session.ask`` builds the ``Inquiry`` (what was asked, and how) and runs ``STAGES`` in order; each stage
reads what the earlier ones made and adds its part::

    open_the_sources   every source opened before any work (a bad one stops the question, named)
    choose_planner     the planner named, or the default for these sources (``planner_for``)
    check_needs        the planner takes these sources and knowledge; the knowledge is read
    prepare            the task, the metered chat model under the question's budget, the experience keeper
    run_guarded        recall experience, then run the planner in its workspace; a budget spent in
                       either ends in the answer the planner had reached (``anytime_answer``)
    report_coverage    what a glanced memory let the answer see (``artifacts["coverage"]``)
    judge_sight        a question of a kind the memory holds no evidence of abstains (``agent.memory_sight``)
    check_evidence     the model re-reads the evidence the answer cites (``agent.evidence_check``)
    rate_open_answer   an open answer gets the model's P(yes) that it is right (``agent.answer_rating``)
    report_budget      what the question spent (``artifacts["budget"]``)
    calibrate          the planner's measure mapped to the probability of being right (``agent.calibration``)
    judge_confidence   below the confidence threshold set, the answer abstains (``agent.confidence``)
    learn              what the answer teaches is kept across questions

The answer's own guards (``orders_guard``, ``text_guard``) run inside the planner, when it finishes.
The session provides only resources (settings, library, models, experience store): ``AskResources``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, Union

from vidagent.agent.answer import Answer
from vidagent.agent.answer_rating import needs_rating, rate_answer
from vidagent.agent.calibration import default_calibration, measure_of
from vidagent.agent.confidence import below_threshold
from vidagent.agent.evidence_check import check_answer
from vidagent.agent.learning.keeper import Experience, ExperienceOptions, check_mode
from vidagent.agent.memory_sight import unseen_reason
from vidagent.agent.planner import Planner, planner_for
from vidagent.agent.planning import NoChatModel, anytime_answer
from vidagent.agent.steps import FinalAnswerStep, MemoryStep, Step, Trace
from vidagent.agent.task import Question, Source, Task
from vidagent.agent.workspace import Handle, Resources, open_workspace
from vidagent.config import Settings
from vidagent.errors import PlannerError, VidagentError, VideoError
from vidagent.experience.replay import Replay
from vidagent.knowledge.sources import Knowledge
from vidagent.knowledge.spec import KnowledgeSpec, as_spec
from vidagent.llm.base import ChatModel
from vidagent.llm.budget import Budget, BudgetSpentError
from vidagent.llm.metered import MeteredChat
from vidagent.memory.store import Library
from vidagent.memory.stored_video import StoredVideo, is_memory_id
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.base import FrameDescriber, VisualQA
from vidagent.tools.vqa import DescribedFramesVQA, FrameBudgetVQA, VisionChatVQA
from vidagent.video.image import Image, open_media
from vidagent.video.video import Video

SourceInput = Union[str, Path, Video, Image, StoredVideo]

logger = logging.getLogger(__name__)


class AskResources(Resources, Protocol):
    """What the stages draw on: the workspace's resources, the chat model, and the session's knowledge."""

    knowledge: tuple[KnowledgeSpec, ...]

    @property
    def llm(self) -> ChatModel: ...

    @property
    def embedded_llm(self) -> bool: ...

    def open_knowledge(self, items: Sequence[str | Path | KnowledgeSpec]) -> list[Knowledge]: ...


@dataclass
class Inquiry:
    """One question on its way through the stages: what was asked and how (given), then what each stage
    made (set by the stage; reading one before its stage ran raises ``AttributeError``)."""

    sources: SourceInput | Sequence[SourceInput]
    asked: Question
    planner_asked: str | Planner | None = None
    planner_options: Mapping[str, Any] | None = None
    on_step: Callable[[Step], None] | None = None
    progress: bool = False
    experience: str | None = None
    knowledge: Sequence[str | Path | KnowledgeSpec] = ()
    budget: Budget | str | None = None
    check: bool | None = None
    glance: float | None = None
    # made by the stages
    handles: list[Handle] = field(init=False, repr=False)
    kinds: list[str] = field(init=False, repr=False)
    planner: Planner = field(init=False, repr=False)
    opened_knowledge: list[Knowledge] = field(init=False, repr=False)
    task: Task = field(init=False, repr=False)
    llm: MeteredChat = field(init=False, repr=False)
    keeper: Experience | None = field(init=False, repr=False)
    key: str = field(init=False, repr=False)  # whose experience: these sources'
    trace: Trace = field(init=False, repr=False)
    replay: Replay | None = field(default=None, init=False, repr=False)
    memories: Mapping[str, VideoMemory] = field(default_factory=dict, init=False, repr=False)
    answer: Answer = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.planner_options and not isinstance(self.planner_asked, (str, type(None))):
            raise PlannerError("planner_options go with a planner's name; set them on the planner object instead")


def asked_question(question: str | Question, choices: Sequence[str] | None) -> Question:
    """The question as one value: its text and ``choices``, or a ``Question`` that carries its options."""
    if isinstance(question, Question):
        if choices is not None:
            raise TypeError("give the options inside the Question")
        return question
    return Question(question, tuple(choices) if choices else None)


# -- the stages, in order --------------------------------------------------------------------
def open_the_sources(inquiry: Inquiry, resources: AskResources) -> None:
    inquiry.handles = open_sources(inquiry.sources, lambda: resources.library)
    inquiry.kinds = [_kind(handle) for handle in inquiry.handles]


def choose_planner(inquiry: Inquiry, resources: AskResources) -> None:
    asked = inquiry.planner_asked
    inquiry.planner = asked if isinstance(asked, Planner) else planner_for(
        asked, inquiry.planner_options, inquiry.kinds, embedded=resources.embedded_llm)


def check_needs(inquiry: Inquiry, resources: AskResources) -> None:
    """The planner takes these sources and this much knowledge (the session's, then the question's), read here."""
    attached = [*resources.knowledge, *(as_spec(item) for item in inquiry.knowledge)]
    inquiry.planner.needs.check(inquiry.planner.name, inquiry.kinds, knowledge=len(attached))
    inquiry.opened_knowledge = resources.open_knowledge(attached)


def prepare(inquiry: Inquiry, resources: AskResources) -> None:
    """The task, the chat model metered under the question's budget (none when the planner needs none), the
    experience keeper and the trace."""
    needs = inquiry.planner.needs
    inquiry.task = inquiry.asked.about(tuple(_source(handle) for handle in inquiry.handles))
    limit = Budget.parse(inquiry.budget) if isinstance(inquiry.budget, str) else inquiry.budget
    if needs.llm:  # the model loads while the sources' memories are opened (a glance, an index)
        warm_up = getattr(resources.llm, "warm_up", None)
        if callable(warm_up):
            warm_up()
    inquiry.llm = MeteredChat(resources.llm if needs.llm else NoChatModel(inquiry.planner.name), budget=limit)
    mode = check_mode(inquiry.experience or resources.settings.experience) if needs.llm else "none"
    inquiry.keeper = keeper_for(mode, resources)
    inquiry.key = "+".join(sorted(source.id for source in inquiry.task.sources))
    inquiry.trace = Trace(inquiry.on_step)


def run_guarded(inquiry: Inquiry, resources: AskResources) -> None:
    """Recall, then run; a budget spent anywhere (replay, memory selection, tools, planner) ends in the
    answer the planner had reached."""
    try:
        recall_experience(inquiry, resources)
        run_planner(inquiry, resources)
    except BudgetSpentError as spent:
        inquiry.answer = anytime_answer(inquiry.planner.name, inquiry.task, inquiry.trace, inquiry.llm, str(spent),
                                        inquiry.memories.values(), resources.settings.tools)


def recall_experience(inquiry: Inquiry, resources: AskResources) -> None:
    if inquiry.keeper:
        inquiry.replay = inquiry.keeper.recall(inquiry.task, inquiry.planner.name, inquiry.key, inquiry.llm)


def run_planner(inquiry: Inquiry, resources: AskResources) -> None:
    """The planner's run in the question's workspace (memories built or glanced, tools over them)."""
    with open_workspace(inquiry.planner.needs, inquiry.asked.text, inquiry.handles, resources, inquiry.llm,
                        knowledge=inquiry.opened_knowledge, replay=inquiry.replay, progress=inquiry.progress,
                        glance=inquiry.glance) as toolbox:
        inquiry.memories = toolbox.memories
        inquiry.answer = inquiry.planner.run(inquiry.task, toolbox, inquiry.llm, inquiry.trace)


def report_coverage(inquiry: Inquiry, resources: AskResources) -> None:
    """Per video answered from a partial memory, what the answer saw."""
    coverage = {video_id: memory.coverage.report() for video_id, memory in inquiry.memories.items()
                if memory.coverage}
    if coverage:
        inquiry.answer.artifacts["coverage"] = coverage


def judge_sight(inquiry: Inquiry, resources: AskResources) -> None:
    """Where no memory the question read holds the kind of evidence it asks for, the answer abstains saying so."""
    reason = unseen_reason(inquiry.task.question, inquiry.memories.values())
    if reason and not inquiry.answer.abstained:
        inquiry.answer.abstained = reason


def check_evidence(inquiry: Inquiry, resources: AskResources) -> None:
    """The evidence check, where the planner has a chat model and the question (else the settings) asks for it."""
    wanted = resources.settings.check if inquiry.check is None else inquiry.check
    if inquiry.planner.needs.llm and wanted:
        inquiry.answer = check_answer(inquiry.answer, inquiry.llm, resources.settings.tools)


def rate_open_answer(inquiry: Inquiry, resources: AskResources) -> None:
    """An open answer, which no planner measures, rated by the model (one short call) where it gives
    log-probabilities."""
    if inquiry.planner.needs.llm and needs_rating(inquiry.answer):
        rate_answer(inquiry.answer, inquiry.llm, resources.settings.tools)


def report_budget(inquiry: Inquiry, resources: AskResources) -> None:
    """What the question spent, and whether its budget stopped the planner."""
    meter = inquiry.llm.meter
    if meter is not None:
        stopped = any(step.how == "budget" for step in inquiry.answer.trace.of_type(FinalAnswerStep))
        inquiry.answer.artifacts["budget"] = meter.to_dict() | {"stopped": stopped}


def calibrate(inquiry: Inquiry, resources: AskResources) -> None:
    """The answer's measure mapped to the probability of being right, where a map was fitted for its planner;
    which of the two the confidence is, is said in ``artifacts["confidence"]``."""
    answer = inquiry.answer
    if inquiry.memories:
        answer.artifacts["memory_captioned"] = all(memory.captioned for memory in inquiry.memories.values())
    measure = measure_of(answer.artifacts, answer.choice_index, answer.question, answer.task.choices or (),
                         [item.text for item in answer.evidence], answer.text)
    answer.calibrated = default_calibration().probability(answer.planner, measure, inquiry.llm.name)
    # the measured value itself is the answer's ``measured_confidence``: said once, beside ``confidence``
    answer.artifacts["confidence"] = {"calibrated": answer.calibrated, "measure": measure.kind if measure else None}


def judge_confidence(inquiry: Inquiry, resources: AskResources) -> None:
    """Below the threshold the settings set (``min_confidence``), the answer abstains with the reason, its guess kept."""
    reason = below_threshold(inquiry.answer.confidence, resources.settings.min_confidence)
    if reason and not inquiry.answer.abstained:
        inquiry.answer.abstained = reason


def learn(inquiry: Inquiry, resources: AskResources) -> None:
    """Keep what the answer teaches; a failure to (a model that went away) costs the memory, not the answer."""
    if not inquiry.keeper:
        return
    task, answer = inquiry.task, inquiry.answer
    try:
        inquiry.keeper.learn(task, answer, inquiry.planner.name, inquiry.key, inquiry.llm)
    except VidagentError as error:
        logger.warning("experience not kept for %r: %s", task.question, error)
        last = answer.trace.last
        answer.trace.add(MemoryStep(parent_id=last.id if last else None, action="not kept", text=str(error)))


Stage = Callable[[Inquiry, AskResources], None]
STAGES: tuple[Stage, ...] = (open_the_sources, choose_planner, check_needs, prepare, run_guarded, report_coverage,
                             judge_sight, check_evidence, rate_open_answer, report_budget, calibrate,
                             judge_confidence, learn)


def answer_inquiry(inquiry: Inquiry, resources: AskResources, stages: Sequence[Stage] = STAGES) -> Answer:
    """Run ``stages`` over ``inquiry`` in order; the answer is what they made of it."""
    for stage in stages:
        stage(inquiry, resources)
    return inquiry.answer


# -- what the stages use ------------------------------------------------------------------------
def keeper_for(mode: str, resources: Resources) -> Experience | None:
    """The memory across questions for ``mode`` (``none``: no keeper, and no experience store opened)."""
    if mode == "none":
        return None
    return Experience(resources.experience_store, ExperienceOptions(mode, resources.settings.experience_scope))


def choose_vqa(llm: ChatModel, configured: VisualQA | None, settings: Settings,
               describer: Callable[[], FrameDescriber]) -> VisualQA:
    """Visual question answering for a question asked with ``llm``: the ``configured`` model when there is one,
    else ``llm`` itself looking at the frames when it can, or reading their descriptions (``describer()``,
    asked for only then); held to the frames of the question's budget when ``llm`` is metered under one."""
    if configured is not None:
        chosen = configured
    elif llm.supports_images:
        chosen = VisionChatVQA(llm, settings.tools.vision_frames)
    else:
        chosen = DescribedFramesVQA(describer(), llm)
    meter = getattr(llm, "meter", None)
    if meter is not None and meter.budget.frames is not None:
        return FrameBudgetVQA(chosen, meter)
    return chosen


def open_sources(sources: SourceInput | Sequence[SourceInput],
                 library: Callable[[], Library] | None = None) -> list[Handle]:
    """Open every source before any work; the first that cannot be read stops it, named. The same
    file given twice (by content) is an error too: each source is one ``visual[i]``. A source may be
    a memory without a file, named by its id (``egoschema:<q_uid>``), when the library (``library()``,
    opened only for such a name) holds it."""
    given = [sources] if isinstance(sources, (str, Path, Video, Image, StoredVideo)) else list(sources)
    if not given:
        raise VideoError("no video or image was given")
    handles: list[Handle] = []
    seen: dict[str, Path | str] = {}
    for item in given:
        handle = item if isinstance(item, (Video, Image, StoredVideo)) else _open_one(item, library)
        if handle.content_hash in seen:
            raise VideoError(f"{handle.path}: the same file as {seen[handle.content_hash]}; give each source once")
        seen[handle.content_hash] = handle.path
        handles.append(handle)
    return handles


def _open_one(item: str | Path, library_of: Callable[[], Library] | None) -> Handle:
    """A file, or a stored memory named by its id (a name that is no file and has a namespace)."""
    text = str(item)
    if library_of is not None and is_memory_id(text) and not Path(text).expanduser().exists():
        library = library_of()
        stored = library.stored_video(text)
        if stored is None:
            raise VideoError(f"{text}: no such file, and no memory with this id in {library.path} "
                             f"(import captions with `vidagent import`)")
        return stored
    return open_media(item)


def _kind(handle: Handle) -> str:
    return "image" if isinstance(handle, Image) else "video"


def _source(handle: Handle) -> Source:
    return Source(handle.content_hash, _kind(handle), str(handle.path))
