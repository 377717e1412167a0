"""Colour words for pixels: the one place that names colours (describer, object memory).

Each pixel is named from its HSV values as one of black, white, grey, red, orange, yellow,
brown, green, cyan, blue, purple, pink; a region's colour is its most common name, or two names
when the second covers at least 30% of it ("black and white"). ``central_region`` takes the
middle of a detection box, where the object is and the background mostly is not; ``object_region`` takes
a person's upper body instead (the middle half of a person's box is half top, half trousers: a woman in a
white top and blue jeans was "person (blue)", so "what colour is her top" answered blue).
"""

from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from vidagent.video.pixels import crop_box

COLOUR_REGION_VERSION = 2
"""Raise when where an object's colour is read changes, so the stages storing colours rebuild (2: people by
their upper body)."""

# Hue ranges in degrees (0-360) for saturated pixels; red wraps around 0.
_HUE_NAMES = (
    (15, "red"), (40, "orange"), (70, "yellow"), (160, "green"), (200, "cyan"),
    (260, "blue"), (320, "purple"), (345, "pink"), (360, "red"),
)
_BLACK_V = 60  # value (0-255) below which a pixel is black
_GREY_S = 40  # saturation (0-255) below which a pixel is white/grey...
_GREY_CHROMA = 30  # ...or max(R,G,B) - min(R,G,B) below this
_WHITE_V = 190
_TWO_TONE_SHARE = 0.3  # a second colour this common is named too ("black and white")
_MAX_COLOUR_PIXELS = 4096
MIN_COLOUR_PIXELS = 64  # smaller central regions get no colour word (too few pixels to trust)


# Every colour word, in alphabetical order: a pixel's word is coded by its place here (a region's words are
# counted as numbers, and ties between equally common words go to the alphabetically first, as they always have).
_WORDS = tuple(sorted({word for _, word in _HUE_NAMES} | {"brown", "pink", "grey", "white", "black"}))
_HUE_CODES = np.array([_WORDS.index(word) for _, word in _HUE_NAMES])
_HUE_EDGES = np.array([edge for edge, _ in _HUE_NAMES])
_BROWN, _PINK, _GREY, _WHITE, _BLACK = (_WORDS.index(word) for word in ("brown", "pink", "grey", "white", "black"))


def _pixel_codes(rgb: np.ndarray) -> np.ndarray:
    """The place in ``_WORDS`` of each pixel's colour word, for an (N, 3) uint8 RGB array."""
    pixels = rgb.reshape(-1, 3)
    hsv = cv2.cvtColor(pixels.reshape(-1, 1, 3), cv2.COLOR_RGB2HSV).reshape(-1, 3).astype(np.int32)
    hue, sat, val = hsv[:, 0] * 2, hsv[:, 1], hsv[:, 2]
    chroma = pixels.max(axis=1).astype(np.int32) - pixels.min(axis=1)
    codes = _HUE_CODES[np.searchsorted(_HUE_EDGES, hue, side="right").clip(0, len(_HUE_EDGES) - 1)]
    warm = (hue >= 10) & (hue < 50)
    codes[warm & ((val < 150) | ((sat < 110) & (val < 230)))] = _BROWN
    codes[((hue < 15) | (hue >= 330)) & (sat < 140) & (val >= 150)] = _PINK
    # Achromatic: low saturation, or little chroma (dark pixels have unreliable saturation).
    achromatic = (sat < _GREY_S) | (chroma < _GREY_CHROMA)
    codes[achromatic] = _GREY
    codes[achromatic & (val >= _WHITE_V)] = _WHITE
    codes[val < _BLACK_V] = _BLACK
    return codes


def pixel_colour_names(rgb: np.ndarray) -> np.ndarray:
    """Basic colour word for each pixel of an (N, 3) uint8 RGB array."""
    return np.array(_WORDS, dtype=object)[_pixel_codes(rgb)]


def colour_name(rgb_pixels: np.ndarray) -> str:
    """Dominant basic colour word of some RGB pixels (any shape ending in 3, uint8).

    Each pixel is named from its HSV values (black, white, grey, red, orange, yellow, brown,
    green, cyan, blue, purple, pink) and the most common name wins; when a second name covers
    at least 30% of the pixels the answer is two-tone, e.g. ``"black and white"``. Empty input
    gives ``"unknown"``.
    """
    pixels = np.asarray(rgb_pixels, dtype=np.uint8).reshape(-1, 3)
    if not len(pixels):
        return "unknown"
    if len(pixels) > _MAX_COLOUR_PIXELS:
        pixels = pixels[np.linspace(0, len(pixels) - 1, _MAX_COLOUR_PIXELS).astype(np.int64)]
    counts = np.bincount(_pixel_codes(pixels), minlength=len(_WORDS))
    order = np.argsort(-counts, kind="stable")
    first = _WORDS[order[0]]
    if counts[order[1]] >= _TWO_TONE_SHARE * len(pixels):
        return f"{first} and {_WORDS[order[1]]}"
    return first


def central_region(image: np.ndarray, box: Sequence[float], fraction: float = 0.5) -> np.ndarray:
    """The middle ``fraction`` (per side) of ``box`` in ``image``: mostly object, little background."""
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    cx, cy, hw, hh = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) * fraction / 2, (y2 - y1) * fraction / 2
    return crop_box(image, (cx - hw, cy - hh, cx + hw, cy + hh))


UPPER_BODY = (0.2, 0.45)
"""Rows of a person's box (shares of its height from the top) taken for the colour: below the head, above the hips."""


def object_region(image: np.ndarray, box: Sequence[float], label: str) -> np.ndarray:
    """Where an object's colour is read: a person's upper body (the middle half of the box's width, rows
    ``UPPER_BODY`` of its height: the top, which is what "the person in red" means), else ``central_region``."""
    if label != "person":
        return central_region(image, box)
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    quarter = (x2 - x1) / 4
    top, bottom = y1 + UPPER_BODY[0] * (y2 - y1), y1 + UPPER_BODY[1] * (y2 - y1)
    return crop_box(image, (x1 + quarter, top, x2 - quarter, bottom))
