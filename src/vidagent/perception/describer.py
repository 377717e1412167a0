"""The offline stand-in for a captioner: finds what the detector and OCR see in a frame.

No image-captioning model runs offline, so ``DetectorDescriber`` gathers facts about each frame
from an ``ObjectDetector`` (COCO objects, each with its dominant colour), an optional
``TextReader`` (on-screen text), an optional ``ImageClassifier`` (a confident ImageNet guess for
each of the largest objects and for the whole frame) and an optional ``PoseEstimator`` (a few
words on the body pose of the largest people). It returns them as data (``FrameDescription``);
``vidagent.perception.frame_words`` puts them in words. Its ``label`` says once per memory that
no captioner wrote them, so an LLM reading them never mistakes them for a real caption.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

import numpy as np

from vidagent.perception.base import (FrameDescriber, FrameDescription, ImageClassifier, Label, ObjectDetector,
                                      PoseEstimator, SeenObject, TextBox, TextReader, read_texts)
from vidagent.perception.colour import MIN_COLOUR_PIXELS, colour_name, object_region
from vidagent.perception.detections import class_names
from vidagent.perception.frame_words import box_area, distinct_lines, reading_order_by_rows
from vidagent.perception.object_kind import confident_kind, square_crop
from vidagent.perception.pose_words import describe_pose
from vidagent.prompts import prompt

if TYPE_CHECKING:
    import supervision as sv

DESCRIPTION_PREFIX = "[detector description, not a caption]"
DESCRIPTION_PREFIX_OCR = "[detector+OCR description, not a caption]"

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


def confident_frame_labels(labels: Sequence[Label]) -> tuple[Label, ...]:
    """The whole frame's guesses likely enough to keep, likeliest first."""
    return tuple(label for label in labels if label.score >= MIN_FRAME_LABEL_SCORE)[:MAX_FRAME_LABELS]


def seen_objects(image: np.ndarray, detections: sv.Detections) -> list[SeenObject]:
    """The detections of one frame as facts, each with its dominant colour (none for tiny boxes)."""
    out = []
    for box, score, label in zip(detections.xyxy, detections.confidence, class_names(detections)):
        region = object_region(image, box, str(label))
        colour = colour_name(region) if region.shape[0] * region.shape[1] >= MIN_COLOUR_PIXELS else ""
        out.append(SeenObject(str(label), float(score), tuple(float(v) for v in box[:4]), colour))  # type: ignore[arg-type]
    return out


