"""What a build stage is: a name, a configuration that identifies its output, its inputs, and
either a per-frame step (frame stages) or one computation (table stages)."""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from vidagent.memory.store import Library
from vidagent.video.change import ChangeLimits
from vidagent.video.video import SampledFrame, Video

Rows = dict[str, list[tuple[Any, ...]]]  # table -> rows without the leading video_id


class Stage(Protocol):
    """A table stage: computes all its rows at once."""

    name: str
    requires: tuple[str, ...]  # stages whose rows it reads (built first)

    def config(self) -> dict[str, Any]:
        """Everything its output depends on; a stored stage with another config is rebuilt."""
        ...

    def build(self, video: Video, library: Library, progress: bool) -> Rows: ...


class FrameStage(Protocol):
    """A stage that looks at sampled frames; ``process`` results must be JSON-serialisable (but for ``Unsaved``
    values, which stay in memory)."""

    name: str
    requires: tuple[str, ...]
    max_side: int  # frames are scaled so their longer side is at most this (the largest wins)
    batch_size: int  # frames per ``process`` call and per checkpoint
    # A frame that looks like the last one ``process`` ran on reuses its result (None: never);
    # part of ``config()`` when set.
    reuse: ChangeLimits | None

    def config(self) -> dict[str, Any]: ...

    def frame_times(self, video: Video) -> list[float]:
        """Sample times in seconds (rounded to milliseconds)."""
        ...

    def process(self, frames: Sequence[SampledFrame]) -> list[Any]:
        """One JSON-serialisable result per frame, in order."""
        ...

    def finish(self, video: Video, library: Library, results: Mapping[float, Any]) -> Rows:
        """All rows of the stage from the per-frame results (keyed by sample time)."""
        ...
