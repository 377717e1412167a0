"""A scripted perception: every model role answers from a clip's script instead of looking.

A ``FakeClip`` is a list of ``Scene``s (what the describer says, the objects the detector finds,
the text OCR reads) and timed speech. Its frames are solid colours, one per scene, unique within
the test run, with each object drawn as a box of its own colour; the scripted models recognise a
frame by its colour, so they answer right whatever frames a stage samples, reuses or decodes (a
real file written by ``write_clip`` or a ``RowsVideo`` that never decodes), read from a border of the
frame that objects never cover. The soundtrack of a clip
with speech is a tone whose pitch names the clip, so the scripted speech model knows whose speech
to return.

``scripted_perception(*clips)`` is a real ``Perception`` whose models are these stand-ins, beside
the real model-free parts (the ByteTrack tracker, colour-histogram appearance), so the memory
builder, the tools and the session run unchanged in milliseconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import av
import numpy as np
import supervision as sv

from vidagent.perception.appearance import ColourAppearance
from vidagent.perception.base import (
    FrameDescription,
    SeenObject,
    SpeechSegment,
    TextBox,
)
from vidagent.perception.detections import make_detections
from vidagent.perception.suite import Perception
from vidagent.perception.tracking import ByteTracker

BORDER = 6  # pixels of each frame's edge that show only the scene's colour (objects are drawn inside)
_LEVELS = (20, 60, 100, 140, 180, 220)  # 216 background colours, 40 apart: far beyond lossy coding's error
_PALETTE = np.array(list(itertools.product(_LEVELS, repeat=3)), np.float32)
_colours = itertools.count()
_voices = itertools.count()
_made: list["FakeClip"] = []  # every clip of this run: what ``scripted_perception()`` knows by default
SAMPLE_RATE = 16000
_TONE_BASE_HZ, _TONE_STEP_HZ, _TONES = 300.0, 25.0, 120


@dataclass(frozen=True)
class SceneObject:
    """An object the scripted detector finds: its label and box as fractions of the frame
    (``x1, y1, x2, y2``, 0-1) and its score."""

    label: str
    box: tuple[float, float, float, float]
    score: float = 0.9
    colour: tuple[int, int, int] | None = None  # drawn in this colour (default: from the label)

    def rgb(self) -> tuple[int, int, int]:
        if self.colour is not None:
            return self.colour
        digest = hashlib.blake2b(self.label.encode(), digest_size=3).digest()
        return (digest[0] | 0x0F, digest[1] & 0xF0, digest[2] | 0x80)


@dataclass(frozen=True)
class Scene:
    """What is seen for ``seconds``: the describer's sentence, the objects and the on-screen text."""

    description: str
    seconds: float = 2.0
    objects: tuple[SceneObject, ...] = ()
    text: tuple[str, ...] = ()


