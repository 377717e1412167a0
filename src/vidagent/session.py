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
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.store import Library
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.suite import Perception
from vidagent.perception.vqa import DescribedFramesVQA, VisionChatVQA, VisualQA
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
            self._perception = Perception.offline(self.settings)
        return self._perception

    @property
    def library(self) -> Library:
        if self._library is None:
            self._library = Library(self.settings.library_path)
        return self._library

    @property
    def vqa(self) -> VisualQA:
        if self._vqa is None:
            self._vqa = VisionChatVQA() if self.llm.supports_images else DescribedFramesVQA(self.perception.describer)
        return self._vqa

    # -- work --------------------------------------------------------------------------------
    def index(self, video: str | Path | Video, *, progress: bool = True) -> VideoMemory:
        """Build (or reuse) the memory of a video."""
        handle = video if isinstance(video, Video) else Video(video)
        return MemoryBuilder(self.library, self.perception, self.settings).build(handle, progress=progress)

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
        memory = self.index(video, progress=progress)
        llm = MeteredChat(self.llm)
        tools = TemporalTools(memory, self.perception.embedder, self.vqa, llm).tools()
        context = VideoContext(
            duration_s=memory.video.duration_s,
            segment_count=memory.segment_count,
            segment_seconds=self.settings.segment_seconds,
            memory_note=OFFLINE_MEMORY_NOTE if isinstance(self.vqa, DescribedFramesVQA) else "",
        )
        answer = ReActAgent(llm, tools, max_steps=self.settings.max_react_steps).run(question, context, choices)
        answer.video = str(memory.video.path)
        answer.video_id = memory.video_id
        return answer

    def close(self) -> None:
        if self._perception is not None:
            self._perception.close()
        if self._library is not None:
            self._library.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
