"""Shared test fixtures: the project's test data lives beside the repository in ../shared/data.

Two markers split the suite into tiers: ``models`` (runs a real model: the offline models that
`vidagent models install` installs, the ones shipped in packages such as E5, Whisper and RapidOCR,
Hugging Face backends or the embedded chat model) and ``clips`` (reads ../shared/data). The fast tier,
``pytest -m "not models and not clips"``, runs everything else (the fakes in ``tests/fakes`` stand in
for the models there). ``--require-models`` turns a skip of a marked test (a model, a clip or a tool
install.sh installs is missing) into a failure, so CI cannot pass by skipping; a test marked ``gpu``
(it needs a CUDA GPU, which CI has not) may still skip.

Marks come from the fixtures a test uses (``MODEL_FIXTURES``, ``CLIP_FIXTURES``) and from the calls in
its source (``video_path``, ``frame_at``); a module or test marks itself where neither shows. A test
without the ``models`` mark that loads a real model fails (``_no_real_models``), so the marks stay true.
"""

from __future__ import annotations

import inspect
import os
import re
import struct
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from vidagent.config import Settings

# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on these machines):
# without it every run rewrites the asserts of every test module again (5.8 s of an 8.4-s collection, in each
# xdist worker) and every `vidagent` subprocess a test starts compiles the package again (0.14 s each).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The tree mirrors the package (tests/agent, tests/memory, ...); the helpers here (fakes, media_corpus, ...) and
# test modules that others import (test_cli's run_cli, ...) are importable from any folder.
TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS)] + sorted(str(folder) for folder in TESTS.iterdir()
                                     if folder.is_dir() and folder.name[0] not in "._" and folder.name != "fakes")

DATA = Path(os.environ.get("VIDAGENT_TEST_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
VIDEOS = DATA / "videos"

# Planner tests script every model call of one question; memory across questions (which validates and
# summarises each answer with more calls) is tested on its own, in test_experience.py, with it switched on,
# so a user's VIDAGENT_EXPERIENCE does not reach the other tests.
os.environ["VIDAGENT_EXPERIENCE"] = "none"
os.environ["VIDAGENT_CHECK"] = "0"  # the check of answers is off unless a test turns it on (tests/agent/test_evidence_check.py)


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


@pytest.fixture(scope="session")
def scripted(tmp_path_factory):
    """A vidagent home whose library holds the temporal memory of two scripted clips shaped like the two
    temporal clips below, built with the scripted perception (``fakes.ScriptedHome``)."""
    from fakes import scripted_home

    return scripted_home(tmp_path_factory.mktemp("scripted") / "home")


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


# -- tiers ------------------------------------------------------------------------------------------
MODEL_FIXTURES = {"perception", "temporal_library"}  # fixtures that run real models
CLIP_FIXTURES = {"temporal_library"}  # fixtures that read ../shared/data
# calls that read a clip, the clips' names (helpers take them), the data folder
_CLIP_CALL = re.compile(r"\b(video_path|frame_at)\(|\bTEMPORAL_(TOY|TEXT)\b|\b(github|debian|pypi)_[\w.-]+/|\bVIDEOS\b|\bDATA\b")

# Where each real model loads (module, class, method): a test without the ``models`` mark that gets
# there fails. A name that is gone (renamed in a refactor) only weakens the check.
_MODEL_LOADS = (
    ("vidagent.perception.text_embedding", "E5TextEmbedder", "_ensure_loaded"),
    ("vidagent.perception.speech", "WhisperSpeechToText", "_ensure_loaded"),
    ("vidagent.perception.ocr", "RapidTextReader", "_ensure_loaded"),
    ("vidagent.perception.classifier", "EfficientNetClassifier", "_load"),
    ("vidagent.perception.node_worker", "NodeModel", "_ensure_worker"),
    ("vidagent.perception.tfjs_graph", "InstalledTfjsModel", "_ensure_loaded"),
    ("vidagent.perception.hf.loading", "LazyModel", "get"),
    ("vidagent.llm.local", "LocalGGUFBackend", "_ensure_loaded"),
    ("vidagent.perception.vision_chat", "GGUFVisionChat", "_start"),
)


def pytest_addoption(parser):
    parser.addoption("--require-models", action="store_true",
                     help="fail (not skip) a test that needs models or clips when they are missing (CI)")


def _functions(item) -> list:
    """The test function and the fixtures it uses."""
    functions = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for definitions in (info.name2fixturedefs.values() if info else ()):
        functions += [definition.func for definition in definitions]
    return functions


def _reads_clips(function, seen: dict) -> bool:
    """Whether ``function``'s source (one defined in a test file) reads a clip; ``seen`` keeps the answer
    for each function, as the same fixtures and parametrized tests come up again and again."""
    try:
        key = function.__code__  # a parametrized test's items share their function
    except AttributeError:
        key = function
    if key not in seen:
        try:
            seen[key] = bool(_CLIP_CALL.search(inspect.getsource(function)))
        except (OSError, TypeError):
            seen[key] = False
    return seen[key]


def pytest_collection_modifyitems(config, items):
    seen: dict = {}
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & MODEL_FIXTURES:
            item.add_marker(pytest.mark.models)
        if fixtures & CLIP_FIXTURES or any(_reads_clips(function, seen) for function in _functions(item)):
            item.add_marker(pytest.mark.clips)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.config.getoption("--require-models") and not item.get_closest_marker("gpu") and \
            (item.get_closest_marker("models") or item.get_closest_marker("clips")):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"--require-models: this test would have skipped: {reason}"


class _ModelGuard:
    """Outside the ``models`` tier, loading a real model is an error (the mark is missing): the load
    raises where it happens, and the test fails even where its caller turned that error into an
    answer. The loads are patched once, for the whole run; a test's fixtures (module-scoped ones
    too, made in its setup) count as the test."""

    def __init__(self) -> None:
        self.item = None
        self.loaded: list[str] = []

    def install(self) -> None:
        import importlib

        for module_name, class_name, method in _MODEL_LOADS:
            try:
                owner = getattr(importlib.import_module(module_name), class_name)
            except Exception:  # noqa: BLE001 - a module that does not import cannot load a model either
                continue
            if hasattr(owner, method):
                setattr(owner, method, self._guarded(getattr(owner, method), f"{class_name}.{method}"))

    def _guarded(self, original, where: str):
        guard = self

        def load(*args, **kwargs):
            if guard.item is not None and guard.item.get_closest_marker("models") is None:
                guard.loaded.append(where)
                raise AssertionError(f"a real model loaded ({where}) in a test not marked `models`")
            return original(*args, **kwargs)
        return load


_GUARD = _ModelGuard()


def pytest_sessionstart(session):
    _GUARD.install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _GUARD.item, _GUARD.loaded = item, []
    yield
    _GUARD.item = None


@pytest.fixture(autouse=True)
def _no_real_models():
    yield
    if _GUARD.loaded:
        pytest.fail(f"a real model loaded ({', '.join(sorted(set(_GUARD.loaded)))}) in a test not marked "
                    "`models`: mark it, or give it the fakes in tests/fakes")
