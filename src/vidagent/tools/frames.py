"""Tools that look at a video's frames directly, by time (TraveLER's Extractor, AssistGPT's
inspection of clips): describe the frames of a window, or ask the visual-QA backend about them.

Describing frames and asking about them are capabilities shared with AssistGPT's ``caption`` module
(``vidagent.tools.capabilities``); these tools pick the frames and format the results.

A window is ``[start_s, end_s]`` in seconds, sampled at ``ToolShapes.frame_tool_fps`` from its start to
its end (one frame when start equals end; at most ``frame_tool_max_frames``). Frames decoded for a window are
kept for the question, so describing a window and then asking about it decodes it once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vidagent.config import ToolShapes
from vidagent.llm.base import ChatModel
from vidagent.memory.store import SegmentRecord
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.base import FrameDescriber, VisualQA
from vidagent.tools import capabilities
from vidagent.tools.base import Evidence, Observation, Parameter, Tool
from vidagent.tools.declaration import declared, made
from vidagent.tools.capabilities import Span
from vidagent.tools.caption_window import caption_lines, segment_evidence
from vidagent.tools.observed import quote
from vidagent.video.video import SampledFrame


@dataclass
class FrameTools:
    """``frame_description`` and ``frame_question_answering`` over one video."""

    memory: VideoMemory
    describer: FrameDescriber
    vqa: VisualQA
    llm: ChatModel
    shapes: ToolShapes = field(default_factory=ToolShapes)  # how much each tool reads and shows
    _frames: dict[tuple[float, float], list[SampledFrame]] = field(default_factory=dict, init=False, repr=False)

    def tools(self) -> list[Tool]:
        window = (Parameter("start_s", float, "window start, seconds"), Parameter("end_s", float, "window end, seconds"))
        return [
            made(self.frame_description,
                 f"Describes what is seen in the frames between start_s and end_s (seconds; {self.shapes.frame_tool_fps:g} "
                 f"frames a second, {self.shapes.frame_tool_max_frames} at most, one line each). Give start_s = end_s for a single frame.",
                 window),
            made(self.frame_question_answering,
                 "Answers a question about what is seen in the frames between start_s and end_s (seconds), "
                 "looking at the frames themselves. Its answers can be wrong.",
                 (Parameter("question", str, "a question about these frames"),) + window),
        ]

    @declared("segments", "pixels", of="describe", does="describes_frames")
    def frame_description(self, start_s: float, end_s: float) -> Observation:
        if not self.memory.has_pixels:
            read = self._captions(start_s, end_s)
            if isinstance(read, Observation):
                return read
            return Observation("Captions (this memory has no frames):\n" + "\n".join(caption_lines(read)),
                               evidence=segment_evidence(read, self.memory.video_id))
        frames = self._window(start_s, end_s)
        if isinstance(frames, Observation):
            return frames
        described = capabilities.describe(self.describer, [frame.image for frame in frames])
        lines = [f"{frame.time_s:.1f} s: {seen}" for frame, seen in zip(frames, described)]
        text = "\n".join(lines)
        return Observation(text, evidence=(Evidence(frames[0].time_s, frames[-1].time_s, text, self.memory.video_id),),
                           artifacts={"frame_times": [round(f.time_s, 3) for f in frames]})

    @declared("segments", "pixels model", of="look_and_ask", does="asks_frames")
    def frame_question_answering(self, question: str, start_s: float, end_s: float) -> Observation:
        seen: list[SampledFrame] = []
        if self.memory.has_pixels:
            frames = self._window(start_s, end_s)
            if isinstance(frames, Observation):
                return frames
            seen = frames
        else:  # its captions stand for the frames
            read = self._captions(start_s, end_s)
            if isinstance(read, Observation):
                return read
        looked = capabilities.look_and_ask(self.memory, self._span(start_s, end_s), question, vqa=self.vqa,
                                           llm=self.llm, frames=lambda: seen)
        if looked.captions is not None:
            return Observation(f"Answer (from the captions; this memory has no frames): {quote(looked.answer)}",
                               evidence=segment_evidence(looked.captions, self.memory.video_id))
        return Observation(f"Answer: {quote(looked.answer)}",
                           evidence=(Evidence(looked.frames[0].time_s, looked.frames[-1].time_s, looked.answer,
                                              self.memory.video_id, kind="model"),),
                           artifacts={"frame_times": [round(f.time_s, 3) for f in looked.frames],
                                      "description": looked.description})

    def _span(self, start_s: float, end_s: float) -> Span:
        """The window asked about, clamped to the video."""
        start, end = sorted((float(start_s), float(end_s)))
        return Span.of_times(max(0.0, start), min(self.memory.video.duration_s, end))

    def _captions(self, start_s: float, end_s: float) -> list[SegmentRecord] | Observation:
        """The captions of a window, for a memory without frames."""
        duration = self.memory.video.duration_s
        start, end = sorted((float(start_s), float(end_s)))
        if end < 0 or start > duration:
            return Observation(f"Nothing there: the video runs from 0 to {duration:.1f} s.", is_error=True)
        read = self._span(start, end).segments(self.memory)
        if not read:
            return Observation(f"No captions between {start:.1f} and {end:.1f} s.", is_error=True)
        return read

    def _window(self, start_s: float, end_s: float) -> list[SampledFrame] | Observation:
        duration = self.memory.video.duration_s
        start, end = sorted((float(start_s), float(end_s)))
        if end < 0 or start > duration:
            return Observation(f"No frames there: the video runs from 0 to {duration:.1f} s.", is_error=True)
        start, end = max(0.0, start), min(duration, end)
        key = (round(start, 3), round(end, 3))
        if key not in self._frames:
            count = min(self.shapes.frame_tool_max_frames, 1 + round((end - start) * self.shapes.frame_tool_fps))
            times = [start] if count == 1 else [start + i * (end - start) / (count - 1) for i in range(count)]
            self._frames[key] = capabilities.window_frames(self.memory, times, self.shapes.frame_max_side)
        return self._frames[key]
