"""Stage ``frames``: what was seen in each sampled frame, as facts (a captioner's caption, or the
offline describer's objects and guesses) and the on-screen text read in it; one frame per segment by
default. A describer that captions a segment from several frames at once (``SegmentCaptioner``, a vision
chat model) gets that many frames of each segment, grouped by segment, and each frame keeps its group's
caption. What described the frames (its label and memory note) is written once per memory."""

from __future__ import annotations

import math
from itertools import groupby
from typing import Any, Mapping, Sequence

from vidagent.memory.stages.base import Rows
from vidagent.memory.store import DescriberRecord, FrameRecord, Library, frames_stage_rows
from vidagent.perception.base import (FrameDescriber, FrameDescription, Label, SeenObject, SegmentCaptioner,
                                      TextBox)
from vidagent.perception.colour import COLOUR_REGION_VERSION
from vidagent.video.change import ChangeLimits
from vidagent.video.sampling import midpoints
from vidagent.video.video import SampledFrame, Video

FRAME_MAX_SIDE = 768
# Raise when what a frame's result holds changes, so stored frames (and the stages reading them) rebuild.
# 2: facts (caption, objects, labels, size) instead of the describer's sentence.
FACTS_VERSION = 2


class FramesStage:
    name = "frames"
    requires: tuple[str, ...] = ()
    max_side = FRAME_MAX_SIDE
    batch_size = 4

    def __init__(self, describer: FrameDescriber, segment_seconds: float, frames_per_segment: int, *,
                 reuse: ChangeLimits | None = None) -> None:
        self.describer = describer
        self.segment_seconds = segment_seconds
        grouped = isinstance(describer, SegmentCaptioner) and describer.frames_per_request > 1
        self.grouped: SegmentCaptioner | None = describer if grouped else None  # type: ignore[assignment]
        self.frames_per_segment = self.grouped.frames_per_request if self.grouped else frames_per_segment
        # a frame that looks like the last described one reuses its description; never within a group, whose
        # frames are read together (a still segment would otherwise send one frame and reuse the last caption)
        self.reuse = None if self.grouped else reuse
        if self.grouped:  # enough whole segments per batch to keep the model's concurrent requests busy
            self.batch_size = self.frames_per_segment * max(1, self.grouped.concurrency)

    def config(self) -> dict[str, Any]:
        return {
            "describer": self.describer.name,
            "frames_per_segment": self.frames_per_segment,
            "segment_seconds": self.segment_seconds,
            "max_side": self.max_side,
            "facts": FACTS_VERSION,
            "colour_region": COLOUR_REGION_VERSION,
            **({"reuse_near_duplicates": self.reuse.config()} if self.reuse else {}),
        }

    def frame_times(self, video: Video) -> list[float]:
        return [time_s for time_s, _ in self.planned(video)]

    def planned(self, video: Video) -> list[tuple[float, int]]:
        """Each sample time with the id of the segment it describes, in time order."""
        return [
            (round(time_s, 3), s.segment_id)
            for s in video.segments(self.segment_seconds)
            for time_s in midpoints(s.start_s, s.end_s, self.frames_per_segment)
        ]

    def process(self, frames: Sequence[SampledFrame]) -> list[Any]:
        if self.grouped is None:
            return [_result(d) for d in self.describer.describe([frame.image for frame in frames])]
        # frames come in time order; a segment's frames are consecutive (a batch may split one: two requests)
        groups = [[frame.image for frame in members]
                  for _, members in groupby(frames, key=lambda f: math.floor(f.time_s / self.segment_seconds))]
        return [_result(d) for described in self.grouped.describe_groups(groups) for d in described]

    def finish(self, video: Video, library: Library, results: Mapping[float, Any]) -> Rows:
        return self.rows(video, results)

    def rows(self, video: Video, results: Mapping[float, Any], *, partial: bool = False) -> Rows:
        """The stage's rows from per-frame results: every planned frame's, or (``partial``) those that
        have a result (a partial memory's, ``vidagent.memory.glance``)."""
        frames = [FrameRecord(time_s, segment_id, _description(results[time_s]))
                  for time_s, segment_id in self.planned(video) if not partial or time_s in results]
        describer = DescriberRecord(self.describer.name, self.describer.label, self.describer.memory_note)
        return frames_stage_rows(frames, describer)


def _result(d: FrameDescription) -> dict[str, Any]:
    """A described frame as a JSON-serialisable result (checkpointed as it is)."""
    return {
        "caption": d.caption,
        "objects": [[o.label, o.score, list(o.box), o.colour, o.kind, o.pose] for o in d.objects],
        "labels": [[label.name, label.score] for label in d.labels],
        "on_screen_text": list(d.on_screen_text),
        "text_boxes": [[box.text, *box.box, box.score] for box in d.text_boxes],
        "size": list(d.size),
    }


def _description(result: Mapping[str, Any]) -> FrameDescription:
    return FrameDescription(
        caption=result["caption"],
        objects=tuple(SeenObject(label, score, tuple(box), colour, kind, pose)  # type: ignore[arg-type]
                      for label, score, box, colour, kind, pose in result["objects"]),
        labels=tuple(Label(name, score) for name, score in result["labels"]),
        on_screen_text=tuple(result["on_screen_text"]),
        text_boxes=tuple(TextBox(text, (x1, y1, x2, y2), score) for text, x1, y1, x2, y2, score in result["text_boxes"]),
        size=(int(result["size"][0]), int(result["size"][1])))
