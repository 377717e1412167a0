"""Answering and scoring a referring segmentation question (Ref-YouTube-VOS, Ref-DAVIS) with J&F.

``predict_referred_masks`` is the answer: the object memory of the video (built when missing) is asked which
object the expression refers to (``refer_object``'s resolution, ``Session.refer_masks``), and that object's
masks are placed at the annotated frames' times (its sampled masks moved with its box between samples); a
frame where the object is not placed gets an empty mask.
``score_referring_segmentation`` compares them with the annotations: J, F and J&F per expression
(``vidagent.eval.jf``; the DAVIS toolkit's skipped first and last frames for Ref-DAVIS).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from vidagent.eval.dataset import EvalItem
from vidagent.eval.jf import score_sequence
from vidagent.eval.refvos import RefFrames, annotated_times

if TYPE_CHECKING:
    from vidagent.session import Session
    from vidagent.tools.refer import ReferredMasks


def annotated_frames(ref: RefFrames) -> list[str]:
    """The listed frames that have an annotation file, in order."""
    if ref.annotations is None:
        return []
    return [frame for frame in ref.frames if (ref.annotations / f"{frame}.png").is_file()]


def predict_referred_masks(session: Session, item: EvalItem,
                           video_path: str | Path) -> tuple[dict[str, np.ndarray | None], ReferredMasks]:
    """The masks ``session`` predicts for ``item``'s expression at its annotated frames, by frame name (None
    where the object is not placed), in the video made of its frames (``Session.refer_masks``: the object
    memory built when missing, the chat model reading the expression only where the parser cannot), and
    what was referred to. ``ToolInputError`` when no object of the memory fits the expression."""
    ref = RefFrames.from_extra(item.extra["ref"])
    found = session.refer_masks(video_path, item.question, annotated_times(ref))
    return dict(zip(ref.frames, found.masks)), found


def score_referring_segmentation(item: EvalItem, predicted: Mapping[str, np.ndarray | None]) -> dict[str, Any]:
    """J, F and J&F of ``predicted`` (frame name -> mask, None or missing: nothing there) over ``item``'s
    annotated frames; a predicted mask larger than the annotation (a video padded to even sides) is cut to
    its size. ``{"jf": None}`` where the split gives no masks."""
    ref = RefFrames.from_extra(item.extra["ref"])
    frames = annotated_frames(ref) if ref.object_id is not None else []
    if not frames:
        return {"jf": None}
    truths = [ref.truth(frame) for frame in frames]
    predictions = [_fit(predicted.get(frame), truth.shape) for frame, truth in zip(frames, truths)]
    score = score_sequence(predictions, truths, skip_ends=item.type == "ref_davis")
    return {"jf": score.to_dict()}


def _fit(mask: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    if mask is None:
        return None
    height, width = shape[:2]
    if mask.shape[0] < height or mask.shape[1] < width:
        raise ValueError(f"a predicted mask of {mask.shape[1]}x{mask.shape[0]} for a {width}x{height} annotation")
    return np.asarray(mask[:height, :width], dtype=bool)
