"""The offline stand-in for a captioner: says what the detector and OCR see in a frame.

No image-captioning model runs offline, so ``DetectorDescriber`` writes a short, explicitly
labelled sentence from an ``ObjectDetector`` (COCO objects, with each instance's dominant colour,
size and position), an optional ``TextReader`` (on-screen text) and an optional
``ImageClassifier`` (ImageNet guesses for each described object and for the whole frame) and an
optional ``PoseEstimator`` (a few words on the body pose of the largest people). It
names itself in the text (``DESCRIPTION_PREFIX``) so an LLM reading it never mistakes it for a
real caption. Example::

    [detector description, not a caption] 1 person (standing, arms raised, white, medium, middle left);
    1 dog (Border collie?, white and brown, small, middle right).
    ImageNet guesses for the frame: drum 61%, drumstick 10%.

Descriptions stay within about ``MAX_WORDS`` words: when a frame holds many objects, fewer
instances per class are spelled out (down to counts only) and minor classes are only named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from vidagent.perception.base import (FrameDescriber, FrameDescription, ImageClassifier, Label, ObjectDetector,
                                      PoseEstimator, TextBox, TextReader)
from vidagent.perception.colour import MIN_COLOUR_PIXELS, central_region, colour_name
from vidagent.perception.detections import class_names
from vidagent.perception.object_kind import kind_note, square_crop
from vidagent.perception.pose_words import describe_pose
from vidagent.prompts import prompt

if TYPE_CHECKING:
    import supervision as sv

# ----------------------------------------------------------------------------- wording

DESCRIPTION_PREFIX = "[detector description, not a caption]"
DESCRIPTION_PREFIX_OCR = "[detector+OCR description, not a caption]"
NOTHING_DETECTED = "no COCO objects detected."
GROUP_TEMPLATE = "{count} {name} ({instances})"
GROUP_TEMPLATE_BARE = "{count} {name}"
INSTANCE_TEMPLATE = "{colour}, {size}, {position}"
INSTANCE_TEMPLATE_NO_COLOUR = "{size}, {position}"
FRAME_LABELS_TEMPLATE = "ImageNet guesses for the frame: {labels}."
FRAME_LABEL_TEMPLATE = "{name} {percent}%"
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

# ImageNet guesses (EfficientNet-Lite0 softmax). Measured on frames of the dev clips: right whole-frame
# guesses scored 0.15-0.75 (drum 0.61, ballplayer 0.75, boathouse 0.44, frying pan 0.27, acoustic guitar
# 0.26, stage 0.14), wrong ones mostly below 0.15 (ski mask 0.14 on a kitchen, oboe 0.20 on a guitar neck).
MIN_FRAME_LABEL_SCORE = 0.15
MAX_FRAME_LABELS = 2
MAX_CLASSIFIED_PER_FRAME = 6  # largest objects first
MAX_POSES_PER_FRAME = 3  # largest people first
MIN_POSE_BOX_SHARE = 0.01  # people smaller than this share of the frame are too small for MoveNet
MIN_CROP_SIDE = 8  # pixels; thinner crops are not classified

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


def _area(box: Sequence[float]) -> float:
    """A box's area in pixels (0 for a degenerate box)."""
    return max(float(box[2] - box[0]), 0.0) * max(float(box[3] - box[1]), 0.0)


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
    notes: tuple[str, ...] = ()  # words other models add (an ImageNet kind, a pose)


def _instances(image: np.ndarray, detections: sv.Detections,
               notes: Sequence[tuple[str, ...]] = ()) -> list[_Instance]:
    h, w = image.shape[:2]
    out = []
    for index, (box, label) in enumerate(zip(detections.xyxy, class_names(detections))):
        region = central_region(image, box)
        colour = colour_name(region) if region.shape[0] * region.shape[1] >= MIN_COLOUR_PIXELS else ""
        extra = tuple(notes[index]) if index < len(notes) else ()
        out.append(_Instance(label, colour, size_word(box, w, h), position_words(box, w, h), _area(box), extra))
    return out


def frame_labels_phrase(labels: Sequence[Label]) -> str:
    """The whole frame's likeliest ImageNet guesses, or ``""`` when none is likely enough."""
    shown = [label for label in labels if label.score >= MIN_FRAME_LABEL_SCORE][:MAX_FRAME_LABELS]
    if not shown:
        return ""
    return FRAME_LABELS_TEMPLATE.format(labels=", ".join(
        FRAME_LABEL_TEMPLATE.format(name=label.name, percent=round(label.score * 100)) for label in shown))


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
            phrase = ", ".join((*m.notes, template.format(colour=m.colour, size=m.size, position=m.position)))
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


def describe_detections(image: np.ndarray, detections: sv.Detections,
                        texts: tuple[str, ...] = (), *, prefix: str = DESCRIPTION_PREFIX,
                        notes: Sequence[tuple[str, ...]] = (), frame_phrase: str = "") -> str:
    """The description sentence of one frame, shortened to about ``MAX_WORDS`` words (the objects
    part; ``frame_phrase`` and the on-screen text follow it). ``notes[i]`` are words other models
    add about detection ``i``."""
    instances = _instances(image, detections, notes)
    tail = "".join(f" {part}" for part in (frame_phrase, _text_phrase(texts) if texts else "") if part)
    if not instances:
        return f"{prefix} {NOTHING_DETECTED}{tail}"
    for per_class in (3, 2, 1, 0):
        objects = f"{prefix} {_objects_phrase(instances, per_class)}"
        if len(objects.split()) <= MAX_WORDS:
            break
    return objects + tail