def confident_text(boxes: Sequence[TextBox]) -> tuple[tuple[TextBox, ...], tuple[str, ...]]:
    """Confident OCR boxes in reading order (top to bottom, left to right), and their distinct
    texts with whitespace normalised."""
    kept = tuple(reading_order_by_rows([b for b in boxes if b.score >= MIN_TEXT_SCORE and len(b.text.strip()) >= MIN_TEXT_CHARS]))
    return kept, distinct_lines(kept)


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
    """``FrameDescriber`` built from an object detector and, optionally, an OCR reader, an image
    classifier and a pose model.

    Each ``FrameDescription`` holds every detection (``objects``, in the detector's order, each with
    its colour, and its kind and pose where those models were sure), the frame's confident guesses
    (``labels``), ``on_screen_text`` (distinct confident OCR lines in reading order) and
    ``text_boxes`` (those OCR boxes with positions and scores; OCR results scoring below
    ``MIN_TEXT_SCORE`` or shorter than ``MIN_TEXT_CHARS`` are dropped everywhere).
    """

    def __init__(self, detector: ObjectDetector, text_reader: TextReader | None = None, *,
                 classifier: ImageClassifier | None = None, pose: PoseEstimator | None = None) -> None:
        self.detector = detector
        self.text_reader = text_reader
        self.classifier = classifier
        self.pose = pose
        extras = "".join(f"+{model.name}" for model in (text_reader, classifier, pose) if model is not None)
        self.name = f"detector-describer({detector.name}{extras})"
        self.label = DESCRIPTION_PREFIX_OCR if text_reader is not None else DESCRIPTION_PREFIX
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
        objects = [seen_objects(image, detections) for image, detections in zip(images, all_detections)]
        frame_labels = self._classify(images, objects)
        self._add_poses(images, objects)
        readings = read_texts(self.text_reader, images) if self.text_reader else [[] for _ in images]
        out = []
        for image, frame_objects, labels, reading in zip(images, objects, frame_labels, readings):
            boxes, texts = confident_text(reading)
            height, width = image.shape[:2]
            out.append(FrameDescription(objects=tuple(frame_objects), labels=labels, on_screen_text=texts,
                                        text_boxes=boxes, size=(width, height)))
        return out

    def _classify(self, images: list[np.ndarray], objects: list[list[SeenObject]]) -> list[tuple[Label, ...]]:
        """Give the largest objects of each frame their kind (in place) and return each frame's
        confident guesses; one classifier call for every frame and the crops of its largest objects."""
        if self.classifier is None:
            return [() for _ in images]
        crops: list[np.ndarray] = []
        owners: list[tuple[int, int]] = []
        for frame_index, (image, frame_objects) in enumerate(zip(images, objects)):
            areas = [box_area(seen.box) for seen in frame_objects]
            for index in sorted(range(len(areas)), key=lambda i: -areas[i])[:MAX_CLASSIFIED_PER_FRAME]:
                crop = square_crop(image, frame_objects[index].box)
                if min(crop.shape[:2]) >= MIN_CROP_SIDE:
                    crops.append(crop)
                    owners.append((frame_index, index))
        labels = self.classifier.classify([*images, *crops], top_k=MAX_FRAME_LABELS)
        for (frame_index, index), crop_labels in zip(owners, labels[len(images):]):
            seen = objects[frame_index][index]
            kind = confident_kind(seen.label, crop_labels)
            if kind:
                objects[frame_index][index] = replace(seen, kind=kind)
        return [confident_frame_labels(frame_labels) for frame_labels in labels[:len(images)]]

    def _add_poses(self, images: list[np.ndarray], objects: list[list[SeenObject]]) -> None:
        """Give the largest people of each frame their pose words (in place)."""
        if self.pose is None:
            return
        for image, frame_objects in zip(images, objects):
            areas = [box_area(seen.box) for seen in frame_objects]
            smallest = MIN_POSE_BOX_SHARE * image.shape[0] * image.shape[1]
            people = sorted((i for i, seen in enumerate(frame_objects) if seen.label == "person" and areas[i] >= smallest),
                            key=lambda i: -areas[i])[:MAX_POSES_PER_FRAME]
            if not people:
                continue
            poses = self.pose.estimate(image, [frame_objects[i].box for i in people])
            for index, pose in zip(people, poses):
                words = describe_pose(pose)
                if words:
                    frame_objects[index] = replace(frame_objects[index], pose=words)


class CaptionWithText:
    """``FrameDescriber`` from a real captioner plus OCR: the caption, and the on-screen text.

    Used when a captioning model (BLIP, a VLM) is configured: the caption says what happens, the
    reader keeps the text-in-frame memory that captioners tend to miss.
    """

    label = ""

    def __init__(self, captioner: FrameDescriber, text_reader: TextReader) -> None:
        self.captioner = captioner
        self.text_reader = text_reader
        self.name = f"caption+text({captioner.name}+{text_reader.name})"
        self.memory_note = caption_memory_note(with_text=True)

    def close(self) -> None:
        close = getattr(self.captioner, "close", None)
        if callable(close):
            close()

    @property
    def frames_per_request(self) -> int:
        """Frames the captioner reads for one caption (``SegmentCaptioner``); 1 for a per-frame captioner."""
        return int(getattr(self.captioner, "frames_per_request", 1))

    @property
    def concurrency(self) -> int:
        return int(getattr(self.captioner, "concurrency", 1))

    def describe_groups(self, groups: Sequence[Sequence[np.ndarray]]) -> list[list[FrameDescription]]:
        """A caption per group (a segment's frames, from a ``SegmentCaptioner``) given to each of its frames; the
        on-screen text read in the group's middle frame (one reading per segment, as with one frame a segment)."""
        groups = [list(group) for group in groups]
        captioned = self.captioner.describe_groups(groups)  # type: ignore[attr-defined]
        out: list[list[FrameDescription]] = []
        readings = read_texts(self.text_reader, [group[len(group) // 2] for group in groups])
        for group, captions, reading in zip(groups, captioned, readings):
            middle = len(group) // 2
            boxes, texts = confident_text(reading)
            out.append([replace(caption, on_screen_text=texts, text_boxes=boxes) if index == middle else caption
                        for index, caption in enumerate(captions)])
        return out

    def describe(self, images: Sequence[np.ndarray]) -> list[FrameDescription]:
        images = list(images)
        captions = self.captioner.describe(images)
        out = []
        for caption, reading in zip(captions, read_texts(self.text_reader, images)):
            boxes, texts = confident_text(reading)
            out.append(replace(caption, on_screen_text=texts, text_boxes=boxes))
        return out
