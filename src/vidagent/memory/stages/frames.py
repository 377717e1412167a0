"""Stage ``frames``: one description per sampled frame (captioner, or the offline detector+OCR
describer) and the on-screen text read in it; one frame per segment by default."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from vidagent.memory.stages.base import Rows
from vidagent.memory.store import Library
from vidagent.perception.base import FrameDescriber
from vidagent.video.change import ChangeLimits
from vidagent.video.sampling import midpoints
from vidagent.video.video import SampledFrame, Video

FRAME_MAX_SIDE = 768


class FramesStage:
    name = "frames"
    requires: tuple[str, ...] = ()
    max_side = FRAME_MAX_SIDE
    batch_size = 4

    def __init__(self, describer: FrameDescriber, segment_seconds: float, frames_per_segment: int, *,
                 reuse: ChangeLimits | None = None) -> None:
        self.describer = describer
        self.segment_seconds = segment_seconds
        self.frames_per_segment = frames_per_segment
        self.reuse = reuse  # a frame that looks like the last described one reuses its description

    def config(self) -> dict[str, Any]:
        return {
            "describer": self.describer.name,
            "frames_per_segment": self.frames_per_segment,
            "segment_seconds": self.segment_seconds,
            "max_side": self.max_side,
            **({"reuse_near_duplicates": self.reuse.config()} if self.reuse else {}),
        }

    def frame_times(self, video: Video) -> list[float]:
        return [time_s for time_s, _ in self._planned(video)]

    def _planned(self, video: Video) -> list[tuple[float, int]]:
        return [
            (round(time_s, 3), s.segment_id)
            for s in video.segments(self.segment_seconds)
            for time_s in midpoints(s.start_s, s.end_s, self.frames_per_segment)
        ]

    def process(self, frames: Sequence[SampledFrame]) -> list[Any]:
        described = self.describer.describe([frame.image for frame in frames])
        return [
            {
                "text": d.text,
                "objects": list(d.objects),
                "text_boxes": [[box.text, *box.box, box.score] for box in d.text_boxes],
            }
            for d in described
        ]

    def finish(self, video: Video, library: Library, results: Mapping[float, Any]) -> Rows:
        frame_rows: list[tuple[Any, ...]] = []
        text_rows: list[tuple[Any, ...]] = []
        for time_s, segment_id in self._planned(video):
            result = results[time_s]
            frame_rows.append((time_s, segment_id, result["text"], json.dumps(result["objects"])))
            for text, x1, y1, x2, y2, score in result["text_boxes"]:
                text_rows.append((time_s, segment_id, text, x1, y1, x2, y2, score))
        return {"frames": frame_rows, "text_in_frame": text_rows}
