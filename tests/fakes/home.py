"""A vidagent home for fast tests: two scripted clips in the shape of the two real ones the temporal
tests use (``conftest.TEMPORAL_TOY``: 5 s, three segments, a guitar drawn on a tablet, no audio;
``conftest.TEMPORAL_TEXT``: 6.1 s with the clideo.com watermark on screen), written as tiny mp4 files
and indexed with the scripted perception."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vidagent.config import Settings
from vidagent.memory.builder import TEMPORAL_STAGES
from vidagent.perception.suite import Perception
from vidagent.session import Session

from fakes.library import build_home, fake_settings
from fakes.perception import FakeClip, Scene, SceneObject, scripted_perception

HAND = SceneObject("person", (0.55, 0.05, 0.95, 0.6))
TABLET = SceneObject("laptop", (0.1, 0.3, 0.7, 0.95))


def toy_clip() -> FakeClip:
    """5 s at 224x224, three segments: a guitar drawn on a tablet by a hand."""
    return FakeClip("toy", [
        Scene("a hand draws the outline of a guitar on a tablet", objects=(HAND, TABLET)),
        Scene("a guitar drawing on a tablet, the hand shading it", objects=(HAND, TABLET)),
        Scene("a finished guitar drawing on a tablet", seconds=1.0, objects=(TABLET,)),
    ], size=(224, 224))


def text_clip() -> FakeClip:
    """6.1 s, three segments with the clideo.com watermark on screen, and a man speaking."""
    watermark = ("clideo.com",)
    return FakeClip("text", [
        Scene("a cartoon cat waves at the camera", text=watermark),
        Scene("a cartoon cat jumps over a fence", text=watermark, objects=(SceneObject("cat", (0.2, 0.2, 0.6, 0.8)),)),
        Scene("a cartoon cat sleeps on a sofa", seconds=2.1, text=watermark),
    ], speech=[(0.5, 2.5, "look at the cat"), (4.0, 5.5, "time to sleep")])


@dataclass
class ScriptedHome:
    """A home whose library holds the temporal memory of the two clips; ``toy`` and ``text`` are
    their files."""

    home: Path
    clips: tuple[FakeClip, ...]
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def toy(self) -> Path:
        return self.files["toy"]

    @property
    def text(self) -> Path:
        return self.files["text"]

    def settings(self, home: Path | None = None, **changes: object) -> Settings:
        return fake_settings(home or self.home, **changes)

    def perception(self) -> Perception:
        return scripted_perception(*self.clips)

    def session(self, llm, home: Path | None = None, **changes: object) -> Session:
        """A session over this home (or a copy at ``home``) with the scripted perception and ``llm``."""
        return Session(self.settings(home, **changes), llm=llm, perception=self.perception())


def clip_file(home: Path, name: str) -> Path:
    """Where ``scripted_home(home)`` wrote the clip called ``name`` ("toy" or "text")."""
    return (home.parent / f"{home.name}-videos" / f"{name}.mp4").resolve()


def scripted_home(home: Path, stages=TEMPORAL_STAGES) -> ScriptedHome:
    clips = (toy_clip(), text_clip())
    built = ScriptedHome(home, clips)
    built.files = build_home(home, clips, stages, folder=home.parent / f"{home.name}-videos")
    assert built.toy == clip_file(home, "toy")
    return built
