"""A session holds the loaded models and the library, and answers questions about videos.

Models load on first use and stay loaded for the session's later questions; close the
session (or use it as a context manager) to stop the detector's worker process.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, Union

from vidagent.agent.answer import Answer
from vidagent.agent.memory_selection import MemorySelection, select_memory
from vidagent.agent.planner import Planner, build_planner
from vidagent.agent.steps import MemoryStep, Step, Trace
from vidagent.agent.task import Reference, Source, Task
from vidagent.agent.toolbox import Toolbox, VideoContext
from vidagent.config import Settings
from vidagent.errors import MemoryStoreError, PlannerError, VidagentError, VideoError
from vidagent.agent.experience import Experience, ExperienceOptions, check_mode
from vidagent.experience.store import ExperienceStore
from vidagent.llm.base import ChatModel
from vidagent.llm.metered import MeteredChat
from vidagent.memory.builder import ALL_STAGES, TEMPORAL_STAGES, MemoryBuilder
from vidagent.memory.sql import ReadOnlyQueries
from vidagent.memory.store import Library
from vidagent.memory.stored_video import StoredVideo, is_memory_id
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.suite import Perception
from vidagent.tools.vqa import DescribedFramesVQA, VisionChatVQA, VisualQA
from vidagent.tools.assist import AssistModules
from vidagent.tools.base import Tool
from vidagent.tools.frames import FrameTools
from vidagent.tools.sql_agent import OBJECT_KIND, SUBTASK_KINDS, SQLTools
from vidagent.tools.media import Media, image_media, video_media
from vidagent.tools.temporal import TemporalTools
from vidagent.video.image import Image, open_media
from vidagent.video.video import Video

SourceInput = Union[str, Path, Video, Image, StoredVideo]

logger = logging.getLogger(__name__)

SQL_TOOLS = ("object_memory_querying",) + SUBTASK_KINDS  # the tools that read the object memory


class Session:
    """Entry point for indexing videos and asking questions about them."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        llm: ChatModel | None = None,
        perception: Perception | None = None,
        vqa: VisualQA | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env()
        self._llm = llm
        self._owns_llm = llm is None
        self._perception = perception
        self._vqa = vqa
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

    @property
    def vqa(self) -> VisualQA:
        if self._vqa is None:
            if self.settings.backends.vqa:
                from vidagent.perception.hf import build_backend

                self._vqa = build_backend("vqa", self.settings.backends.vqa)
            elif self.llm.supports_images:
                self._vqa = VisionChatVQA()
            else:
                self._vqa = DescribedFramesVQA(self.perception.describer)
        return self._vqa

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
        question: str,
        choices: Sequence[str] | None = None,
        *,
        planner: str | Planner = "react",
        planner_options: Mapping[str, Any] | None = None,
        task_id: str = "",
        wants_time: bool = False,
        reference: Reference | None = None,
        on_step: Callable[[Step], None] | None = None,
        progress: bool = False,
        experience: str | None = None,
        task_type: str = "",
    ) -> Answer:
        """Answer a question about a video, or about several videos and images (indexing videos first if needed).

        ``sources`` is one path (or ``Video``/``Image``) or a sequence of them; every one is opened
        before any work, and one that cannot be read stops the question with an error naming it.
        Only planners that take several sources (``peil``) accept images or more than one source.
        ``planner`` is a registered name (``react``, ``mcts``, ``traveler``, ``peil``,
        ``caption_only``, ``random``, or ``package.module:Class``) built with ``planner_options``,
        or a planner object. ``reference`` is a known answer for planners that learn from it
        (PEIL's Learner); no planner reads it to answer. ``on_step`` is called with each step of
        the trace as soon as it is made. ``experience`` (default: the settings') chooses the memory
        across questions that is replayed before the planner runs and kept after it answers:
        ``none``, ``semantic`` (validated answers about the same video), ``procedural`` (workflows
        that worked for questions of the same type) or ``all``. ``task_type`` is the question's type
        as its dataset labels it (experience keeps workflows by it; empty: told from the question).
        """
        if planner_options and not isinstance(planner, str):
            raise PlannerError("planner_options go with a planner's name; set them on the planner object instead")
        chosen = build_planner(planner, planner_options) if isinstance(planner, str) else planner
        handles = open_sources(sources, lambda: self.library)
        task = Task(question, tuple(choices) if choices else None, tuple(_source(h) for h in handles), id=task_id,
                    wants_time=wants_time, reference=reference, task_type=task_type)
        trace = Trace(on_step)
        mode = check_mode(experience or self.settings.experience)
        if getattr(chosen, "multi_source", False):
            return self._ask_sources(chosen, task, handles, trace, progress, mode)
        if len(handles) != 1 or isinstance(handles[0], Image):
            given = f"{len(handles)} sources" if len(handles) != 1 else "an image"
            raise PlannerError(f"the {chosen.name} planner answers about one video, and was given {given}; "
                               f"for images or several sources use the peil planner")
        handle = handles[0]
        if not chosen.reads_memory:
            context = VideoContext(handle.content_hash, handle.duration_s, 0, self.settings.segment_seconds)
            return chosen.run(task, Toolbox({}, videos=(context,)), self.llm if chosen.uses_llm else None, trace)
        llm = MeteredChat(self.llm)
        builder = self.builder()
        stages = list(TEMPORAL_STAGES)
        reads_objects = chosen.tools is None or any(name in SQL_TOOLS for name in chosen.tools)
        selection = self._wants_objects(builder, handle, llm, question) if reads_objects else None
        if selection is not None and selection.objects:
            stages.append("objects")
        memory = self._memory(builder, handle, stages, progress)
        with ReadOnlyQueries(self.settings.library_path, memory.video_id) as queries:
            tools = self._tools(memory, llm, queries, lambda: self._memory(builder, handle, ["objects"], progress)) \
                if chosen.tools != () else []
            keeper = self._experience(mode) if chosen.uses_llm else None
            replay = keeper.recall(task, chosen.name, memory.video_id, llm) if keeper else None
            toolbox = Toolbox.of(tools, videos=(self._context(memory),), memories={memory.video_id: memory},
                                 memory_note=self._memory_note([memory]),
                                 context_tokens=self.settings.llm.context_tokens,
                                 experience_scope=self.settings.experience_scope, replay=replay,
                                 sees_frames=getattr(self.vqa, "sees_frames", True),
                                 selection=selection, withheld=_withheld(memory)).select(chosen.tools)
            answer = chosen.run(task, toolbox, llm, trace)
        if keeper:
            _learn(keeper, task, answer, chosen.name, memory.video_id, llm)
        return answer

    def _ask_sources(self, chosen: Planner, task: Task, handles: Sequence[Video | Image], trace: Trace,
                     progress: bool, mode: str) -> Answer:
        """A planner that takes several sources: each video's temporal memory, each image's pixels,
        and AssistGPT's modules over them."""
        llm = MeteredChat(self.llm)
        builder = self.builder()
        media: list[Media] = []
        memories: dict[str, VideoMemory] = {}
        for handle in handles:
            if not isinstance(handle, Image):
                memory = self._memory(builder, handle, TEMPORAL_STAGES, progress)
                memories[memory.video_id] = memory
                media.append(video_media(memory))
            else:
                media.append(image_media(handle))
        perception = self.perception
        modules = AssistModules(perception.describer, perception.reader, perception.detector, perception.embedder,
                                self.vqa, llm, grounder=perception.grounder).tools()
        keeper = self._experience(mode)
        sources_key = "+".join(sorted(source.id for source in task.sources))
        replay = keeper.recall(task, chosen.name, sources_key, llm) if keeper else None
        toolbox = Toolbox({}, videos=tuple(self._context(m) for m in memories.values()), memories=memories,
                          memory_note=self._memory_note(list(memories.values())),
                          context_tokens=self.settings.llm.context_tokens, sources=tuple(media),
                          modules={module.name: module for module in modules}, describer=perception.describer,
                          examples=self.experience_store,  # PEIL's own example bank: its option examples=0 is off
                          experience_scope=self.settings.experience_scope,
                          examples_scope=self.settings.examples_scope, replay=replay)
        answer = chosen.run(task, toolbox, llm, trace)
        if keeper:
            _learn(keeper, task, answer, chosen.name, sources_key, llm)
        return answer

    def _experience(self, mode: str) -> Experience | None:
        if mode == "none":
            return None
        return Experience(self.experience_store, ExperienceOptions(mode, self.settings.experience_scope))

    def _context(self, memory: VideoMemory) -> VideoContext:
        return VideoContext(memory.video_id, memory.video.duration_s, memory.segment_count,
                            memory.segment_seconds or self.settings.segment_seconds)

    def _memory(self, builder: MemoryBuilder, handle: Video | StoredVideo, stages: Sequence[str],
                progress: bool) -> VideoMemory:
        """A video's memory with ``stages`` built; a memory without a file is read as it was imported
        (it has segments only: asking it for another stage is an error that says so)."""
        if isinstance(handle, Video):
            return builder.build(handle, stages, progress=progress)
        memory = VideoMemory(handle, self.library)
        lacking = [stage for stage in stages if stage not in ("frames", "speech") and stage not in memory.stages]
        if lacking:
            captioner = handle.provenance.captioner if handle.provenance else "captions"
            raise MemoryStoreError(f"{handle.content_hash} was imported from {captioner} and has no "
                                   f"{' or '.join(lacking)} memory (no video file to build it from)")
        return memory

    def _memory_note(self, memories: Sequence[VideoMemory]) -> str:
        """What the planners are told the memory's descriptions are: the describer's note, or an imported
        memory's own (the notes of several kinds of memory, one after the other)."""
        notes: list[str] = []
        for memory in memories:
            provenance = getattr(memory.video, "provenance", None)
            note = provenance.note if provenance else self.perception.describer.memory_note
            if note not in notes:
                notes.append(note)
        return "\n".join(notes) if notes else self.perception.describer.memory_note

    def _tools(self, memory: VideoMemory, llm: ChatModel, queries: ReadOnlyQueries,
               build_objects: Callable[[], object]) -> list[Tool]:
        """Every tool over one video: VideoAgent's temporal tools, object memory and sub-task tools,
        and the tools that look at frames by time."""
        temporal = TemporalTools(memory, self.perception.embedder, self.vqa, llm).tools()
        sql = SQLTools(memory, self.perception.embedder, llm, queries, build_objects=build_objects,
                       appearance=self.perception.appearance)
        frames = FrameTools(memory, self.perception.describer, self.vqa, llm).tools()
        kinds = SUBTASK_KINDS if _withheld(memory) else (OBJECT_KIND,) + SUBTASK_KINDS
        return temporal + sql.tools(kinds) + frames

    def _wants_objects(self, builder: MemoryBuilder, video: Video | StoredVideo, llm: ChatModel,
                       question: str) -> MemorySelection | None:
        """DoraemonGPT's task-related memory: build the object memory ahead only when it is needed
        (None: a memory without a video file, which has nothing to build it from)."""
        if not isinstance(video, Video):
            return None
        if not builder.missing_stages(video, ["objects"]):
            return MemorySelection(True, "built")
        if self.settings.memory_selection == "all":
            return MemorySelection(True, "all")
        return select_memory(llm, question)

    def close(self) -> None:
        """Stop the detector's worker, free the chat model and its cache, close the library."""
        if self._perception is not None:
            self._perception.close()
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


def _withheld(memory: VideoMemory) -> tuple[str, ...]:
    """Tools a memory cannot serve: one imported from captions has no pixels to find objects in, so
    ``object_memory_querying`` would only spend the planner's calls (the sub-task tools stay: their
    SQL reads the captions too)."""
    return () if memory.has_pixels else ("object_memory_querying",)


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


def _source(handle: Video | Image | StoredVideo) -> Source:
    return Source(handle.content_hash, "image" if isinstance(handle, Image) else "video", str(handle.path))
