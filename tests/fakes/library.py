"""A library filled from rows: a real SQLite library whose memories are written by the real memory
builder and stages from clips' scripts, with the scripted perception, without decoding any video.

``library_from_rows`` builds from ``RowsVideo``s (a clip's frames made in memory, no file);
``build_home`` writes each clip as a tiny mp4 and builds from the file, for tests that open videos
(the session, the server, frame tools).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Iterator, Sequence

from vidagent.config import Settings
from vidagent.memory.builder import TEMPORAL_STAGES, MemoryBuilder
from vidagent.memory.store import Library
from vidagent.perception.suite import Perception
from vidagent.video.video import SampledFrame, Segment, Video, VideoInfo

from fakes.perception import FakeClip, scripted_perception, write_clip


class RowsVideo:
    """What the memory builder needs of a ``Video``, made from a clip's script: its frames are drawn
    in memory and its id is a hash of the script (``rows-...``)."""

    has_pixels = True

    def __init__(self, clip: FakeClip) -> None:
        self.clip = clip
        script = json.dumps([[asdict(s) for s in clip.scenes], clip.speech, clip.colours], default=str)
        digest = hashlib.blake2b(script.encode(), digest_size=16).hexdigest()
        self.path = Path(f"/rows/{clip.name}.mp4")
        width, height = clip.size
        self.info = VideoInfo(path=str(self.path), content_hash=f"rows-{digest}", duration_s=clip.duration_s,
                              fps=float(clip.fps), width=width, height=height, rotation=0,
                              has_audio=clip.has_audio, codec="rows", container="none")

    @property
    def duration_s(self) -> float:
        return self.info.duration_s

    @property
    def content_hash(self) -> str:
        return self.info.content_hash

    def segments(self, seconds: float = 2.0) -> list[Segment]:
        return Video.segments(self, seconds)  # type: ignore[arg-type]

    def frames_at(self, times_s: Sequence[float], *, max_side: int | None = None, seek: bool = False,
                  one_thread: bool = False) -> Iterator[SampledFrame]:
        for time_s in sorted(set(max(0.0, float(t)) for t in times_s)):
            yield SampledFrame(round(time_s, 3), self.clip.image_at(min(time_s, self.duration_s)))

    def frames_between(self, start_s: float, end_s: float) -> Iterator[SampledFrame]:
        step = 1.0 / self.clip.fps
        time_s = start_s
        while time_s <= end_s + 1e-9:
            yield SampledFrame(round(time_s, 3), self.clip.image_at(time_s))
            time_s += step

    def sample(self, fps: float, *, max_side: int | None = None) -> Iterator[SampledFrame]:
        count = max(1, int(self.duration_s * fps))
        return self.frames_at([i / fps for i in range(count)], max_side=max_side)

    def audio(self):
        return self.clip.audio()

    def __repr__(self) -> str:
        return f"RowsVideo({self.clip.name!r})"


def fake_settings(home: Path, **changes: object) -> Settings:
    """Settings for a fake home: the test run's (conftest sets what planner tests switch off), with no
    installed models and no extra perception sources, so stage configs stay fixed."""
    settings = replace(Settings.from_env(), home=home, models=home / "models", library=None, perception=frozenset())
    return replace(settings, **changes)  # type: ignore[arg-type]


def library_from_rows(library_path: Path, clips: Sequence[FakeClip], stages: Sequence[str] = TEMPORAL_STAGES, *,
                      settings: Settings | None = None,
                      perception: Perception | None = None) -> dict[str, RowsVideo]:
    """Build ``stages`` of each clip's memory into the library at ``library_path``; the videos by name."""
    settings = settings or fake_settings(Path(library_path).parent, library=Path(library_path))
    perception = perception or scripted_perception(*clips)
    videos = {clip.name: RowsVideo(clip) for clip in clips}
    with Library(library_path) as library:
        builder = MemoryBuilder(library, perception, settings)
        for video in videos.values():
            builder.build(video, stages, progress=False)  # type: ignore[arg-type]
    return videos


def build_home(home: Path, clips: Sequence[FakeClip], stages: Sequence[str] = TEMPORAL_STAGES, *,
               settings: Settings | None = None, folder: Path | None = None) -> dict[str, Path]:
    """Write each clip as ``<folder>/<name>.mp4`` (default ``<home>/videos``) and build ``stages`` of its
    memory into ``home``'s library with the scripted perception; the files by clip name."""
    settings = settings or fake_settings(home)
    folder = folder or home / "videos"
    paths = {clip.name: write_clip(clip, folder).resolve() for clip in clips}
    if stages:
        perception = scripted_perception(*clips)
        with Library(settings.library_path) as library:
            builder = MemoryBuilder(library, perception, settings)
            for path in paths.values():
                builder.build(Video(path), stages, progress=False)
    return paths
