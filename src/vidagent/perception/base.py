"""Protocols and result types shared by the perception models.

Every model role is a small protocol so a real backend (Hugging Face, an OpenAI-compatible
server) plugs in beside the offline default. Images are RGB ``uint8`` arrays of shape (H, W, 3);
audio is 16 kHz mono ``float32``. Detections are supervision's ``sv.Detections`` (see
``vidagent.perception.detections``); supervision is imported only where detections are made or read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import supervision as sv

    from vidagent.video.video import SampledFrame


@dataclass(frozen=True)
class TextBox:
    """A piece of on-screen text with its box (``x1, y1, x2, y2`` pixels) and confidence."""

    text: str
    box: tuple[float, float, float, float]
    score: float


@dataclass(frozen=True)
class SpeechSegment:
    """Transcribed speech between two times (seconds from the start of the audio)."""

    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True)
class VQAResult:
    """The answer to a question about a few frames, with what the model saw in them."""

    description: str
    answer: str

    @classmethod
    def from_reply(cls, text: str) -> "VQAResult":
        """Split a "Description: ... Answer: ..." reply (the ``vqa_vision`` form); a reply without "Answer:" is all
        answer."""
        text = text.strip()
        match = re.search(r"answer\s*:\s*(.*)", text, flags=re.IGNORECASE | re.DOTALL)
        if not match:
            return cls(description="", answer=text)
        description = re.sub(r"^\s*description\s*:\s*", "", text[: match.start()], flags=re.IGNORECASE).strip()
        return cls(description=description, answer=match.group(1).strip())


@dataclass(frozen=True)
class Label:
    """One class an image classifier gives an image, with its probability."""

    name: str
    score: float


@dataclass(frozen=True)
class Pose:
    """Body keypoints of one person: ``keypoints`` is (17, 3) ``x, y, score`` in pixels of the
    image, in the COCO keypoint order (nose, eyes, ears, shoulders, elbows, wrists, hips, knees,
    ankles; left before right)."""

    keypoints: np.ndarray
    box: tuple[float, float, float, float]


@dataclass(frozen=True)
class SeenObject:
    """One object a detector found in a frame, with the words other models added about it."""

    label: str  # the detector's class name ("dog")
    score: float
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels of the described frame
    colour: str = ""  # its dominant colour ("white and brown"); "" where it was too small to tell
    kind: str = ""  # an image classifier's confident guess of what it is ("Border collie"); "" for none
    pose: str = ""  # body-pose words for a person ("standing, arms raised"); "" for none


@dataclass(frozen=True)
class FrameDescription:
    """What was seen in one frame, as facts (``vidagent.perception.frame_words`` puts them in words).

    ``caption`` is a captioning model's sentence, or ``None`` where no captioner ran and the frame is
    known by its ``objects`` (a detector's, with colours, kinds and poses) and ``labels`` (whole-frame
    image-classifier guesses, likeliest first). ``on_screen_text`` holds the distinct lines a text
    reader found, in reading order, and ``text_boxes`` those readings with their boxes and scores.
    ``size`` is the (width, height) of the frame the boxes are in.
    """

    caption: str | None = None
    objects: tuple[SeenObject, ...] = field(default=())
    labels: tuple[Label, ...] = field(default=())
    on_screen_text: tuple[str, ...] = field(default=())
    text_boxes: tuple[TextBox, ...] = field(default=())
    size: tuple[int, int] = (0, 0)


class TextEmbedder(Protocol):
    """Maps text to L2-normalised ``float32`` vectors; queries and passages may be encoded apart."""

    name: str
    dim: int

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...


class SpeechToText(Protocol):
    name: str

    def transcribe(self, audio: np.ndarray, sample_rate: int = 16000, *, offset_s: float = 0.0) -> list[SpeechSegment]:
        """Timed speech in ``audio``; times are seconds from its start plus ``offset_s``."""
        ...


class TextReader(Protocol):
    """OCR."""

    name: str

    def read(self, image: np.ndarray) -> list[TextBox]: ...


def read_texts(reader: TextReader, images: Sequence[np.ndarray]) -> list[list[TextBox]]:
    """Each image's text lines by ``reader``, several at once where it reads that way (a ``read_many``)."""
    read_many = getattr(reader, "read_many", None)
    if callable(read_many):
        return list(read_many(images))
    return [reader.read(image) for image in images]


class ImageClassifier(Protocol):
    """Names what an image shows from a fixed label set (ImageNet-1k for the offline default)."""

    name: str

    def classify(self, images: Sequence[np.ndarray], top_k: int = 3) -> list[list[Label]]:
        """The ``top_k`` likeliest labels of each image, likeliest first."""
        ...


class VideoClassifier(Protocol):
    """Names the action a short clip shows (Kinetics classes for VideoMAE; given texts for X-CLIP).
    No offline default exists: a Hugging Face backend (``vidagent.perception.hf``) when configured."""

    name: str
    num_frames: int  # frames a clip should have (spread evenly over it)

    def classify(self, clips: Sequence[Sequence[np.ndarray]], top_k: int = 3) -> list[list[Label]]:
        """The ``top_k`` likeliest labels of each clip (RGB frames in time order), likeliest first."""
        ...


