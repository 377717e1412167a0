"""J&F, the measure of video object segmentation benchmarks (DAVIS, YouTube-VOS, Ref-YouTube-VOS, Ref-DAVIS).

* **J, region similarity**: the intersection over union of the predicted and the true mask of a frame
  (1 when both are empty: nothing to find, nothing found).
* **F, contour accuracy**: the F-measure of boundary precision and recall. A mask's boundary is the set of
  its pixels that differ from their right, lower or lower-right neighbour (the image's edge counting as
  background); a predicted boundary pixel is matched when a true boundary pixel lies within the tolerance,
  and the other way round. The tolerance is the DAVIS one: ``BOUNDARY_TOLERANCE`` (0.008) of the image's
  diagonal, rounded up to whole pixels, applied as a disc. F is 1 when both boundaries are empty and 0 when
  one of them is.
* A sequence's J and F are the means over its annotated frames, and J&F their mean; a benchmark's are the
  means over its sequences (each expression-object pair of a referring benchmark is one sequence).

The DAVIS 2017 toolkit, which Ref-DAVIS papers evaluate with, leaves out each sequence's first and last
frames in its semi-supervised mode (``skip_ends=True`` does the same); Ref-YouTube-VOS's server scores
every annotated frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import cv2
import numpy as np

BOUNDARY_TOLERANCE = 0.008  # of the image diagonal (DAVIS's bound_th)


def region_similarity(prediction: np.ndarray, truth: np.ndarray) -> float:
    """J: intersection over union of two masks of one size (1.0 when both are empty)."""
    predicted, true = _pair(prediction, truth)
    union = int(np.logical_or(predicted, true).sum())
    if union == 0:
        return 1.0
    return int(np.logical_and(predicted, true).sum()) / union


def boundary(mask: np.ndarray) -> np.ndarray:
    """The mask's boundary pixels: those that differ from their right, lower or lower-right neighbour
    (outside the image counts as background), so a one-pixel object is its own boundary."""
    padded = np.pad(np.asarray(mask, dtype=bool), ((0, 1), (0, 1)))
    core = padded[:-1, :-1]
    return (core ^ padded[:-1, 1:]) | (core ^ padded[1:, :-1]) | (core ^ padded[1:, 1:])


def tolerance_pixels(height: int, width: int, tolerance: float = BOUNDARY_TOLERANCE) -> int:
    """The matching distance in pixels: ``tolerance`` itself when it is 1 or more, else that share of
    the image's diagonal rounded up."""
    return int(tolerance) if tolerance >= 1 else math.ceil(tolerance * math.hypot(height, width))


def contour_accuracy(prediction: np.ndarray, truth: np.ndarray, tolerance: float = BOUNDARY_TOLERANCE) -> float:
    """F: the F-measure of the predicted boundary's precision and recall against the true one."""
    predicted, true = _pair(prediction, truth)
    predicted_edge, true_edge = boundary(predicted), boundary(true)
    predicted_count, true_count = int(predicted_edge.sum()), int(true_edge.sum())
    if predicted_count == 0 and true_count == 0:
        return 1.0
    if predicted_count == 0 or true_count == 0:
        return 0.0
    radius = tolerance_pixels(*true.shape, tolerance=tolerance)
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    near_true = cv2.dilate(true_edge.astype(np.uint8), disc).astype(bool)
    near_predicted = cv2.dilate(predicted_edge.astype(np.uint8), disc).astype(bool)
    precision = int((predicted_edge & near_true).sum()) / predicted_count
    recall = int((true_edge & near_predicted).sum()) / true_count
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class SequenceScore:
    """J, F and J&F of one sequence (one referred object), the means over its scored frames."""

    j: float
    f: float
    frames: int

    @property
    def jf(self) -> float:
        return (self.j + self.f) / 2

    def to_dict(self) -> dict[str, float | int]:
        return {"j": round(self.j, 4), "f": round(self.f, 4), "jf": round(self.jf, 4), "frames": self.frames}


def score_sequence(predictions: Sequence[np.ndarray | None], truths: Sequence[np.ndarray], *,
                   skip_ends: bool = False, tolerance: float = BOUNDARY_TOLERANCE) -> SequenceScore:
    """J and F of a sequence: ``predictions[i]`` is the predicted mask of the frame ``truths[i]`` annotates
    (None: nothing predicted there, an empty mask). ``skip_ends`` leaves out the first and last frames (the
    DAVIS 2017 toolkit's semi-supervised mode) when there are more than two."""
    if len(predictions) != len(truths):
        raise ValueError(f"{len(predictions)} predicted masks for {len(truths)} annotated frames")
    if not truths:
        raise ValueError("a sequence needs at least one annotated frame")
    pairs = list(zip(predictions, truths))
    if skip_ends and len(pairs) > 2:
        pairs = pairs[1:-1]
    j_values, f_values = [], []
    for prediction, truth in pairs:
        predicted = np.zeros(np.shape(truth), bool) if prediction is None else prediction
        j_values.append(region_similarity(predicted, truth))
        f_values.append(contour_accuracy(predicted, truth, tolerance))
    return SequenceScore(float(np.mean(j_values)), float(np.mean(f_values)), len(pairs))


def mean_scores(scores: Iterable[SequenceScore]) -> dict[str, float | int]:
    """A benchmark's J, F and J&F: the means over its sequences (``sequences``: how many)."""
    scores = list(scores)
    if not scores:
        return {"j": 0.0, "f": 0.0, "jf": 0.0, "sequences": 0}
    j = float(np.mean([s.j for s in scores]))
    f = float(np.mean([s.f for s in scores]))
    return {"j": round(j, 4), "f": round(f, 4), "jf": round((j + f) / 2, 4), "sequences": len(scores)}


def _pair(prediction: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    predicted, true = np.asarray(prediction, dtype=bool), np.asarray(truth, dtype=bool)
    if predicted.shape != true.shape or predicted.ndim != 2:
        raise ValueError(f"masks of different sizes or not 2-D: {predicted.shape} and {true.shape}")
    return predicted, true


def segmentation_metrics(rows: Iterable[Mapping[str, Any]]) -> dict[str, float] | None:
    """J, F and J&F of an evaluation run's referring segmentation rows (those with a ``jf`` score), the
    means over their expressions, and ``n`` of them (the report's metric tables' shape); None when it has none."""
    scored = [row["jf"] for row in rows if isinstance(row.get("jf"), Mapping)]
    if not scored:
        return None
    j = float(np.mean([s["j"] for s in scored]))
    f = float(np.mean([s["f"] for s in scored]))
    return {"J": j, "F": f, "J&F": (j + f) / 2, "n": len(scored)}
