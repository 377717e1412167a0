"""How a frame's facts read: the one place that puts a ``FrameDescription`` into words.

A frame is known by a captioner's sentence, or by the objects a detector found (with the colour,
kind and pose other models added) and the whole frame's image-classifier guesses. ``seen_words``
says what was seen (what planners read, and what the memory's ``description`` columns hold);
``describer_sentence`` is the offline describer's whole sentence, its label first and the frame's
on-screen text last, the text each segment's embedding is made from. Nothing parses these words
back: the facts are stored beside them. Example of ``seen_words``::

    1 person (standing, arms raised, white, medium, middle left); 1 dog (Border collie?, white and
    brown, small, middle right). ImageNet guesses for the frame: drum 61%, drumstick 10%.

Object phrases stay within about ``MAX_WORDS`` words: when a frame holds many objects, fewer
instances per class are spelled out (down to counts only) and minor classes are only named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from vidagent.perception.base import FrameDescription, Label, SeenObject, TextBox
from vidagent.perception.object_kind import KIND_NOTE

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
TEXT_LEAD = "On-screen text:"
GROUP_SEPARATOR = "; "
INSTANCE_SEPARATOR = "; "

# Words of the objects phrase: the describer's budget was 40 with its five-word label counted in.
MAX_WORDS = 35
MAX_CLASSES = 4  # classes described in detail; the rest are only named
MAX_TEXT_WORDS = 12  # of a frame's on-screen text in the describer's sentence

SIZE_WORDS = (("small", 0.02), ("medium", 0.15), ("large", float("inf")))  # by box/frame area
PLURALS = {
    "person": "people", "bus": "buses", "bench": "benches", "couch": "couches",
    "sandwich": "sandwiches", "knife": "knives", "mouse": "mice", "wine glass": "wine glasses",
    "toothbrush": "toothbrushes", "sheep": "sheep", "skis": "skis", "scissors": "scissors",
    "broccoli": "broccoli", "tv": "TVs",
}


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


def box_area(box: Sequence[float]) -> float:
    """A box's area in pixels (0 for a degenerate box)."""
    return max(float(box[2]) - float(box[0]), 0.0) * max(float(box[3]) - float(box[1]), 0.0)


def plural(label: str, count: int) -> str:
    if count == 1:
        return label
    return PLURALS.get(label, label + "s")


# Not ocr.reading_order_by_lines (lines found by overlap): the order the describer and the memory's text have kept.
def reading_order_by_rows(boxes: Sequence[TextBox]) -> list[TextBox]:
    """Text boxes top to bottom, then left to right (lines 10 pixels apart count as one row)."""
    return sorted(boxes, key=lambda b: (round(b.box[1] / 10), b.box[0]))


def distinct_lines(boxes: Sequence[TextBox]) -> tuple[str, ...]:
    """The distinct texts of ``boxes`` in reading order, white space normalised."""
    return tuple(dict.fromkeys(" ".join(b.text.split()) for b in reading_order_by_rows(boxes)))


# ----------------------------------------------------------------------------- words


def seen_words(frame: FrameDescription) -> str:
    """What was seen in the frame: its caption, or its objects and the frame's guesses."""
    if frame.caption is not None:
        return " ".join(frame.caption.split())
    objects = objects_phrase(frame.objects, frame.size)
    labels = frame_labels_phrase(frame.labels)
    return f"{objects} {labels}" if labels else objects


def describer_sentence(frame: FrameDescription, label: str = "") -> str:
    """The describer's whole sentence for the frame: ``label``, what was seen, then its on-screen text
    (``On-screen text: "…", "…".``, at most ``MAX_TEXT_WORDS`` words)."""
    seen = seen_words(frame)
    text = text_phrase(frame.on_screen_text) if frame.on_screen_text else ""
    return " ".join(part for part in (label, seen, text) if part)


def objects_phrase(objects: Sequence[SeenObject], size: tuple[int, int]) -> str:
    """Objects grouped by class (largest first), shortened until the phrase is at most ``MAX_WORDS``
    words; ``NOTHING_DETECTED`` for none."""
    if not objects:
        return NOTHING_DETECTED
    instances = [_instance(seen, size) for seen in objects]
    phrase = ""
    for per_class in (3, 2, 1, 0):
        phrase = _grouped(instances, per_class)
        if len(phrase.split()) <= MAX_WORDS:
            break
    return phrase


def frame_labels_phrase(labels: Sequence[Label]) -> str:
    """The whole frame's guesses (``ImageNet guesses for the frame: drum 61%.``), or ``""`` for none."""
    if not labels:
        return ""
    return FRAME_LABELS_TEMPLATE.format(labels=", ".join(
        FRAME_LABEL_TEMPLATE.format(name=label.name, percent=round(label.score * 100)) for label in labels))


def text_phrase(texts: Sequence[str]) -> str:
    """A frame's on-screen text as the describer's sentence ends: quoted lines, cut at ``MAX_TEXT_WORDS``."""
    words: list[str] = []
    quoted = []
    for text in texts:
        room = MAX_TEXT_WORDS - len(words)
        if room <= 0:
            break
        piece = text.split()[:room]
        words += piece
        quoted.append('"' + " ".join(piece) + ("…" if len(piece) < len(text.split()) else "") + '"')
    return f"{TEXT_LEAD} {', '.join(quoted)}."


@dataclass(frozen=True)
class _Instance:
    label: str
    area: float
    phrase: str  # its notes (kind, pose), then colour, size and position


def _instance(seen: SeenObject, size: tuple[int, int]) -> _Instance:
    width, height = size
    template = INSTANCE_TEMPLATE if seen.colour else INSTANCE_TEMPLATE_NO_COLOUR
    notes = ((KIND_NOTE.format(name=seen.kind),) if seen.kind else ()) + ((seen.pose,) if seen.pose else ())
    where = template.format(colour=seen.colour, size=size_word(seen.box, width, height),
                            position=position_words(seen.box, width, height))
    return _Instance(seen.label, box_area(seen.box), ", ".join((*notes, where)))


def _grouped(instances: list[_Instance], per_class: int) -> str:
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
        for member in members:
            phrases[member.phrase] = phrases.get(member.phrase, 0) + 1
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
