"""Answering and scoring a referring segmentation question (Ref-YouTube-VOS, Ref-DAVIS) with J&F.

``predict_referred_masks`` is the answer: the object memory of the video (built when missing) is asked which
object the expression refers to (``refer_object``'s resolution, ``vidagent.tools.refer``), and that object's
masks are placed at the annotated frames' times (its sampled masks moved with its box between samples,
``vidagent.tools.object_masks``); a frame where the object is not placed gets an empty mask.
``score_referring_segmentation`` compares them with the annotations: J, F and J&F per expression
(``vidagent.eval.jf``; the DAVIS toolkit's skipped first and last frames for Ref-DAVIS).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from vidagent.eval.dataset import EvalItem
from vidagent.eval.jf import score_sequence
from vidagent.eval.refvos import RefFrames, annotated_times


@dataclass(frozen=True)
class ReferredMasks:
    """The predicted mask of each annotated frame (None where the object was not placed), and what was referred to."""

    masks: Mapping[str, np.ndarray | None]
    object_id: int
    description: str
    how: str


def annotated_frames(ref: RefFrames) -> list[str]:
    """The listed frames that have an annotation file, in order."""
    if ref.annotations is None:
        return []
    return [frame for frame in ref.frames if (ref.annotations / f"{frame}.png").is_file()]


def predict_referred_masks(session: Any, item: EvalItem, video_path: str | Path) -> ReferredMasks:
    """The masks ``session`` predicts for ``item``'s expression in the video made of its frames (a
    ``vidagent.session.Session``; the chat model reads the expression only where the parser cannot).
    ``ToolInputError`` when no object of the memory fits the expression."""
    from vidagent.errors import ModelUnavailableError
    from vidagent.tools.edits import object_track
    from vidagent.tools.object_masks import object_masks
    from vidagent.tools.refer import ReferTools
    from vidagent.video.video import Video

    ref = RefFrames.from_extra(item.extra["ref"])
    video = Video(video_path)
    memory = session.builder().build(video, ["objects"], progress=False)
    try:
        llm = session.llm
    except ModelUnavailableError:
        llm = None
    referent = ReferTools(memory, session.settings.artifacts_dir, llm).resolve(item.question)
    frames = list(ref.frames)
    placed = object_masks(object_track(memory, referent.object_id).track, video.info.width, video.info.height,
                          video.info.fps, annotated_times(ref, frames))
    by_time = {round(mask.time_s, 6): mask.mask for mask in placed}
    masks = {frame: by_time.get(round(time_s, 6)) for frame, time_s in zip(frames, annotated_times(ref, frames))}
    return ReferredMasks(masks, referent.object_id, referent.fact.line, referent.how)


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
