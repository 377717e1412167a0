"""A session holds the loaded models and the library, and answers questions about videos.

Models load on first use and stay loaded for the session's later questions; close the
session (or use it as a context manager) to stop the detector's worker process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from vidagent.agent.answer import Answer
from vidagent.agent.react import ReActAgent, VideoContext
from vidagent.config import Settings
from vidagent.llm.base import ChatModel
from vidagent.llm.metered import MeteredChat
from vidagent.agent.memory_selection import needs_object_memory
from vidagent.memory.builder import ALL_STAGES, TEMPORAL_STAGES, MemoryBuilder
from vidagent.memory.sql import ReadOnlyQueries
from vidagent.memory.store import Library
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.suite import Perception
from vidagent.perception.vqa import DescribedFramesVQA, VisionChatVQA, VisualQA
from vidagent.tools.sql_agent import SQLTools
from vidagent.tools.temporal import TemporalTools
from vidagent.video.video import Video

OFFLINE_MEMORY_NOTE = (
    "No captioning model is installed: each description lists what an object detector (80 everyday "
    "object classes, with colour and position) and a text reader found in a frame. Descriptions do not "
    "name actions or uncommon objects; infer them from the objects, their positions, speech and text."
)


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
        self._perception = perception
        self._vqa = vqa
        self._library: Library | None = None

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
        video: str | Path | Video,
        question: str,
        choices: Sequence[str] | None = None,
        *,
        progress: bool = False,
    ) -> Answer:
        """Answer a question about a video (indexing it first if needed)."""
        if not question.strip():
            raise ValueError("the question is empty")
        handle = video if isinstance(video, Video) else Video(video)
        llm = MeteredChat(self.llm)
        builder = self.builder()
        stages = list(TEMPORAL_STAGES)
        if self._wants_objects(builder, handle, llm, question):
            stages.append("objects")
        memory = builder.build(handle, stages, progress=progress)
        with ReadOnlyQueries(self.settings.library_path, memory.video_id) as queries:
            sql_tools = SQLTools(memory, self.perception.embedder, llm, queries,
                                 build_objects=lambda: builder.build(handle, ["objects"], progress=progress))
            tools = TemporalTools(memory, self.perception.embedder, self.vqa, llm).tools() + sql_tools.tools()
            answer = self._react(memory, llm, tools, question, choices)
        answer.video = str(memory.video.path)
        answer.video_id = memory.video_id
        return answer

    def _wants_objects(self, builder: MemoryBuilder, video: Video, llm: ChatModel, question: str) -> bool:
        """DoraemonGPT's task-related memory: build the object memory ahead only when it is needed."""
        if self.settings.memory_selection == "all" or not builder.missing_stages(video, ["objects"]):
            return True
        return needs_object_memory(llm, question)

    def _react(self, memory: VideoMemory, llm: MeteredChat, tools: list, question: str,
               choices: Sequence[str] | None) -> Answer:
        context = VideoContext(
            duration_s=memory.video.duration_s,
            segment_count=memory.segment_count,
            segment_seconds=self.settings.segment_seconds,
            memory_note=OFFLINE_MEMORY_NOTE if isinstance(self.vqa, DescribedFramesVQA) else "",
        )
        return ReActAgent(llm, tools, max_steps=self.settings.max_react_steps).run(question, context, choices)

    def close(self) -> None:
        if self._perception is not None:
            self._perception.close()
        if self._library is not None:
            self._library.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
