"""Shared test fixtures: the project's test data lives beside the repository in ../shared/data."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import av
import numpy as np
import pytest

from vidagent.config import Settings

DATA = Path(os.environ.get("VIDAGENT_TEST_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
VIDEOS = DATA / "videos"

# Planner tests script every model call of one question; memory across questions (which validates and
# summarises each answer with more calls) is tested on its own, in test_experience.py, with it switched on,
# so a user's VIDAGENT_EXPERIENCE does not reach the other tests.
os.environ["VIDAGENT_EXPERIENCE"] = "none"


def video_path(relative: str) -> Path:
    """A test video's real path (symbolic links resolved: the server reports the paths it resolved,
    and ../shared may itself be a link)."""
    path = VIDEOS / relative
    if not path.exists():
        pytest.skip(f"test video {path} is not available")
    return path.resolve()


def frame_at(relative: str, t: float) -> np.ndarray:
    """The first decoded RGB frame at or after ``t`` seconds of a test video."""
    with av.open(str(video_path(relative))) as container:
        for frame in container.decode(video=0):
            if frame.time is not None and frame.time >= t:
                return frame.to_ndarray(format="rgb24")
    raise AssertionError(f"{relative} has no frame at {t} s")


@pytest.fixture(scope="session")
def models_dir() -> Path:
    """Where `vidagent models install` put the offline models (CI installs them first)."""
    return Settings.from_env().models_dir


@pytest.fixture(scope="module")
def perception(models_dir: Path):
    """The offline perception suite, one per test module (a module may define its own instead);
    skips when the offline models are not installed."""
    from dataclasses import replace

    from vidagent.perception.node_assets import detector_assets_installed
    from vidagent.perception.suite import Perception

    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed (run `vidagent models install`)")
    suite = Perception.offline(replace(Settings.from_env(), models=models_dir))
    yield suite
    suite.close()


def write_test_video(path: Path, frames: list[np.ndarray], fps: int = 10, audio: bool = False) -> Path:
    """Encode RGB frames (and optionally a 440 Hz tone) into an mp4 with PyAV."""
    height, width = frames[0].shape[:2]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264" if "libx264" in av.codecs_available else "mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        audio_stream = container.add_stream("aac", rate=16000) if audio else None
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if audio_stream is not None:
            seconds = len(frames) / fps
            t = np.arange(int(16000 * seconds)) / 16000
            samples = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None, :]
            frame = av.AudioFrame.from_ndarray(samples, format="flt", layout="mono")
            frame.sample_rate = 16000
            for packet in audio_stream.encode(frame):
                container.mux(packet)
            for packet in audio_stream.encode():
                container.mux(packet)
    return path


def set_mp4_rotation(path: Path, clockwise_quarter_turns: int) -> None:
    """Rewrite the first track's display matrix (tkhd) so players turn the picture clockwise."""
    data = bytearray(path.read_bytes())
    box = data.index(b"tkhd") - 4
    assert data[box + 8] == 0, "only version-0 tkhd boxes are handled"
    one, turns = 1 << 16, clockwise_quarter_turns % 4
    a, b, c, d = {0: (one, 0, 0, one), 1: (0, one, -one, 0), 2: (-one, 0, 0, -one), 3: (0, -one, one, 0)}[turns]
    data[box + 48 : box + 84] = struct.pack(">9i", a, b, 0, c, d, 0, 0, 0, 1 << 30)
    path.write_bytes(bytes(data))


TEMPORAL_TOY = "github_LLaMA-Factory/4.mp4"  # 5 s: 3 segments, no audio
TEMPORAL_TEXT = "github_LLaMA-Factory/3.mp4"  # 6 s, clideo watermark read by OCR


@pytest.fixture(scope="session")
def temporal_library(tmp_path_factory, models_dir: Path) -> Path:
    """A vidagent home whose library holds the temporal memory of two short clips."""
    from dataclasses import replace

    from vidagent.memory.builder import TEMPORAL_STAGES, MemoryBuilder
    from vidagent.memory.store import Library
    from vidagent.perception.node_assets import detector_assets_installed
    from vidagent.perception.suite import Perception
    from vidagent.video.video import Video

    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed (run `vidagent models install`)")
    home = tmp_path_factory.mktemp("temporal-home")
    settings = replace(Settings.from_env(), home=home, models=models_dir)
    perception = Perception.offline(settings)
    try:
        with Library(settings.library_path) as library:
            builder = MemoryBuilder(library, perception, settings)
            for clip in (TEMPORAL_TOY, TEMPORAL_TEXT):
                builder.build(Video(video_path(clip)), TEMPORAL_STAGES, progress=False)
    finally:
        perception.close()
    return home