class PoseEstimator(Protocol):
    """Body keypoints of the people in an image, one ``Pose`` per given person box."""

    name: str

    def estimate(self, image: np.ndarray, boxes: Sequence[Sequence[float]]) -> list[Pose]: ...


class Segmenter(Protocol):
    """Masks of the objects in given boxes of one image: one bool ``(H, W)`` mask over the whole image
    per box, in box order. ``labels`` are the boxes' class names ("person", "dog"), which a segmenter
    may use to choose how to segment each (``vidagent.perception.masks`` codes masks for storage)."""

    name: str

    def segment(self, image: np.ndarray, boxes: Sequence[Sequence[float]], labels: Sequence[str]) -> list[np.ndarray]: ...


class ObjectDetector(Protocol):
    """Finds objects of a fixed class set: one ``sv.Detections`` per image (boxes in its pixels, class
    names in ``data["class_name"]``; ``vidagent.perception.detections.make_detections``)."""

    name: str

    def detect(self, images: Sequence[np.ndarray]) -> list[sv.Detections]: ...


class FrameDescriber(Protocol):
    """Describes frames (a captioner, or the offline stand-in built from other models).

    ``memory_note`` tells an LLM reading the descriptions what wrote them (e.g. that they are
    detector lists, not captions); an empty string when there is nothing to say. ``label`` is the
    mark the describer's sentences begin with ("[detector description, not a caption]"; "" for a
    captioner): said once per memory, and part of the text segment embeddings are made from.
    """

    name: str
    memory_note: str
    label: str

    def describe(self, images: Sequence[np.ndarray]) -> list[FrameDescription]: ...


@runtime_checkable
class SegmentCaptioner(Protocol):
    """A ``FrameDescriber`` that captions a stretch of video from several of its frames at once (a vision chat
    model reading a segment's frames in one request): ``frames_per_request`` frames of each segment are sampled,
    ``describe_groups`` gets them grouped by segment, and every frame of a group gets the group's caption.
    ``concurrency`` is how many groups it works on at once."""

    name: str
    memory_note: str
    label: str
    frames_per_request: int
    concurrency: int

    def describe(self, images: Sequence[np.ndarray]) -> list[FrameDescription]: ...

    def describe_groups(self, groups: Sequence[Sequence[np.ndarray]]) -> list[list[FrameDescription]]: ...


class VisualQA(Protocol):
    """Answers a question about a few frames of a video (in time order).

    ``sees_frames``: whether it looks at the pixels (False: it reads the frames' descriptions, the
    same kind of text the memory's segment descriptions are). A backend that needs a chat model
    (``vidagent.tools.vqa``) is made for one, so every backend is asked the same way.
    """

    name: str
    sees_frames: bool

    def answer(self, question: str, frames: Sequence[SampledFrame]) -> VQAResult: ...


class OpenVocabularyDetector(Protocol):
    """Finds objects named by free-text queries (Grounding DINO, OWL-ViT); labels are the queries."""

    name: str

    def detect(self, images: Sequence[np.ndarray], queries: Sequence[str]) -> list[sv.Detections]: ...


class Tracker(Protocol):
    """Links detections in consecutive sampled frames into tracks (one tracker per video)."""

    name: str

    def update(self, detections: sv.Detections, time_s: float | None = None) -> sv.Detections:
        """The next sampled frame's detections, in their order, with ``tracker_id`` set (>= 0, or -1
        where a detection is not tracked). ``time_s``: the frame's time, given for every frame of a
        video or for none."""
        ...

    def reset(self) -> None: ...


class AppearanceModel(Protocol):
    """Appearance features of object crops, for re-identifying an object across track breaks.

    ``similarity`` returns calibrated pairwise similarities in [0, 1] on which VideoAgent's re-ID
    thresholds apply (above 0.5 to every member of a group and above 0.62 to one of them).
    """

    name: str
    dim: int

    def features(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """(N, dim) float32 features, one row per RGB crop."""
        ...

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(len(a), len(b)) similarities in [0, 1] between rows of two feature matrices."""
        ...


@runtime_checkable
class TextSearchableAppearance(Protocol):
    """An appearance model whose object features begin with image features of a joint image-text
    space (CLIP): ``text_features`` embeds texts into it, so free-form words find stored objects
    (VideoAgent's feature table). ``text_dim`` is how many leading feature columns that space takes."""

    name: str
    text_dim: int

    def text_features(self, texts: Sequence[str]) -> np.ndarray:
        """(N, text_dim) float32 unit rows, comparable with the first ``text_dim`` feature columns."""
        ...


class ImageTextEmbedder(Protocol):
    """Images and text in one vector space (CLIP, SigLIP): L2-normalised float32 rows."""

    name: str
    dim: int

    def embed_images(self, images: Sequence[np.ndarray]) -> np.ndarray: ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray: ...
