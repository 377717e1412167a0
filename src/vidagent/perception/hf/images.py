"""Handing vidagent's images (RGB ``uint8`` arrays) to Hugging Face processors, in batches."""

from __future__ import annotations

from typing import Iterator, Sequence, TypeVar

import numpy as np
from PIL import Image

T = TypeVar("T")


def to_pil(image: np.ndarray) -> Image.Image:
    """An RGB ``(H, W, 3)`` ``uint8`` array as a PIL image.

    Processors are given PIL images rather than arrays: with arrays they guess which axis holds the
    channels, and guess wrong on small crops (a 3-pixel-wide crop looks channels-first).
    """
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3:
        raise ValueError(f"expected an RGB image of shape (H, W, 3), got shape {array.shape}")
    if array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(f"empty image of shape {array.shape}")
    if array.dtype != np.uint8:
        raise ValueError(f"expected uint8 pixels, got {array.dtype}")
    return Image.fromarray(np.ascontiguousarray(array))


def batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` items."""
    if size < 1:
        raise ValueError(f"batch size must be at least 1, not {size}")
    for start in range(0, len(items), size):
        yield items[start:start + size]
