"""What kind of thing one detected object is, from an image classifier's look at its crop.

The detector names an object's COCO class ("dog"); an ImageNet classifier shown a square crop
around its box may name its kind ("Border collie"). A guess is kept only when it is likely
enough and agrees with the detector on animal versus thing; it is written as a note with a
question mark ("Border collie?"), since it stays a guess.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from vidagent.perception.base import Label
from vidagent.perception.classifier import imagenet_labels

CROP_MARGIN = 0.1  # share of the box's longer side added around a crop (context helps the classifier)
MIN_KIND_SCORE = 0.35  # an object's crop: its top guess, kept when at least this likely
# A person's crop is mostly named after what they wear or hold; right guesses ("ballplayer" 0.6-0.75) scored
# higher than wrong ones ("dumbbell" on a yoga pose 0.4, "racket" on a batter 0.36-0.45).
MIN_PERSON_KIND_SCORE = 0.5
# ImageNet classes 0-397 are animals, the rest things and scenes. A crop's guess is kept only when it
# agrees with the detector on that (on dev frames the disagreeing guesses were all wrong: a skateboard
# "schipperke", a dog "ski").
IMAGENET_ANIMALS = range(0, 398)
COCO_ANIMALS = frozenset({"bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe"})
KIND_NOTE = "{name}?"  # an ImageNet guess for one object, e.g. "Border collie?"


def square_crop(image: np.ndarray, box: Sequence[float], margin: float = CROP_MARGIN) -> np.ndarray:
    """The square region around ``box`` (its longer side plus ``margin`` of it), clipped to the image."""
    h, w = image.shape[:2]
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    side = max(x2 - x1, y2 - y1) * (1 + 2 * margin)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    left, top = int(max(0, cx - side / 2)), int(max(0, cy - side / 2))
    right, bottom = int(min(w, cx + side / 2)), int(min(h, cy + side / 2))
    return image[top:max(bottom, top + 1), left:max(right, left + 1)]


def confident_kind(detected: str, labels: Sequence[Label]) -> str:
    """The guessed kind of one object (detected as COCO class ``detected``) from its crop's labels,
    or ``""`` when the top guess is not likely enough or contradicts the detector (animal vs thing)."""
    if not labels or labels[0].score < (MIN_PERSON_KIND_SCORE if detected == "person" else MIN_KIND_SCORE):
        return ""
    names = imagenet_labels()
    guessed_animal = labels[0].name in names and names.index(labels[0].name) in IMAGENET_ANIMALS
    if guessed_animal != (detected in COCO_ANIMALS):
        return ""
    return labels[0].name


def kind_note(detected: str, labels: Sequence[Label]) -> str:
    """``confident_kind`` as a note ("Border collie?"), or ``""``."""
    kind = confident_kind(detected, labels)
    return KIND_NOTE.format(name=kind) if kind else ""
