"""Reading a stretch of a memory that may be partial (``vidagent.memory.glance``), the one rule every
tool that reads a window's descriptions follows (react's ``caption_retrieval``, AssistGPT's narration,
narration grounding and on-screen text modules).

A stretch a tool reads whole (at most ``whole`` segments) is described in full first: the memory
``refine``s its window, and the segments are read again. A wider stretch is skimmed: of a partial
memory, only the segments it has looked at are read (all of them where it has looked at none). A full
memory has nothing to refine and nothing to skip, so for it the rule changes nothing. The tool says
what was refined for its read in its observation's ``artifacts["refined"]`` (``refined_artifact``),
which the trace shows. Speech is not refined: a glance transcribes it whole or not at all.
"""

from __future__ import annotations

from typing import Sequence

from vidagent.memory.coverage import Window
from vidagent.memory.store import SegmentRecord
from vidagent.memory.video_memory import VideoMemory


def refine_stretch(memory: VideoMemory, segments: Sequence[SegmentRecord], whole: int) -> list[Window]:
    """The windows ``memory`` described in full because ``segments`` (a stretch of it, in time order) are
    read whole, at most ``whole`` of them; none for a full memory or a wider stretch. The memory forgets
    its cached reads when it refines: read the segments again after."""
    if not segments or len(segments) > whole:
        return []
    return memory.refine(segments[0].start_s, segments[-1].end_s)


def read_stretch(memory: VideoMemory, segments: Sequence[SegmentRecord],
                 whole: int) -> tuple[list[SegmentRecord], list[Window]]:
    """The segments a tool reads of ``segments`` (a stretch of ``memory``, in time order), and the windows
    refined for the read: a stretch of at most ``whole`` segments is refined and read again; a wider one,
    of a partial memory, is skimmed among the segments the memory has looked at."""
    refined = refine_stretch(memory, segments, whole)
    if refined:
        return [memory.segment(s.segment_id) for s in segments], refined
    if len(segments) > whole and memory.coverage is not None:
        return [s for s in segments if looked_at(s)] or list(segments), []
    return list(segments), []


def looked_at(segment: SegmentRecord) -> bool:
    """Whether a partial memory has seen or heard anything in ``segment`` (one it has not is empty)."""
    return bool(segment.description or segment.speech or segment.on_screen_text)


def refined_artifact(windows: Sequence[Window]) -> dict[str, list[list[float]]]:
    """The artifact naming the windows a partial memory described in full for this read (none: nothing)."""
    return {"refined": [list(window) for window in windows]} if windows else {}
