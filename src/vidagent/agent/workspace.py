"""The workspace of one question: what a planner's ``Needs`` ask for, built from the session's resources.

One function, ``open_workspace``, serves every planner and every task (a single video is one
source): it builds each video's memory (and DoraemonGPT's object memory ahead of the question when
the planner's tools read it and the question calls for it), makes every source's media (``tools.media``:
here, at the edge, the opened handles become the one source type the toolbox, the planners and the tools
share), the tools over the video and AssistGPT's modules over every source, and hands the planner a
``Toolbox`` holding exactly those. The SQL connection the tools read through stays open while the
planner runs, hence a context manager.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Callable, Iterator, Protocol, Sequence

from vidagent.agent.memory_selection import MemorySelection, select_memory
from vidagent.agent.planning import Needs
from vidagent.agent.toolbox import AssistKit, Toolbox
from vidagent.config import Settings
from vidagent.errors import MemoryStoreError, PlannerError
from vidagent.experience.replay import Replay
from vidagent.experience.store import ExperienceStore
from vidagent.knowledge.sources import Knowledge
from vidagent.llm.base import ChatModel
from vidagent.memory.builder import TEMPORAL_STAGES, MemoryBuilder
from vidagent.memory.coverage import glance_every
from vidagent.memory.glance import Glance
from vidagent.memory.sql import ReadOnlyQueries
from vidagent.memory.store import Library
from vidagent.memory.stored_video import StoredVideo
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.base import VisualQA
from vidagent.perception.suite import Perception
from vidagent.tools import catalogue
from vidagent.tools.assist import AssistModules, knowledge_module
from vidagent.tools.base import Tool
from vidagent.tools.evidence_selection import EvidenceSelector
from vidagent.tools.frames import FrameTools
from vidagent.tools.knowledge import KnowledgeTools
from vidagent.tools.media import Media, image_media, video_file, video_media, videos_among
from vidagent.tools.refer import ReferTools
from vidagent.tools.sql_agent import OBJECT_KIND, SUBTASK_KINDS, SQLTools
from vidagent.tools.temporal import TemporalTools
from vidagent.tools.utility import UtilityTools
from vidagent.video.image import Image
from vidagent.video.video import Video

Handle = Video | Image | StoredVideo
VideoHandle = Video | StoredVideo
OBJECT_TOOLS = catalogue.names(form="segments", reads="objects", offered=True)  # read the object memory


class Resources(Protocol):
    """What the workspace is built from: the session's settings, library and models (built lazily)."""

    settings: Settings

    @property
    def library(self) -> Library: ...

    @property
    def perception(self) -> Perception: ...

    def vqa(self, llm: ChatModel) -> VisualQA:
        """Visual question answering for a question asked with ``llm`` (its metered chat model)."""
        ...

    @property
    def experience_store(self) -> ExperienceStore: ...

    def builder(self) -> MemoryBuilder: ...


