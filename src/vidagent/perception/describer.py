"""The offline stand-in for a captioner: says what the detector and OCR see in a frame.

No image-captioning model runs offline, so ``DetectorDescriber`` writes a short, explicitly
labelled sentence from an ``ObjectDetector`` (COCO objects, with each instance's dominant colour,
size and position) and an optional ``TextReader`` (on-screen text). It names itself in the text
(``DESCRIPTION_PREFIX``) so an LLM reading it never mistakes it for a real caption. Example::

    [detector description, not a caption] 1 person (white, medium, middle left);
    1 dog (white and brown, small, middle right).

Descriptions stay within about ``MAX_WORDS`` words: when a frame holds many objects, fewer
instances per class are spelled out (down to counts only) and minor classes are only named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vidagent.perception.base import (Detections, FrameDescriber, FrameDescription, ObjectDetector, TextBox,
                                      TextReader)
from vidagent.perception.colour import MIN_COLOUR_PIXELS, central_region, colour_name
from vidagent.prompts import load_prompt, render

# ----------------------------------------------------------------------------- wording

DESCRIPTION_PREFIX = "[detector description, not a caption]"
DESCRIPTION_PREFIX_OCR = "[detector+OCR description, not a caption]"
NOTHING_DETECTED = "no COCO objects detected."
GROUP_TEMPLATE = "{count} {name} ({instances})"
GROUP_TEMPLATE_BARE = "{count} {name}"
INSTANCE_TEMPLATE = "{colour}, {size}, {position}"
INSTANCE_TEMPLATE_NO_COLOUR = "{size}, {position}"
MORE_INSTANCES = "+{n} more"
REPEATED_INSTANCE = "{phrase} ×{n}"
OTHER_CLASSES = "also {names}"
TEXT_TEMPLATE = 'On-screen text: {texts}.'
GROUP_SEPARATOR = "; "
INSTANCE_SEPARATOR = "; "

MAX_WORDS = 40
MAX_CLASSES = 4  # classes described in detail; the rest are only named
MAX_TEXT_WORDS = 12
MIN_TEXT_SCORE = 0.6
MIN_TEXT_CHARS = 2  # single characters are mostly OCR noise

SIZE_WORDS = (("small", 0.02), ("medium", 0.15), ("large", float("inf")))  # by box/frame area
PLURALS = {
    "person": "people", "bus": "buses", "bench": "benches", "couch": "couches",
    "sandwich": "sandwiches", "knife": "knives", "mouse": "mice", "wine glass": "wine glasses",
    "toothbrush": "toothbrushes", "sheep": "sheep", "skis": "skis", "scissors": "scissors",
    "broccoli": "broccoli", "tv": "TVs",
}

# ----------------------------------------------------------------------------- geometry words


def position_words(box: Sequence[float], width: int, height: int) -> str:
    """Where the box centre lies in a 3×3 grid: ``"top left"`` … ``"bottom right"``; the middle
    cell is ``"centre"``, the others of the middle row ``"middle left"``/``"middle right"``."""
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    cx, cy = (x1 + x2) / 2 / max(width, 1), (y1 + y2) / 2 / max(height, 1)
    horizontal = "left" if cx < 1 / 3 else "right" if cx > 2 / 3 else "centre"
    vertical = "top" if cy < 1 / 3 else "bottom" if cy > 2 / 3 else "middle"
    if (vertical, horizontal) == ("middle", "centre"):
        return "centre"
    return f"{vertical} {horizontal}"


def size_word(box: Sequence[float], width: int, height: int) -> str:
    """``small``/``medium``/``large`` from the box's share of the frame area."""
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    share = max(x2 - x1, 0.0) * max(y2 - y1, 0.0) / max(width * height, 1)
    return next(word for word, limit in SIZE_WORDS if share < limit)


def plural(label: str, count: int) -> str:
    if count == 1:
        return label
    return PLURALS.get(label, label + "s")


