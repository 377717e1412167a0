"""A session holds the loaded models and the library, and answers questions about videos.

Models load on first use and stay loaded for the session's later questions; close the
session (or use it as a context manager) to stop the detector's worker process.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, Union

from vidagent.agent.answer import Answer
from vidagent.agent.evidence_check import check_answer
from vidagent.agent.learning.keeper import Experience, ExperienceOptions, check_mode
from vidagent.agent.planner import Planner, planner_for
from vidagent.agent.planning import NoChatModel, anytime_answer
from vidagent.agent.steps import FinalAnswerStep, MemoryStep, Step, Trace
from vidagent.agent.task import Question, Source, Task
from vidagent.agent.workspace import open_workspace
from vidagent.config import Settings
from vidagent.errors import ModelUnavailableError, PlannerError, VidagentError, VideoError
from vidagent.experience.store import ExperienceStore
from vidagent.knowledge.sources import Knowledge, KnowledgeLimits, open_knowledge
from vidagent.knowledge.spec import KnowledgeSpec, as_spec
from vidagent.llm.base import ChatModel
from vidagent.llm.budget import Budget, BudgetSpentError
from vidagent.llm.metered import MeteredChat
from vidagent.memory.builder import ALL_STAGES, MemoryBuilder
from vidagent.memory.store import Library
from vidagent.memory.stored_video import StoredVideo, is_memory_id
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.suite import Perception
from vidagent.perception.base import VisualQA
from vidagent.tools.refer import ReferredMasks, ReferTools, Segmentation
from vidagent.tools.vqa import DescribedFramesVQA, FrameBudgetVQA, VisionChatVQA
from vidagent.video.image import Image, open_media
from vidagent.video.video import Video

SourceInput = Union[str, Path, Video, Image, StoredVideo]

logger = logging.getLogger(__name__)

class Session:
    """Entry point for indexing videos and asking questions about them."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        llm: ChatModel | None = None,
        perception: Perception | None = None,
        vqa: VisualQA | None = None,
        knowledge: Sequence[str | Path | KnowledgeSpec] = (),
    ) -> None:
        """``knowledge``: sources (files, URLs, ``web``) attached to every question of the session."""
        self.settings = settings or Settings.from_env()
        self.knowledge = tuple(as_spec(item) for item in knowledge)
        self._llm = llm
        self._owns_llm = llm is None
        self._perception = perception
        self._vqa = vqa
        self._owns_vqa = False  # a model built here from settings is closed here; one passed in stays the caller's
        self._library: Library | None = None
        self._experience_store: ExperienceStore | None = None

    # -- lazily built parts ------------------------------------------------------------------
    @property
    def llm(self) -> ChatModel:
        if self._llm is None:
            from vidagent.llm.client import build_llm

            self._llm = build_llm(self.settings)
        return self._llm

    @property
    def embedded_llm(self) -> bool:
        """Whether questions are answered by the embedded local model (the default planner depends on it):
        by the settings until a chat model is built or given, then by that model's backend."""
        if self._llm is None:
            return self.settings.llm.backend == "local"
        from vidagent.llm.local import LocalGGUFBackend

        return isinstance(getattr(self._llm, "backend", None), LocalGGUFBackend)

    @property
    def perception(self) -> Perception:
        if self._perception is None:
            self._perception = Perception.from_settings(self.settings)
        return self._perception

    @property
    def library(self) -> Library:
        if self._library is None:
            self._library = Library(self.settings.library_path)
        return self._library

    @property
    def experience_store(self) -> ExperienceStore:
        """The experience kept across questions (semantic and procedural memory, the Learner's traces),
        in the library database."""
        if self._experience_store is None:
            self._experience_store = ExperienceStore(self.settings.library_path, self.perception.embedder)
        return self._experience_store

    def vqa(self, llm: ChatModel) -> VisualQA:
        """Visual question answering for a question asked with ``llm``: the one given to the session, a
        configured local model (built once), else ``llm`` itself looking at the frames when it can, or
        reading their descriptions; held to the frames of the question's budget when ``llm`` has one."""
        meter = getattr(llm, "meter", None)
        chosen = self._vqa_for(llm)
        if meter is not None and meter.budget.frames is not None:  # the question's frame budget holds it
            return FrameBudgetVQA(chosen, meter)
        return chosen

    def _vqa_for(self, llm: ChatModel) -> VisualQA:
        if self._vqa is None and self.settings.backends.vqa:
            from vidagent.perception.backends import build_backend

            self._vqa = build_backend("vqa", self.settings.backends.vqa, self.settings)
            self._owns_vqa = True
        if self._vqa is not None:
            return self._vqa
        if llm.supports_images:
            return VisionChatVQA(llm, self.settings.tools.vision_frames)
        return DescribedFramesVQA(self.perception.describer, llm)

    # -- work --------------------------------------------------------------------------------
    def builder(self) -> MemoryBuilder:
        return MemoryBuilder(self.library, self.perception, self.settings)

    def index(self, video: str | Path | Video, stages: Sequence[str] = ALL_STAGES, *,
              progress: bool = True) -> VideoMemory:
        """Build (or reuse) the given memory stages of a video (default: all of them)."""
        handle = video if isinstance(video, Video) else Video(video)
        return self.builder().build(handle, stages, progress=progress)

    def ask(
        self,
        sources: SourceInput | Sequence[SourceInput],
        question: str | Question,
        choices: Sequence[str] | None = None,
        *,
        planner: str | Planner | None = None,
        planner_options: Mapping[str, Any] | None = None,
        on_step: Callable[[Step], None] | None = None,
        progress: bool = False,
        experience: str | None = None,
        knowledge: Sequence[str | Path | KnowledgeSpec] = (),
        budget: Budget | str | None = None,
        check: bool | None = None,
        glance: float | None = None,
    ) -> Answer:
        """Answer a question about a video, or about several videos and images (indexing videos first if needed).

        ``question`` is its text (with ``choices``, its options), or a ``Question`` that also carries
        what an evaluation knows of it (id, whether it wants a time, a known answer, its type).
        ``sources`` is one path (or ``Video``/``Image``, or a memory's id such as ``egoschema:<q_uid>``)
        or a sequence of them; every one is opened before any work, and one that cannot be read stops
        the question with an error naming it. ``planner`` is a registered name (``react``, ``mcts``,
        ``traveler``, ``peil``, ``caption_only``, ``random``, or ``package.module:Class``) built with
        ``planner_options``, or a planner object; ``None`` picks, for one video, ``caption_only`` reading
        five lines with its options scored when the chat model is the embedded one (``react`` with an
        endpoint), and ``peil`` for images or several sources. A planner takes only the sources its ``needs`` name (only
        ``peil`` takes images or several). ``on_step`` is called with each step of the trace as soon
        as it is made. ``experience`` (default: the settings') chooses the memory
        across questions that is replayed before the planner runs and kept after it answers:
        ``none``, ``semantic`` (validated answers about the same video), ``procedural`` (workflows
        that worked for questions of the same type) or ``all``; workflows are kept by the question's
        ``task_type`` (empty: told from the question). ``knowledge`` attaches knowledge sources to this
        question, after the session's (DoraemonGPT's knowledge tools): a table (CSV, TSV, XLSX, Parquet,
        SQLite), a document (PDF, Markdown, HTML, text), an http(s) URL of one, or ``web`` (the
        configured web search); ``PATH#description`` gives the line the planner reads about it. Each
        is read before the question starts; react, mcts and peil offer it to their model. ``budget``
        (a ``Budget`` or ``"calls=N,tokens=T,seconds=S,frames=F"``) bounds the question's model work, every call
        counted (memory selection, tools and planner alike): once it is spent the planner stops and the
        answer is the last one it reached (``artifacts["budget"]`` says what was spent and whether it stopped).
        ``check`` (default: the settings') has the model re-read the evidence the answer cites and say which
        of it supports the answer (``agent.evidence_check``); an answer none of it supports abstains, its
        guess kept. ``glance`` (seconds): a video not indexed yet is answered at once from a partial memory,
        one frame described every ``glance`` seconds, refined where the tools read (``vidagent.memory.glance``);
        ``artifacts["coverage"]`` then says, per video, what the answer saw (``index`` completes it later).
        ``None`` (the default) glances every 20 s at a video of at least ``settings.glance_after_s`` seconds
        (120) and indexes a shorter one whole; ``0`` always indexes whole first.
        """
        if isinstance(question, Question) and choices is not None:
            raise TypeError("give the options inside the Question")
        asked = question if isinstance(question, Question) else Question(question, tuple(choices) if choices else None)
        if planner_options and not isinstance(planner, (str, type(None))):
            raise PlannerError("planner_options go with a planner's name; set them on the planner object instead")
        handles = open_sources(sources, lambda: self.library)
        kinds = [_kind(handle) for handle in handles]
        chosen = planner if isinstance(planner, Planner) else planner_for(planner, planner_options, kinds,
                                                                          embedded=self.embedded_llm)
        needs = chosen.needs
        attached = [*self.knowledge, *(as_spec(item) for item in knowledge)]
        needs.check(chosen.name, kinds, knowledge=len(attached))
        sources = self.open_knowledge(attached)
        task = asked.about(tuple(_source(h) for h in handles))
        limit = Budget.parse(budget) if isinstance(budget, str) else budget
        llm = MeteredChat(self.llm if needs.llm else NoChatModel(chosen.name), budget=limit)
        keeper = self._experience(check_mode(experience or self.settings.experience)) if needs.llm else None
        key = "+".join(sorted(source.id for source in task.sources))  # whose experience: these sources'
        trace = Trace(on_step)
        memories: Mapping[str, VideoMemory] = {}
        try:  # a budget spent anywhere (replay, memory selection, tools, planner) ends in the answer it reached
            replay = keeper.recall(task, chosen.name, key, llm) if keeper else None
            with open_workspace(needs, asked.text, handles, self, llm, knowledge=sources, replay=replay,
                                progress=progress, glance=glance) as toolbox:
                memories = toolbox.memories
                answer = chosen.run(task, toolbox, llm, trace)
        except BudgetSpentError as spent:
            answer = anytime_answer(chosen.name, task, trace, llm, str(spent), memories.values())
        coverage = {video_id: memory.coverage.report() for video_id, memory in memories.items() if memory.coverage}
        if coverage:
            answer.artifacts["coverage"] = coverage
        if needs.llm and (self.settings.check if check is None else check):
            answer = check_answer(answer, llm)
        if llm.meter is not None:
            answer.artifacts["budget"] = llm.meter.to_dict() | {"stopped": any(
                s.how == "budget" for s in answer.trace.of_type(FinalAnswerStep))}
        if keeper:
            _learn(keeper, task, answer, chosen.name, key, llm)
        return answer

    def refer_object(self, video: str | Path | Video, expression: str, *, target: str | Path | None = None,
                     use_model: bool = True, progress: bool = False,
                     on_overlay: Callable[[float, float], None] | None = None) -> Segmentation:
        """Referring video object segmentation: the one object of ``video``'s object memory that ``expression``
        ("the black dog", "the second cup from the left", "the person who sits down") refers to, with its
        mask in every frame the objects stage sampled it in, saved as PNG images, a manifest and a video with
        the mask drawn over it, in one folder (``target``, a new or empty folder; default: the library's
        artifacts folder, named by content). The object memory is built first when missing. The expression
        is read without a model where it can be; the chat model reads what it cannot (``use_model=False``:
        never; such an expression is refused). An expression no object fits raises a ``ToolInputError``
        naming the objects there are. ``progress`` shows the memory's build; ``on_overlay(done_s, total_s)``
        follows the overlay video's writing."""
        tools = self._refer_tools(video, use_model, progress)
        return tools.segment(expression, target=Path(target).expanduser() if target is not None else None,
                             progress=on_overlay)

    def refer_masks(self, video: str | Path | Video, expression: str, times: Sequence[float], *,
                    use_model: bool = True, progress: bool = False) -> ReferredMasks:
        """The masks at ``times`` (seconds) of the object ``expression`` refers to, as ``refer_object`` finds it,
        with nothing saved: what an evaluation (Ref-YouTube-VOS's J&F) scores."""
        tools = self._refer_tools(video, use_model, progress)
        return tools.masks_at(tools.resolve(expression), times)

    def _refer_tools(self, video: str | Path | Video, use_model: bool, progress: bool) -> ReferTools:
        handle = video if isinstance(video, Video) else Video(video)
        memory = self.builder().build(handle, ["objects"], progress=progress)
        llm: ChatModel | None = None
        if use_model:
            try:
                llm = self.llm  # loaded only if the expression needs reading
            except ModelUnavailableError as error:
                logger.info("refer_object without a chat model: %s", error)
        return ReferTools(memory, self.settings.artifacts_dir, llm)

    def open_knowledge(self, items: Sequence[str | Path | KnowledgeSpec]) -> list[Knowledge]:
        """Knowledge sources read and checked (tables loaded, documents embedded, both cached by content);
        the first that cannot be read raises a ``KnowledgeError`` naming it."""
        if not items:
            return []
        limits = KnowledgeLimits(self.settings.knowledge_dir, self.settings.knowledge_max_mib << 20,
                                 self.settings.web_search)
        return open_knowledge(items, self.perception.embedder, limits)

    def _experience(self, mode: str) -> Experience | None:
        if mode == "none":
            return None
        return Experience(self.experience_store, ExperienceOptions(mode, self.settings.experience_scope))

    def close(self) -> None:
        """Stop the detector's worker, free the chat model and its cache, close the library."""
        if self._perception is not None:
            self._perception.close()
        close_vqa = getattr(self._vqa, "close", None)
        if self._owns_vqa and callable(close_vqa):
            close_vqa()
            self._vqa, self._owns_vqa = None, False
        close_llm = getattr(self._llm, "close", None)
        if self._owns_llm and callable(close_llm):  # a model the caller passed in stays the caller's
            close_llm()
            self._llm = None
        if self._library is not None:
            self._library.close()
        if self._experience_store is not None:
            self._experience_store.close()
            self._experience_store = None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_sources(sources: SourceInput | Sequence[SourceInput],
                 library: Callable[[], Library] | None = None) -> list[Video | Image | StoredVideo]:
    """Open every source before any work; the first that cannot be read stops it, named. The same
    file given twice (by content) is an error too: each source is one ``visual[i]``. A source may be
    a memory without a file, named by its id (``egoschema:<q_uid>``), when the library (``library()``,
    opened only for such a name) holds it."""
    given = [sources] if isinstance(sources, (str, Path, Video, Image, StoredVideo)) else list(sources)
    if not given:
        raise VideoError("no video or image was given")
    handles: list[Video | Image | StoredVideo] = []
    seen: dict[str, Path | str] = {}
    for item in given:
        handle = item if isinstance(item, (Video, Image, StoredVideo)) else _open_one(item, library)
        if handle.content_hash in seen:
            raise VideoError(f"{handle.path}: the same file as {seen[handle.content_hash]}; give each source once")
        seen[handle.content_hash] = handle.path
        handles.append(handle)
    return handles


def _learn(keeper: Experience, task: Task, answer: Answer, planner: str, key: str, llm: MeteredChat) -> None:
    """Keep what the answer teaches; a failure to (a model that went away) costs the memory, not the answer."""
    try:
        keeper.learn(task, answer, planner, key, llm)
    except VidagentError as error:
        logger.warning("experience not kept for %r: %s", task.question, error)
        last = answer.trace.last
        answer.trace.add(MemoryStep(parent_id=last.id if last else None, action="not kept", text=str(error)))


def _open_one(item: str | Path, library_of: Callable[[], Library] | None) -> Video | Image | StoredVideo:
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


def _kind(handle: Video | Image | StoredVideo) -> str:
    return "image" if isinstance(handle, Image) else "video"


def _source(handle: Video | Image | StoredVideo) -> Source:
    return Source(handle.content_hash, _kind(handle), str(handle.path))
