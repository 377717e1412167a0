"""``refer_object``: referring video object segmentation over the object memory (DoraemonGPT §3.3).

An expression ("the black dog", "the second cup from the left", "the person who sits down") is read
by the parser (``vidagent.tools.referring``) and resolved to one object of the memory by SQL over its
classes, colours, positions and actions, a chat model reading it only where that cannot decide
(``vidagent.tools.referent``). The object's masks are saved (``VideoEdits.segment``: PNG masks, a
manifest and a video with the mask drawn over it) and returned three ways: a ``Segmentation`` for the
library, and, as the tool's observation, the text, ``artifacts`` (the folder, the overlay video, the
masks with their times) and evidence (the stretch the object is seen in).

The object memory (and the actions the builder makes beside it) is built first when it is missing.

``refer_object`` in three modules, each with one job: ``vidagent.tools.referring`` reads an expression's
words (no model, no memory), ``vidagent.tools.referent`` finds the object of the memory they mean (SQL, a chat
model where that cannot decide), ``vidagent.tools.refer`` is the tool (its masks saved, what it found said).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vidagent.errors import ToolInputError
from vidagent.llm.base import ChatModel
from vidagent.memory.video_memory import VideoMemory
from vidagent.prompts import load_prompt
from vidagent.tools.base import Evidence, Observation, Parameter, Tool
from vidagent.tools.declaration import declared, made
from vidagent.tools.edits import Edit, VideoEdits, object_track
from vidagent.tools.media import video_file
from vidagent.tools.object_masks import MANIFEST, OVERLAY, FrameMask, mask_sources, object_masks
from vidagent.tools.referent import ObjectFacts, Referent, ReferenceError, resolve
from vidagent.tools.referring import parse_expression
from vidagent.video.editing import Progress

PROMPTS = "vidagent.tools"
_log = logging.getLogger(__name__)


@cache
def tool_description() -> str:
    """The tool's line in a planner's tool list, from ``refer_descriptions`` in ``prompts/refer.toml``."""
    line = load_prompt(PROMPTS, "refer_descriptions").strip()
    return line.partition(":")[2].strip()


@dataclass(frozen=True)
class Segmentation:
    """A referred object and its masks: ``edit.path`` is the folder (``masks/*.png``, ``masks.json``,
    ``overlay.mp4``); ``masks`` the mask of each frame the objects stage sampled it in."""

    video_id: str
    referent: Referent
    edit: Edit
    masks: tuple[FrameMask, ...]

    @property
    def folder(self) -> Path:
        return self.edit.path

    @property
    def overlay(self) -> Path:
        return self.edit.path / OVERLAY

    @property
    def mask_source(self) -> str:
        return mask_sources(self.masks)

    def text(self) -> str:
        fact, referent = self.referent.fact, self.referent
        doubt = f" (ambiguous: {len(referent.candidates)} objects fit; object {fact.object_id} is the most seen)" \
            if referent.ambiguous else ""
        return (f"\"{referent.expression.text}\" is object {fact.object_id} ({fact.category}: {fact.line}), seen "
                f"{fact.first_s:.1f}-{fact.last_s:.1f} s{doubt}; found by the {referent.how} ({referent.reason}). "
                f"Its masks in {len(self.masks)} frames (made by: {self.mask_source}) and the video with them drawn: "
                f"saved to {self.folder}{' (made before)' if self.edit.reused else ''}.")

    def evidence(self) -> tuple[Evidence, ...]:
        fact = self.referent.fact
        return (Evidence(fact.first_s, fact.last_s, f"object {fact.object_id} ({fact.category}: {fact.line}) is "
                         f"\"{self.referent.expression.text}\"", self.video_id, kind="objects"),)

    def about(self) -> dict[str, Any]:
        """What was referred to and how (the manifest's head, and the artifacts' and the faces' JSON)."""
        return about(self.video_id, self.referent) | {"mask_source": self.mask_source}

    def to_dict(self) -> dict[str, Any]:
        """For the faces: what was referred to, the files, and each frame's mask (COCO RLE with its size)."""
        start, end = self.edit.window
        return {**self.about(), "folder": str(self.folder), "overlay": str(self.overlay),
                "manifest": str(self.folder / MANIFEST), "reused": self.edit.reused,
                "start_s": round(start, 3), "end_s": round(end, 3),
                "evidence": [e.to_dict() for e in self.evidence()],
                "frames": [m.to_dict() for m in self.masks]}

    def artifacts(self) -> dict[str, Any]:
        """The observation's artifacts: the edit's (``file`` the folder), the overlay, and the masks by time."""
        return self.edit.artifacts() | self.about() | {"overlay": str(self.overlay), "frames": [
            {"time_s": round(m.time_s, 3), "frame": m.frame, "box": [round(v, 1) for v in m.box], "source": m.source}
            for m in self.masks]}


@dataclass(frozen=True)
class ReferredMasks:
    """A referred object's masks at given times, nothing saved (what an evaluation scores): ``masks[i]`` is
    the mask at ``times[i]`` (the segmenter's, else the box's), None where the object is not placed."""

    referent: Referent
    times: tuple[float, ...]
    masks: tuple[np.ndarray | None, ...]
    sources: tuple[str | None, ...]  # "mask", "box" or None, per time


def about(video_id: str, referent: Referent) -> dict[str, Any]:
    fact = referent.fact
    return {"video_id": video_id, "expression": referent.expression.text, "object_id": fact.object_id,
            "category": fact.category, "description": fact.line, "first_s": round(fact.first_s, 3),
            "last_s": round(fact.last_s, 3), "how": referent.how, "reason": referent.reason,
            "candidates": list(referent.candidates), "ambiguous": referent.ambiguous,
            "parsed": referent.expression.describe()}


@dataclass
class ReferTools:
    """``refer_object`` over one video's memory. ``ensure_objects`` builds the object memory (with the
    actions the builder makes beside it) when it is missing: None when it is there, else why it cannot be
    (``SQLTools.ensure_objects``); ``llm`` reads what the parser cannot (None: such an expression is
    refused, naming what the memory holds)."""

    memory: VideoMemory
    artifacts_dir: Path
    llm: ChatModel | None = None
    ensure_objects: Callable[[], str | None] | None = None

    def tools(self) -> list[Tool]:
        return [made(self.refer_object, tool_description(),
                     (Parameter("expression", str, "words naming one object, e.g. the black dog on the left"),))]

    @declared("segments", "pixels objects model files", offered=False)
    def refer_object(self, expression: str) -> Observation:
        found = self.segment(expression)
        return Observation(found.text(), evidence=found.evidence(), artifacts=found.artifacts())

    def resolve(self, expression: str) -> Referent:
        """The object ``expression`` refers to (a ``ToolInputError`` when none fits or it cannot be read)."""
        try:
            parsed = parse_expression(expression)
        except ValueError as error:
            raise ReferenceError(str(error)) from None
        if "objects" not in self.memory.stages:
            missing = self.ensure_objects() if self.ensure_objects is not None else \
                "this video's object memory is not built"
            if missing:
                raise ToolInputError(f"no object memory: {missing}")
        return resolve(parsed, ObjectFacts.load(self.memory), self.llm)

    def segment(self, expression: str, *, target: Path | None = None,
                progress: Progress | None = None) -> Segmentation:
        """Resolve ``expression`` and save the object's masks (to ``target``, a new or empty folder, when given)."""
        self._edits()  # a memory without a file is refused before any work
        return self.save(self.resolve(expression), target=target, progress=progress)

    def masks_at(self, referent: Referent, times: Sequence[float]) -> ReferredMasks:
        """The object's masks at ``times`` (seconds), over the video's displayed frame, written nowhere."""
        found = object_track(self.memory, referent.object_id)
        info = self._edits().video.info
        placed = {round(m.time_s, 6): m for m in object_masks(found.track, info.width, info.height, info.fps, times)}
        masks = [placed.get(round(float(t), 6)) for t in times]
        return ReferredMasks(referent, tuple(float(t) for t in times), tuple(m.mask if m else None for m in masks),
                             tuple(m.source if m else None for m in masks))

    def save(self, referent: Referent, *, target: Path | None = None, progress: Progress | None = None,
             max_seconds: float | None = None) -> Segmentation:
        """Save the masks of a resolved object (``VideoEdits.segment``; ``max_seconds`` bounds the stretch)."""
        edits = self._edits(max_seconds)
        found = object_track(self.memory, referent.object_id)
        info = edits.video.info
        masks = object_masks(found.track, info.width, info.height, info.fps)
        edit = edits.segment(found, masks, about(self.memory.video_id, referent) | {"mask_source": mask_sources(masks)},
                             target=target, progress=progress)
        _log.info("refer_object %r: object %d by the %s (%s)", referent.expression.text, referent.object_id,
                  referent.how, referent.reason)
        return Segmentation(self.memory.video_id, referent, edit, tuple(masks))

    def _edits(self, max_seconds: float | None = None) -> VideoEdits:
        file = video_file(self.memory.video)
        if file is None:
            raise ToolInputError(f"this memory ({self.memory.video_id}) was imported from captions and has no "
                                 "video file: there are no objects to segment")
        return VideoEdits(file, self.artifacts_dir, max_seconds=max_seconds)
