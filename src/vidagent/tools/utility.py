"""DoraemonGPT's utility tools (appendix A.2): ``export_clip``, ``highlight_object``, ``remove_object``
and ``export_frames`` over one video.

Each writes its output under the library's artifacts folder (``vidagent.tools.edits``: named by
content, so the same request reuses the file) and answers with it three ways: the path in the text,
``artifacts["file"]`` for the faces to link, and the output as a new source in ``Observation.media``
(a clip of the video; a new video for an object drawn or painted out; images for frames). Object ids
are the object memory's (``object_memory_querying`` shows them); the object memory is built on first
use. A memory imported from captions has no video file, and each tool says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

from vidagent.memory.video_memory import VideoMemory
from vidagent.prompts import load_prompt
from vidagent.tools.base import Evidence, Observation, Parameter, Tool
from vidagent.tools.declaration import declaration_of, declared, made
from vidagent.tools.edits import Edit, VideoEdits, object_track
from vidagent.tools.media import ImageMedia, VideoMedia, image_media, video_file, video_media
from vidagent.video.image import Image
from vidagent.video.sampling import spread_evenly
from vidagent.video.source import Source
from vidagent.video.video import Video

PROMPTS = "vidagent.tools"
FRAMES_PER_SECOND = 1.0  # export_frames' rate ...
MAX_FRAMES = 600  # ... lowered so that one call writes at most this many images
FRAME_SOURCES = 8  # export_frames: at most this many of the images become new sources


@cache
def tool_descriptions() -> dict[str, str]:
    """Tool name -> description, from ``utility_descriptions`` in ``prompts/utility.toml``."""
    lines = load_prompt(PROMPTS, "utility_descriptions").splitlines()
    return {name.strip(): text.strip() for name, _, text in (line.partition(":") for line in lines if line.strip())}


@dataclass
class UtilityTools:
    """The utility tools over one video's memory. ``ensure_objects`` builds the object memory when a
    tool needs it (None when it is there, else why it cannot be: ``SQLTools.ensure_objects``)."""

    memory: VideoMemory
    artifacts_dir: Path
    ensure_objects: Callable[[], str | None] | None = None

    def tools(self) -> list[Tool]:
        window = (Parameter("start_s", float, "start, seconds"), Parameter("end_s", float, "end, seconds"))
        object_id = (Parameter("object_id", int, "an object_id of the object memory"),)
        described = tool_descriptions()
        return [made(function, described[declaration_of(function).name], parameters) for function, parameters in (
            (self.export_clip, window), (self.highlight_object, object_id), (self.remove_object, object_id),
            (self.export_frames, window))]

    @declared("segments", "pixels files", offered=False)
    def export_clip(self, start_s: float, end_s: float) -> Observation:
        edits = self._edits()
        if isinstance(edits, Observation):
            return edits
        edit = edits.clip(start_s, end_s)
        start, end = edit.window
        clip = video_media(self.memory).clip(start, end)
        return self._made(edit, f"Clip {start:.1f}-{end:.1f} s ({end - start:.1f} s, {edit.count} frames"
                                f"{', with sound' if edits.video.info.has_audio else ''})", (clip,))

    @declared("segments", "pixels objects files", offered=False)
    def highlight_object(self, object_id: int) -> Observation:
        edits = self._edits()
        if isinstance(edits, Observation):
            return edits
        found = object_track(self.memory, object_id, self.ensure_objects)
        edit = edits.highlight(found)
        start, end = edit.window
        return self._made(edit, f"Object {object_id} ({found.category}) drawn with its box, label and path on "
                                f"{start:.1f}-{end:.1f} s of the video", (self._new_video(edit),))

    @declared("segments", "pixels objects files", offered=False)
    def remove_object(self, object_id: int) -> Observation:
        edits = self._edits()
        if isinstance(edits, Observation):
            return edits
        found = object_track(self.memory, object_id, self.ensure_objects)
        edit = edits.remove(found)
        return self._made(edit, f"Object {object_id} ({found.category}) painted out of the video where it is seen "
                                f"({found.track.first_s:.1f}-{found.track.last_s:.1f} s)", (self._new_video(edit),))

    @declared("segments", "pixels files", offered=False)
    def export_frames(self, start_s: float, end_s: float) -> Observation:
        edits = self._edits()
        if isinstance(edits, Observation):
            return edits
        end_s = min(end_s, self.memory.video.duration_s)  # the rate follows the window the video has
        rate = min(FRAMES_PER_SECOND, MAX_FRAMES / max(abs(end_s - start_s), 1e-6))
        edit = edits.frames(start_s, end_s, rate)
        start, end = edit.window
        images = sorted(p for p in edit.path.iterdir() if p.is_file())
        media = tuple(self._frame(path) for path in spread_evenly(images, FRAME_SOURCES))
        return self._made(edit, f"{edit.count} frames of {start:.1f}-{end:.1f} s, {rate:.3g} a second",
                          media, files=[p.name for p in images])

    def _edits(self) -> VideoEdits | Observation:
        file = video_file(self.memory.video)
        if file is None:
            return Observation(f"Error: this memory ({self.memory.video_id}) was imported from captions and has "
                               "no video file: there is nothing to cut, draw on or save.", is_error=True)
        return VideoEdits(file, self.artifacts_dir)

    def _made(self, edit: Edit, what: str, media: tuple[VideoMedia | ImageMedia, ...], **more: object) -> Observation:
        start, end = edit.window
        text = f"{what}: saved to {edit.path}{' (made before)' if edit.reused else ''}."
        return Observation(text, evidence=(Evidence(start, end, text, self.memory.video_id, kind="file"),),
                           artifacts=edit.artifacts() | more, media=media)

    def _new_video(self, edit: Edit) -> VideoMedia:
        """An edited video as a source of its own (a video, not a clip: its pixels are not the original's);
        it has no memory built."""
        video = Video(edit.path)
        source = Source(video.content_hash, "video", str(edit.path), parent=self.memory.video_id)
        return VideoMedia(source, VideoMemory(video, self.memory.library))

    def _frame(self, path: Path) -> ImageMedia:
        media = image_media(Image(path))
        return ImageMedia(Source(media.source.id, "image", str(path), parent=self.memory.video_id), media.pixels)
