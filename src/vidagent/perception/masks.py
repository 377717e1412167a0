"""Boolean object masks: compact run-length text for the memory, PNG for people, boxes as masks.

A mask is a bool ``(height, width)`` array over the displayed frame. The memory keeps it as COCO
run-length encoding (column-major runs of background then foreground), in the compressed string
``pycocotools`` writes (``encode_mask``): what ``detections.mask`` holds and what ``decode_mask``
(``vidagent.video.track``'s, imported here: the video layer draws masks too) reads back, with the
uncompressed form (a list of counts, or its JSON text). ``mask_json`` / ``mask_from_json`` carry a mask with its
size (``{"size": [height, width], "counts": "..."}``, COCO's RLE object) where the size is not known
from elsewhere, as in a tool's artifact.

supervision does the run-length coding (``sv.mask_to_rle``/``sv.rle_to_mask``); it is imported when a
mask is coded, not when this module is (see ``vidagent.perception.detections``).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import cv2
import numpy as np

from vidagent.video.track import decode_mask

Box = tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels


def encode_mask(mask: np.ndarray) -> str:
    """``mask`` (bool or 0/1, ``(height, width)``) as a compressed COCO run-length string."""
    import supervision as sv

    array = np.asarray(mask).astype(bool)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"a mask is a non-empty 2-D array, not one of shape {array.shape}")
    return str(sv.mask_to_rle(array, compressed=True))


def mask_json(mask: np.ndarray) -> dict[str, Any]:
    """COCO's RLE object for ``mask``: ``{"size": [height, width], "counts": <compressed string>}``."""
    array = np.asarray(mask)
    return {"size": [int(array.shape[0]), int(array.shape[1])], "counts": encode_mask(array)}


def mask_from_json(obj: dict[str, Any]) -> np.ndarray:
    """The mask of a COCO RLE object (``mask_json``'s, or one with a list of counts)."""
    try:
        height, width = (int(v) for v in obj["size"])
        counts = obj["counts"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError("a mask object has a 'size' [height, width] and 'counts'") from exc
    return decode_mask(counts, width, height)


def mask_to_png(mask: np.ndarray) -> bytes:
    """``mask`` as a one-channel 8-bit PNG, 255 on the object and 0 elsewhere."""
    array = np.asarray(mask).astype(bool)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"a mask is a non-empty 2-D array, not one of shape {array.shape}")
    ok, data = cv2.imencode(".png", array.astype(np.uint8) * 255)
    if not ok:
        raise ValueError("OpenCV could not write the mask as PNG")
    return data.tobytes()


def png_to_mask(data: bytes) -> np.ndarray:
    """The mask of a one-channel PNG (``mask_to_png``'s): every non-zero pixel is on the object."""
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise ValueError("not a PNG image")
    if image.ndim == 3:
        image = image.max(axis=2)
    return image > 0


def box_mask(box: Sequence[float], width: int, height: int) -> np.ndarray:
    """The pixels of a ``width`` x ``height`` frame inside ``box`` (x1, y1, x2, y2; edges rounded
    outwards, clipped to the frame) as a bool mask: what stands in for a mask where none was made."""
    x1, y1, x2, y2 = (float(v) for v in box)
    left = int(np.clip(math.floor(x1), 0, width))
    top = int(np.clip(math.floor(y1), 0, height))
    right = int(np.clip(math.ceil(x2), left, width))
    bottom = int(np.clip(math.ceil(y2), top, height))
    out = np.zeros((int(height), int(width)), dtype=bool)
    out[top:bottom, left:right] = True
    return out


def mask_box(mask: np.ndarray) -> Box | None:
    """The tight box (x1, y1, x2, y2, exclusive right and bottom edges) around a mask; None when empty."""
    rows = np.flatnonzero(np.asarray(mask).any(axis=1))
    cols = np.flatnonzero(np.asarray(mask).any(axis=0))
    if rows.size == 0:
        return None
    return float(cols[0]), float(rows[0]), float(cols[-1] + 1), float(rows[-1] + 1)


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two masks of one size; 1.0 when both are empty (they agree)."""
    first, second = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if first.shape != second.shape:
        raise ValueError(f"masks of different sizes: {first.shape} and {second.shape}")
    union = int(np.logical_or(first, second).sum())
    if union == 0:
        return 1.0
    return int(np.logical_and(first, second).sum()) / union