def detector_memory_note(detector: ObjectDetector, with_text: bool, with_classifier: bool = False,
                         with_pose: bool = False) -> str:
    """What an LLM should know about ``DetectorDescriber`` descriptions: no captioner wrote them."""
    classes = "80 everyday object classes" if "coco" in detector.name.lower() else "a fixed set of object classes"
    sources = [f"an object detector ({classes}, with colour and position)"]
    if with_classifier:
        sources.append("an image classifier (guesses among 1,000 ImageNet kinds, marked '?')")
    if with_pose:
        sources.append("a body-pose model (standing, sitting, arms raised...)")
    if with_text:
        sources.append("a text reader")
    sources_text = sources[0] if len(sources) == 1 else ", ".join(sources[:-1]) + " and " + sources[-1]
    return prompt("vidagent.perception", "memory_note_detector").render(sources=sources_text).strip()


def caption_memory_note(*, with_text: bool) -> str:
    """What an LLM should know about descriptions written by an image-captioning model."""
    then = ", followed by the on-screen text a text reader found" if with_text else ""
    return prompt("vidagent.perception", "memory_note_caption").render(then=then).strip()


class DetectorDescriber:
    """``FrameDescriber`` built from an object detector and, optionally, an OCR reader.

    Each ``FrameDescription`` carries the sentence, ``objects`` (the label of every detection,
    best score first, including any the sentence only counts or names), ``on_screen_text``
    (distinct confident OCR lines in reading order) and ``text_boxes`` (those OCR boxes with
    positions and scores; OCR results scoring below ``MIN_TEXT_SCORE`` or shorter than
    ``MIN_TEXT_CHARS`` are dropped everywhere).
    """

    def __init__(self, detector: ObjectDetector, text_reader: TextReader | None = None, *,
                 classifier: ImageClassifier | None = None, pose: PoseEstimator | None = None) -> None:
        self.detector = detector
        self.text_reader = text_reader
        self.classifier = classifier
        self.pose = pose
        extras = "".join(f"+{model.name}" for model in (text_reader, classifier, pose) if model is not None)
        self.name = f"detector-describer({detector.name}{extras})"
        self.prefix = DESCRIPTION_PREFIX_OCR if text_reader is not None else DESCRIPTION_PREFIX
        self.memory_note = detector_memory_note(detector, text_reader is not None, classifier is not None,
                                                pose is not None)

    def close(self) -> None:
        """Close the detector (and reader) if they hold resources, e.g. the detector's worker."""
        for model in (self.detector, self.text_reader, self.classifier, self.pose):
            close = getattr(model, "close", None)
            if callable(close):
                close()

    def describe(self, images: Sequence[np.ndarray]) -> list[FrameDescription]:
        images = list(images)
        if not images:
            return []
        all_detections = self.detector.detect(images)
        notes, frame_phrases = self._classify(images, all_detections)
        self._add_poses(images, all_detections, notes)
        out = []
        for image, detections, frame_notes, frame_phrase in zip(images, all_detections, notes, frame_phrases):
            boxes, texts = _confident_text(self.text_reader.read(image)) if self.text_reader else ((), ())
            text = describe_detections(image, detections, texts, prefix=self.prefix, notes=frame_notes,
                                       frame_phrase=frame_phrase)
            out.append(FrameDescription(text=text, objects=tuple(class_names(detections)), on_screen_text=texts,
                                        text_boxes=boxes))
        return out

    def _classify(self, images: list[np.ndarray], all_detections: list[sv.Detections]
                  ) -> tuple[list[list[tuple[str, ...]]], list[str]]:
        """Per frame: notes per detection (its ImageNet kind) and the whole frame's guesses phrase;
        one classifier call for every frame and the crops of its largest objects."""
        notes: list[list[tuple[str, ...]]] = [[() for _ in range(len(detections))] for detections in all_detections]
        if self.classifier is None:
            return notes, ["" for _ in images]
        crops: list[np.ndarray] = []
        owners: list[tuple[int, int]] = []
        for frame_index, (image, detections) in enumerate(zip(images, all_detections)):
            areas = [_area(box) for box in detections.xyxy]
            for index in sorted(range(len(areas)), key=lambda i: -areas[i])[:MAX_CLASSIFIED_PER_FRAME]:
                crop = square_crop(image, detections.xyxy[index])
                if min(crop.shape[:2]) >= MIN_CROP_SIDE:
                    crops.append(crop)
                    owners.append((frame_index, index))
        labels = self.classifier.classify([*images, *crops], top_k=MAX_FRAME_LABELS)
        for (frame_index, index), crop_labels in zip(owners, labels[len(images):]):
            kind = kind_note(class_names(all_detections[frame_index])[index], crop_labels)
            if kind:
                notes[frame_index][index] = (kind,)
        return notes, [frame_labels_phrase(frame_labels) for frame_labels in labels[:len(images)]]

    def _add_poses(self, images: list[np.ndarray], all_detections: list[sv.Detections],
                   notes: list[list[tuple[str, ...]]]) -> None:
        """Add pose words to the notes of the largest people of each frame."""
        if self.pose is None:
            return
        for image, detections, frame_notes in zip(images, all_detections, notes):
            areas = [_area(box) for box in detections.xyxy]
            smallest = MIN_POSE_BOX_SHARE * image.shape[0] * image.shape[1]
            people = sorted((i for i, label in enumerate(class_names(detections)) if label == "person" and areas[i] >= smallest),
                            key=lambda i: -areas[i])[:MAX_POSES_PER_FRAME]
            if not people:
                continue
            poses = self.pose.estimate(image, [detections.xyxy[i] for i in people])
            for index, pose in zip(people, poses):
                words = describe_pose(pose)
                if words:
                    frame_notes[index] = (*frame_notes[index], words)


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