@dataclass
class FakeClip:
    """A clip's script. ``name`` names its file; ``speech`` is (start_s, end_s, text) rows."""

    name: str
    scenes: Sequence[Scene]
    speech: Sequence[tuple[float, float, str]] = ()
    fps: int = 10
    size: tuple[int, int] = (160, 120)  # width, height
    colours: list[int] = field(init=False)
    voice: int = field(init=False)

    def __post_init__(self) -> None:
        self.scenes = tuple(self.scenes)
        self.speech = tuple(tuple(row) for row in self.speech)  # type: ignore[misc]
        # a stride through the palette: consecutive scenes differ in every channel, so a stage's
        # near-duplicate check never takes one scene's frame for the last one's
        self.colours = [next(_colours) * 97 % len(_PALETTE) for _ in self.scenes]
        self.voice = next(_voices) % _TONES
        _made.append(self)

    @property
    def duration_s(self) -> float:
        return float(sum(scene.seconds for scene in self.scenes))

    @property
    def has_audio(self) -> bool:
        return bool(self.speech)

    def scene_index_at(self, time_s: float) -> int:
        end = 0.0
        for index, scene in enumerate(self.scenes):
            end += scene.seconds
            if time_s < end - 1e-9:
                return index
        return len(self.scenes) - 1

    def image(self, index: int) -> np.ndarray:
        """The frame shown during scene ``index``: its colour, with its objects drawn on it."""
        width, height = self.size
        image = np.empty((height, width, 3), np.uint8)
        image[:] = _PALETTE[self.colours[index]].astype(np.uint8)
        inner = image[BORDER:height - BORDER, BORDER:width - BORDER]
        for thing in self.scenes[index].objects:
            x1, y1, x2, y2 = (int(v) - BORDER for v in _pixels(thing.box, width, height))
            inner[max(y1, 0):max(y2, 0), max(x1, 0):max(x2, 0)] = thing.rgb()
        return image

    def image_at(self, time_s: float) -> np.ndarray:
        return self.image(self.scene_index_at(time_s))

    def audio(self) -> np.ndarray | None:
        """16 kHz mono float32: a tone naming the clip, or None when it has no speech."""
        if not self.has_audio:
            return None
        t = np.arange(int(SAMPLE_RATE * self.duration_s)) / SAMPLE_RATE
        return (0.3 * np.sin(2 * np.pi * self.tone_hz * t)).astype(np.float32)

    @property
    def tone_hz(self) -> float:
        return _TONE_BASE_HZ + _TONE_STEP_HZ * self.voice


def long_clip() -> FakeClip:
    """60 s in ten 6-s scenes (so each is three segments, the later two near-duplicates of the first), speech."""
    scenes = [Scene(f"scene {i}: a {thing} on a table", seconds=6.0,
                    objects=(SceneObject(thing, (0.2, 0.2, 0.6, 0.7)),), text=(f"sign {i}",) if i % 3 == 0 else ())
              for i, thing in enumerate(["cup", "book", "clock", "vase", "laptop", "bottle", "bowl", "chair",
                                         "teddy bear", "scissors"])]
    return FakeClip("long", scenes, speech=[(13.0, 15.0, "here is the clock"), (44.0, 47.0, "now the bowl")], fps=5)


def write_clip(clip: FakeClip, folder: Path) -> Path:
    """Encode ``clip`` as ``folder/<name>.mp4`` (its scenes' frames, and its tone when it has speech).

    Encoding is the slow part of many fast tests (a minute of AAC takes over a second), so the files are
    made once per run: a clip with the same frames and tone as one written before is a copy of that file,
    and a tone already encoded is muxed again as it was (``_ENCODED``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{clip.name}.mp4"
    shutil.copyfile(_ENCODED.clip(clip), path)
    return path


class _EncodedMedia:
    """The clips and tones this run has encoded, kept in a temporary folder removed at exit."""

    def __init__(self) -> None:
        self._folder: tempfile.TemporaryDirectory | None = None
        self._files: dict[tuple, Path] = {}

    def _new_path(self, suffix: str) -> Path:
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="vidagent-test-clips-")
        return Path(self._folder.name) / f"{len(self._files)}{suffix}"

    def clip(self, clip: FakeClip) -> Path:
        key = ("clip", clip.name, clip.fps, clip.size, clip.scenes, tuple(clip.colours),
               clip.tone_hz if clip.has_audio else None, clip.duration_s)
        if key not in self._files:
            path = self._new_path(".mp4")
            self._encode(clip, path)
            self._files[key] = path
        return self._files[key]

    def tone(self, clip: FakeClip) -> Path:
        """An m4a of the clip's tone (its length and pitch), encoded once."""
        key = ("tone", clip.tone_hz, clip.duration_s)
        if key not in self._files:
            path = self._new_path(".m4a")
            with av.open(str(path), "w") as container:
                # one channel and the fast coder: a pure tone's pitch comes through as well, in an eighth of the time
                stream = container.add_stream("aac", rate=SAMPLE_RATE, layout="mono", options={"aac_coder": "fast"})
                frame = av.AudioFrame.from_ndarray(clip.audio()[None, :], format="flt", layout="mono")  # type: ignore[index]
                frame.sample_rate = SAMPLE_RATE
                for packet in [*stream.encode(frame), *stream.encode()]:
                    container.mux(packet)
            self._files[key] = path
        return self._files[key]

    def _encode(self, clip: FakeClip, path: Path) -> None:
        width, height = clip.size
        frames = round(clip.duration_s * clip.fps)
        with av.open(str(path), "w") as container, \
                (av.open(str(self.tone(clip))) if clip.has_audio else contextlib.nullcontext()) as tone:
            stream = container.add_stream("libx264" if "libx264" in av.codecs_available else "mpeg4", rate=clip.fps)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            audio_stream = container.add_stream_from_template(tone.streams.audio[0]) if tone is not None else None
            for index in range(frames):
                image = clip.image_at(index / clip.fps)
                for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
            if tone is not None:
                for packet in tone.demux(tone.streams.audio[0]):
                    if packet.dts is not None:  # the demuxer's empty flush packet
                        packet.stream = audio_stream
                        container.mux(packet)