@contextmanager
def open_workspace(needs: Needs, question: str, handles: Sequence[Handle], resources: Resources, llm: ChatModel,
                   *, knowledge: Sequence[Knowledge] = (), replay: Replay | None = None,
                   progress: bool = False, glance: float | None = None) -> Iterator[Toolbox]:
    """The toolbox for one question with sources ``handles``, holding what ``needs`` asks for, and a
    tool (or, for AssistGPT's planner, a module) over each of the user's ``knowledge`` sources.
    ``glance`` (seconds): a video whose temporal memory is missing is answered from a partial memory
    that describes a frame every ``glance`` seconds and refines what the tools read
    (``vidagent.memory.glance``); its object memory is then not built ahead. ``None``: the default, a glance
    for a video of at least ``settings.glance_after_s`` seconds, no denser than the lines the planner reads
    (``coverage.glance_every``, ``Needs.lines_read``); 0: never."""
    settings = resources.settings
    if not needs.memory:
        yield _without_memory(handles, resources)
        return
    videos = _videos(handles)
    with_tools = needs.tools != ()
    if with_tools and (len(videos) != 1 or len(handles) != 1):
        raise PlannerError("tools over a video take exactly one video as the question's source")
    builder = resources.builder()
    every = {id(h): glance_every(glance, h.duration_s, settings.glance_after_s, looks=needs.lines_read)
             for h in videos}
    selection = None
    if with_tools and (needs.tools is None or any(name in OBJECT_TOOLS for name in needs.tools)) \
            and not every[id(videos[0])]:
        selection = _object_memory_ahead(builder, videos[0], llm, question, settings)
    stages = list(TEMPORAL_STAGES) + (["objects"] if selection is not None and selection.objects else [])

    def opened(handle: VideoHandle) -> Media:
        memory = _glanced(builder, handle, every[id(handle)], progress) if every[id(handle)] else None
        memory = memory or video_memory(builder, handle, stages, resources.library, progress)
        return video_media(memory, settings.segment_seconds)

    media = _media(handles, opened)
    memories = [video.memory for video in videos_among(media)]
    with ExitStack() as stack:
        tools: list[Tool] = []
        withheld: tuple[str, ...] = ()
        if with_tools:
            memory, handle = memories[0], videos[0]
            queries = stack.enter_context(ReadOnlyQueries(settings.library_path, memory.video_id))
            withheld = withheld_tools(memory)
            tools = _video_tools(memory, resources, llm, queries, withheld,
                                 lambda: video_memory(builder, handle, ["objects"], resources.library, progress))
        perception = resources.perception
        attached = KnowledgeTools(llm, perception.embedder, settings.tools).tools(knowledge)
        toolbox = Toolbox.of(
            tools + attached, sources=tuple(media), memory_note=memory_note(memories, perception.describer.memory_note),
            context_tokens=settings.llm.context_tokens, assist=_assist_kit(needs, media, resources, llm, attached),
            attached=tuple(tool.name for tool in attached),
            replay=replay,
            sees_frames=resources.vqa(llm).sees_frames if with_tools else True,
            selection=selection, shapes=settings.tools, withheld=withheld,
            selector=EvidenceSelector(perception.embedder))
        yield toolbox.select(needs.tools)


def _without_memory(handles: Sequence[Handle], resources: Resources) -> Toolbox:
    """The toolbox of a planner that needs no memory: the sources only, each video's memory left
    unopened (the planner is told its length, no segments; nothing is built)."""
    library, fallback = resources.library, resources.settings.segment_seconds
    return Toolbox({}, sources=tuple(_media(handles, lambda handle: video_media(
        VideoMemory(handle, library), fallback, opened=False))))


def _videos(handles: Sequence[Handle]) -> list[VideoHandle]:
    """The handles that are videos (a file, or a memory without one), in the user's order."""
    return [handle for handle in handles if not isinstance(handle, Image)]


def _media(handles: Sequence[Handle], video: Callable[[VideoHandle], Media]) -> list[Media]:
    """Every source's media in the user's order: an image's pixels, a video as ``video`` makes it."""
    return [image_media(handle) if isinstance(handle, Image) else video(handle) for handle in handles]


def video_memory(builder: MemoryBuilder, handle: VideoHandle, stages: Sequence[str], library: Library,
                 progress: bool) -> VideoMemory:
    """A video's memory with ``stages`` built; a memory without a file is read as it was imported
    (it has segments only: asking it for another stage is an error that says so)."""
    file = video_file(handle)
    if file is not None:
        return builder.build(file, stages, progress=progress)
    memory = VideoMemory(handle, library)
    lacking = [stage for stage in stages if stage not in ("frames", "speech") and stage not in memory.stages]
    if lacking:
        captioner = handle.provenance.captioner if handle.provenance else "captions"
        raise MemoryStoreError(f"{handle.content_hash} was imported from {captioner} and has no "
                               f"{' or '.join(lacking)} memory (no video file to build it from)")
    return memory


def _glanced(builder: MemoryBuilder, handle: VideoHandle, every_s: float,
             progress: bool) -> VideoMemory | None:
    """The partial memory of a video whose temporal memory is missing (None: a memory to read as it is)."""
    file = video_file(handle)
    if file is None:
        return None
    glance = Glance(builder, file, every_s, progress=progress)
    return glance.open() if glance.needed() else None


def memory_note(memories: Sequence[VideoMemory], describer_note: str) -> str:
    """What the planners are told the memory's descriptions are: each memory's own note (what described
    its frames, or where an imported memory's captions came from), else the describer's (the notes of
    several kinds of memory, one after the other)."""
    notes: list[str] = []
    for memory in memories:
        note = memory.note or describer_note
        if note not in notes:
            notes.append(note)
    return "\n".join(notes) if notes else describer_note