# ----------------------------------------------------------------------------- describer


@dataclass(frozen=True)
class _Instance:
    label: str
    colour: str
    size: str
    position: str
    area: float


def _instances(image: np.ndarray, detections: Detections) -> list[_Instance]:
    h, w = image.shape[:2]
    out = []
    for box, label in zip(detections.boxes, detections.labels):
        area = max(float(box[2] - box[0]), 0.0) * max(float(box[3] - box[1]), 0.0)
        region = central_region(image, box)
        colour = colour_name(region) if region.shape[0] * region.shape[1] >= MIN_COLOUR_PIXELS else ""
        out.append(_Instance(label, colour, size_word(box, w, h), position_words(box, w, h), area))
    return out


def _objects_phrase(instances: list[_Instance], per_class: int) -> str:
    """Objects grouped by class (largest first), with up to ``per_class`` instances spelled out."""
    groups: dict[str, list[_Instance]] = {}
    for inst in sorted(instances, key=lambda i: -i.area):
        groups.setdefault(inst.label, []).append(inst)
    parts = []
    for label, members in list(groups.items())[:MAX_CLASSES]:
        name = plural(label, len(members))
        if per_class <= 0:
            parts.append(GROUP_TEMPLATE_BARE.format(count=len(members), name=name))
            continue
        phrases: dict[str, int] = {}  # identical instance phrases collapse into "... ×n"
        for m in members:
            template = INSTANCE_TEMPLATE if m.colour else INSTANCE_TEMPLATE_NO_COLOUR
            phrase = template.format(colour=m.colour, size=m.size, position=m.position)
            phrases[phrase] = phrases.get(phrase, 0) + 1
        shown = [p if n == 1 else REPEATED_INSTANCE.format(phrase=p, n=n)
                 for p, n in list(phrases.items())[:per_class]]
        hidden = sum(list(phrases.values())[per_class:])
        if hidden:
            shown.append(MORE_INSTANCES.format(n=hidden))
        parts.append(GROUP_TEMPLATE.format(count=len(members), name=name,
                                           instances=INSTANCE_SEPARATOR.join(shown)))
    rest = list(groups)[MAX_CLASSES:]
    if rest:
        parts.append(OTHER_CLASSES.format(names=", ".join(rest)))
    return GROUP_SEPARATOR.join(parts) + "."


def _confident_text(boxes: Sequence[TextBox]) -> tuple[tuple[TextBox, ...], tuple[str, ...]]:
    """Confident OCR boxes in reading order (top to bottom, left to right), and their distinct
    texts with whitespace normalised."""
    kept = tuple(sorted((b for b in boxes
                         if b.score >= MIN_TEXT_SCORE and len(b.text.strip()) >= MIN_TEXT_CHARS),
                        key=lambda b: (round(b.box[1] / 10), b.box[0])))
    texts = dict.fromkeys(" ".join(b.text.split()) for b in kept)
    return kept, tuple(texts)


def _text_phrase(texts: tuple[str, ...]) -> str:
    words: list[str] = []
    quoted = []
    for text in texts:
        room = MAX_TEXT_WORDS - len(words)
        if room <= 0:
            break
        piece = text.split()[:room]
        words += piece
        quoted.append('"' + " ".join(piece) + ("…" if len(piece) < len(text.split()) else "") + '"')
    return TEXT_TEMPLATE.format(texts=", ".join(quoted))


def describe_detections(image: np.ndarray, detections: Detections,
                        texts: tuple[str, ...] = (), *, prefix: str = DESCRIPTION_PREFIX) -> str:
    """The description sentence of one frame, shortened to about ``MAX_WORDS`` words."""
    instances = _instances(image, detections)
    tail = f" {_text_phrase(texts)}" if texts else ""
    if not instances:
        return f"{prefix} {NOTHING_DETECTED}{tail}"
    for per_class in (3, 2, 1, 0):
        text = f"{prefix} {_objects_phrase(instances, per_class)}{tail}"
        if len(text.split()) <= MAX_WORDS:
            break
    return text


