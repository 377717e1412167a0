"""One-call functions for scripts; use ``Session`` to ask many questions without reloading models."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from vidagent.agent.answer import Answer
from vidagent.config import Settings
from vidagent.memory.video_memory import VideoMemory
from vidagent.session import Session


def ask(sources: str | Path | Sequence[str | Path], question: str, choices: Sequence[str] | None = None,
        *, planner: str = "react", planner_options: Mapping[str, Any] | None = None,
        settings: Settings | None = None) -> Answer:
    """Answer ``question`` about a video (or, with ``planner="peil"``, several videos and images);
    with ``choices``, pick one of them. ``planner`` names the planner (``react``, ``mcts``,
    ``traveler``, ``peil``, ``caption_only``, ``random``) and ``planner_options`` its settings.

    Raises ``VideoError`` (unreadable video), ``LLMError`` (chat model failed),
    ``ModelUnavailableError`` (models not installed) — all subclasses of ``VidagentError``.
    """
    with Session(settings) as session:
        return session.ask(sources, question, choices, planner=planner, planner_options=planner_options)


def index(video: str | Path, *, settings: Settings | None = None, progress: bool = True) -> int:
    """Build the memory of ``video`` ahead of questions; returns the number of segments."""
    with Session(settings) as session:
        memory: VideoMemory = session.index(video, progress=progress)
        return memory.segment_count