def withheld_tools(memory: VideoMemory) -> tuple[str, ...]:
    """Tools a memory cannot serve (the catalogue's ``needs``): one imported from captions has no pixels to
    find objects in, so ``object_memory_querying`` would only spend the planner's calls (the sub-task tools
    stay: their SQL reads the captions too)."""
    return catalogue.unservable("segments", pixels=memory.has_pixels, speech=True)


def withheld_modules(media: Sequence[Media]) -> tuple[str, ...]:
    """AssistGPT modules the question's sources cannot serve: with no image and no video that has frames
    (memories imported from captions) nothing can be looked at, so the image modules, ``get_frame`` and
    on-screen text are withheld; with no video that has a speech memory, the speech modules. On NExT-QA's
    imported memories PEIL spent 22 of 133 module calls on such modules, each answered only by an error."""
    pixels = any(item.has_pixels for item in media)
    speech = any(item.serves_speech for item in media)
    return catalogue.unservable("source", pixels=pixels, speech=speech)


def _video_tools(memory: VideoMemory, resources: Resources, llm: ChatModel, queries: ReadOnlyQueries,
                 withheld: tuple[str, ...], build_objects: Callable[[], object]) -> list[Tool]:
    """Every tool over one video: VideoAgent's temporal tools, object memory and sub-task tools,
    the tools that look at frames by time, and DoraemonGPT's utility tools and ``refer_object`` (no planner
    offers them by default: its ``tools`` option names them)."""
    perception, shapes = resources.perception, resources.settings.tools
    vqa = resources.vqa(llm)
    temporal = TemporalTools(memory, perception.embedder, vqa, llm, shapes).tools()
    sql = SQLTools(memory, perception.embedder, llm, queries, build_objects=build_objects,
                   appearance=perception.appearance, shapes=shapes)
    frames = FrameTools(memory, perception.describer, vqa, llm, shapes).tools()
    utility = UtilityTools(memory, resources.settings.artifacts_dir, sql.ensure_objects).tools()  # named only
    refer = ReferTools(memory, resources.settings.artifacts_dir, llm, sql.ensure_objects).tools()  # named only
    tools = temporal + sql.tools((OBJECT_KIND,) + SUBTASK_KINDS) + frames + utility + refer
    catalogue.check_declared(tools, "segments")
    return [tool for tool in tools if tool.name not in withheld]


def _assist_kit(needs: Needs, media: Sequence[Media], resources: Resources, llm: ChatModel,
                knowledge: Sequence[Tool]) -> AssistKit:
    """AssistGPT's modules over the question's sources (and one taking no source over each knowledge
    tool), and PEIL's own example bank (whose it is: the experience's scope, or the user's for a taught
    evaluation run)."""
    if not needs.modules:
        return AssistKit()
    perception, settings = resources.perception, resources.settings
    modules = AssistModules(perception.describer, perception.reader, perception.detector, perception.embedder,
                            resources.vqa(llm), llm, grounder=perception.grounder, shapes=settings.tools).tools()
    catalogue.check_declared(modules, "source")
    unservable = withheld_modules(media)
    modules = [module for module in modules if module.name not in unservable]
    modules += [knowledge_module(tool) for tool in knowledge]
    scope = settings.experience_scope if settings.examples_scope is None else settings.examples_scope
    return AssistKit({module.name: module for module in modules}, perception.describer,
                     resources.experience_store, scope, withheld=unservable)


def _object_memory_ahead(builder: MemoryBuilder, video: VideoHandle, llm: ChatModel, question: str,
                         settings: Settings) -> MemorySelection | None:
    """DoraemonGPT's task-related memory: build the object memory ahead only when it is needed
    (None: a memory without a video file, which has nothing to build it from)."""
    file = video_file(video)
    if file is None:
        return None
    if not builder.missing_stages(file, ["objects"]):
        return MemorySelection(True, "built")
    if settings.memory_selection == "all":
        return MemorySelection(True, "all")
    if settings.memory_selection == "tools":  # the object tools build it when they first read it: no model call
        return None
    return select_memory(llm, question)