def detector_memory_note(detector: ObjectDetector, with_text: bool) -> str:
    """What an LLM should know about ``DetectorDescriber`` descriptions: no captioner wrote them."""
    classes = "80 everyday object classes" if "coco" in detector.name.lower() else "a fixed set of object classes"
    sources = f"an object detector ({classes}, with colour and position)" + (" and a text reader" if with_text else "")
    return render(load_prompt("vidagent.perception", "memory_note_detector"), sources=sources).strip()


def caption_memory_note(*, with_text: bool) -> str:
    """What an LLM should know about descriptions written by an image-captioning model."""
    then = ", followed by the on-screen text a text reader found" if with_text else ""
    return render(load_prompt("vidagent.perception", "memory_note_caption"), then=then).strip()


class DetectorDescriber:
    """``FrameDescriber`` built from an object detector and, optionally, an OCR reader.

    Each ``FrameDescription`` carries the sentence, ``objects`` (the label of every detection,
    best score first, including any the sentence only counts or names), ``on_screen_text``
    (distinct confident OCR lines in reading order) and ``text_boxes`` (those OCR boxes with
    positions and scores; OCR results scoring below ``MIN_TEXT_SCORE`` or shorter than
    ``MIN_TEXT_CHARS`` are dropped everywhere).
    """

    def __init__(self, detector: ObjectDetector, text_reader: TextReader | None = None) -> None:
        self.detector = detector
        self.text_reader = text_reader
        reader = f"+{text_reader.name}" if text_reader is not None else ""
        self.name = f"detector-describer({detector.name}{reader})"
        self.prefix = DESCRIPTION_PREFIX_OCR if text_reader is not None else DESCRIPTION_PREFIX
        self.memory_note = detector_memory_note(detector, text_reader is not None)

    def close(self) -> None:
        """Close the detector (and reader) if they hold resources, e.g. the detector's worker."""
        for model in (self.detector, self.text_reader):
            close = getattr(model, "close", None)
            if callable(close):
                close()

    def describe(self, images: Sequence[np.ndarray]) -> list[FrameDescription]:
        images = list(images)
        if not images:
            return []
        all_detections = self.detector.detect(images)
        out = []
        for image, detections in zip(images, all_detections):
            boxes, texts = _confident_text(self.text_reader.read(image)) if self.text_reader else ((), ())
            out.append(FrameDescription(text=describe_detections(image, detections, texts, prefix=self.prefix),
                                        objects=tuple(detections.labels), on_screen_text=texts,
                                        text_boxes=boxes))
        return out


class CaptionWithText:
    """``FrameDescriber`` from a real captioner plus OCR: the caption, then the on-screen text.

    Used when a captioning model (BLIP, a VLM) is configured: the caption says what happens, the
    reader keeps the text-in-frame memory that captioners tend to miss.
    """

    def __init__(self, captioner: FrameDescriber, text_reader: TextReader) -> None:
        self.captioner = captioner
        self.text_reader = text_reader
        self.name = f"caption+text({captioner.name}+{text_reader.name})"
        self.memory_note = caption_memory_note(with_text=True)

    def close(self) -> None:
        close = getattr(self.captioner, "close", None)
        if callable(close):
            close()

    def describe(self, images: Sequence[np.ndarray]) -> list[FrameDescription]:
        images = list(images)
        captions = self.captioner.describe(images)
        out = []
        for image, caption in zip(images, captions):
            boxes, texts = _confident_text(self.text_reader.read(image))
            text = f"{caption.text} {_text_phrase(texts)}" if texts else caption.text
            out.append(FrameDescription(text=text, objects=caption.objects, on_screen_text=texts, text_boxes=boxes))
        return out