_ENCODED = _EncodedMedia()


def _pixels(box: Sequence[float], width: int, height: int) -> tuple[float, float, float, float]:
    x1, y1, x2, y2 = box
    return (x1 * width, y1 * height, x2 * width, y2 * height)


class _Script:
    """Finds the clip and scene a frame belongs to from its colour (a later clip takes over a colour
    an earlier one had, once the palette has gone round)."""

    def __init__(self, clips: Sequence[FakeClip]) -> None:
        self.scenes: dict[int, tuple[FakeClip, int]] = {}
        for clip in clips:
            for index, colour in enumerate(clip.colours):
                self.scenes[colour] = (clip, index)
        self.voices = {clip.voice: clip for clip in clips}

    def scene(self, image: np.ndarray) -> tuple[FakeClip, Scene] | None:
        height, width = image.shape[:2]
        edge = max(1, BORDER * min(height, width) // 120 // 2)  # half the border, in this image's scale
        ring = np.concatenate([image[:edge].reshape(-1, 3), image[-edge:].reshape(-1, 3),
                               image[:, :edge].reshape(-1, 3), image[:, -edge:].reshape(-1, 3)])
        median = np.median(ring.astype(np.float32), axis=0)
        colour = int(np.argmin(((_PALETTE - median) ** 2).sum(axis=1)))
        if colour not in self.scenes or float(((_PALETTE[colour] - median) ** 2).sum()) > 20 ** 2:
            return None
        clip, index = self.scenes[colour]
        return clip, clip.scenes[index]

    def clip_speaking(self, audio: np.ndarray) -> FakeClip | None:
        if audio.size < SAMPLE_RATE // 4:
            return None
        spectrum = np.abs(np.fft.rfft(audio[: SAMPLE_RATE * 4]))
        peak_hz = float(np.argmax(spectrum)) * SAMPLE_RATE / min(audio.size, SAMPLE_RATE * 4)
        voice = round((peak_hz - _TONE_BASE_HZ) / _TONE_STEP_HZ)
        return self.voices.get(voice)


class ScriptedDescriber:
    """``FrameDescriber``: the scene's sentence, objects and on-screen text."""

    name = "scripted-describer"
    memory_note = "The descriptions were written by a test script."
    label = ""  # its sentences are captions

    def __init__(self, script: _Script) -> None:
        self.script = script
        self.calls = 0
        self.delay_s = 0.0  # seconds each call takes, for tests of what happens while a build runs

    def describe(self, images: Sequence[np.ndarray]) -> list[FrameDescription]:
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        described = []
        for image in images:
            found = self.script.scene(image)
            if found is None:
                described.append(FrameDescription(size=(image.shape[1], image.shape[0])))
                continue
            _, scene = found
            height, width = image.shape[:2]
            boxes = tuple(TextBox(text, (0.1 * width, 0.8 * height, 0.9 * width, 0.95 * height), 0.95)
                          for text in scene.text)
            described.append(_description(scene, width, height, boxes))
        return described


def _description(scene: Scene, width: int, height: int, boxes: tuple[TextBox, ...]) -> FrameDescription:
    """The scene as a ``FrameDescription``: its sentence as the caption, its objects and text as facts."""
    seen = tuple(SeenObject(label=o.label, score=o.score, box=_pixels(o.box, width, height)) for o in scene.objects)
    return FrameDescription(caption=scene.description, objects=seen, on_screen_text=scene.text, text_boxes=boxes,
                            size=(width, height))


class ScriptedDetector:
    """``ObjectDetector``: the scene's objects, boxes in pixels of the image given."""

    name = "scripted-detector"

    def __init__(self, script: _Script) -> None:
        self.script = script
        self.calls = 0

    def detect(self, images: Sequence[np.ndarray]) -> list[sv.Detections]:
        self.calls += 1
        found = []
        for image in images:
            scene = self.script.scene(image)
            objects = scene[1].objects if scene else ()
            height, width = image.shape[:2]
            found.append(_detections([_pixels(o.box, width, height) for o in objects], [o.score for o in objects],
                                     [_class_id(o.label) for o in objects], [o.label for o in objects]))
        return found


def _detections(boxes: list, scores: list, class_ids: list, labels: list) -> sv.Detections:
    return make_detections(np.array(boxes, np.float32).reshape(-1, 4), scores, class_ids, labels)


class ScriptedReader:
    """``TextReader`` (OCR): the scene's on-screen text along the bottom of the image."""

    name = "scripted-reader"

    def __init__(self, script: _Script) -> None:
        self.script = script

    def read(self, image: np.ndarray) -> list[TextBox]:
        scene = self.script.scene(image)
        height, width = image.shape[:2]
        return [TextBox(text, (0.1 * width, 0.8 * height, 0.9 * width, 0.95 * height), 0.95)
                for text in (scene[1].text if scene else ())]


class ScriptedSpeech:
    """``SpeechToText``: the speaking clip's rows that fall in the audio given."""

    name = "scripted-speech"

    def __init__(self, script: _Script) -> None:
        self.script = script
        self.calls = 0

    def transcribe(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE, *,
                   offset_s: float = 0.0) -> list[SpeechSegment]:
        self.calls += 1
        clip = self.script.clip_speaking(audio)
        if clip is None:
            return []
        end_s = offset_s + audio.size / sample_rate
        return [SpeechSegment(start, end, text) for start, end, text in clip.speech  # type: ignore[misc]
                if start < end_s and end > offset_s]


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of in on at to is are was were and or it its this that with for by be".split())


class HashingEmbedder:
    """``TextEmbedder``: hashed bag of words plus one component every text shares, L2-normalised.
    Texts sharing words are near, so retrieval by words works without a model; the shared component
    lifts paraphrases that differ in a word (0.75 -> 0.84 for four words, one swapped) past the
    thresholds measured on E5, while texts with no word in common stay apart (0.36 for four words)."""

    name = "hashing-bow-256"
    dim = 256

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dim), np.float32)
        vectors[:, 0] = 1.5  # what every text shares
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                if word not in _STOP:
                    vectors[row, 1 + _bucket(word, self.dim - 1)] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _bucket(word: str, buckets: int) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % buckets


def _class_id(label: str) -> int:
    return int.from_bytes(hashlib.blake2b(label.encode(), digest_size=2).digest(), "little") % 1000


def scripted_perception(*clips: FakeClip) -> Perception:
    """A ``Perception`` whose describer, detector, OCR, speech and text embedder answer from the
    clips' scripts (default: every clip made in this run); tracking and appearance are the real
    model-free ones."""
    script = _Script(clips or tuple(_made))
    detector = ScriptedDetector(script)
    return Perception(describer=ScriptedDescriber(script), speech=ScriptedSpeech(script), embedder=HashingEmbedder(),
                      detector=detector, appearance=ColourAppearance(), new_tracker=ByteTracker,
                      tracker_name=ByteTracker.NAME, reader=ScriptedReader(script))
