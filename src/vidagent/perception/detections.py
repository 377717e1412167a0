"""The one detection type: supervision's ``sv.Detections``, from detector to tracker to memory.

Every ``ObjectDetector`` returns one ``sv.Detections`` per image with ``xyxy`` (float32 pixels of
that image), ``confidence`` (float32), ``class_id`` (int32) and each detection's class name in
``data["class_name"]`` (supervision's own key, which its ``from_*`` adapters fill too); the
tracker returns the same detections with ``tracker_id`` set; the objects stage adds what it
measures per detection (colour, kind, appearance features) to ``data``.

Detections are shared (the caching detector hands one result to the frames and objects stages),
so code that adds to them makes new ones (``with_data``) instead of changing them in place.

Importing supervision takes about 0.7 s on a 2-core machine, and modules that only read detections
(the describer, which the tools import) are loaded by every command; so supervision is imported
where detections are made, not when this module is.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:
    import supervision as sv

CLASS_NAME = "class_name"  # supervision.config.CLASS_NAME_DATA_FIELD: the key its own from_* adapters fill

SAME_BOX_IOU = 0.7
"""Overlap at which two boxes of one frame are taken to be the same thing (under two classes)."""
TAKEN_FOR = {"frisbee": "sports ball"}
"""A COCO class a detector gives a thing of another class, and that class: where both name one box, the second is
right (measured in ``perception.detector``; the offline detector applies it to the rows under its threshold too,
the objects stage to the boxes of any detector, ``memory.same_box_classes``)."""


def make_detections(xyxy: Any, confidence: Any, class_id: Any, class_names: Sequence[str],
                    data: dict[str, Any] | None = None) -> sv.Detections:
    """Detections with vidagent's dtypes (float32 boxes and scores, int32 class ids) and their names."""
    import supervision as sv

    count = len(class_names)
    return sv.Detections(
        xyxy=np.asarray(xyxy, np.float32).reshape(count, 4),
        confidence=np.asarray(confidence, np.float32).reshape(count),
        class_id=np.asarray(class_id, np.int32).reshape(count),
        data={CLASS_NAME: np.asarray(list(class_names), dtype=str), **(data or {})},
    )


def no_detections() -> sv.Detections:
    """An image with nothing found (empty, but with every field a detector's result has)."""
    return make_detections(np.zeros((0, 4)), [], [], [])


def class_names(detections: sv.Detections) -> list[str]:
    """Each detection's class name (the class id as text where a producer gave no names)."""
    names = detections.data.get(CLASS_NAME)
    if names is not None:
        return [str(name) for name in names]
    ids = detections.class_id if detections.class_id is not None else np.full(len(detections), -1)
    return [str(int(i)) for i in ids]


def with_data(detections: sv.Detections, **fields: Any) -> sv.Detections:
    """A copy of ``detections`` with ``fields`` (one value per detection each) added to ``data``."""
    data = {**detections.data, **{name: np.asarray(values) for name, values in fields.items()}}
    return dataclasses.replace(detections, data=data)


def best_first_nms(detections: sv.Detections, iou_threshold: float) -> sv.Detections:
    """Per-class non-maximum suppression with supervision's ``box_non_max_suppression``: the kept
    detections, best score first.

    Equal scores are common (CenterNet's come in steps of 0.001), and supervision orders them as
    its sort happens to; here they are ranked first by class id, then in the order given, so the
    earlier of two equally scored overlapping boxes is the one kept, always.
    """
    if len(detections) == 0:
        return detections
    import supervision as sv

    order = np.lexsort((np.arange(len(detections)), detections.class_id, -np.asarray(detections.confidence)))
    rank = np.empty(len(detections))
    rank[order] = np.arange(len(detections), 0, -1)  # a unique score per detection, in that order
    keep = sv.box_non_max_suppression(np.c_[detections.xyxy, rank, detections.class_id], iou_threshold=iou_threshold)
    return detections[order[keep[order]]]
