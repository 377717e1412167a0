"""Edits of a video made on request: a clip, an object highlighted or removed, frames as images.

``VideoEdits`` turns a request (a window, an object's track) into a file. Without a target it goes
under the library's artifacts folder, named by what made it (the video's content, the edit and its
settings, the object's boxes), so the same request is answered with the file made before; with a
target (the command line's ``-o``) it goes there. ``object_track`` reads an object's sampled boxes
from the object memory (DoraemonGPT's space-dominant memory), building it first when asked to.
The tools (``vidagent.tools.utility``, ``vidagent.tools.refer``), the commands and the server's routes all edit
through here; ``segment`` saves a referred object's masks (``vidagent.tools.object_masks``).

Two requests for the same output at once (two threads of a server) make it once: the second waits for
the first and answers with its file; a process that loses the race to another (the command beside the
server) takes the file the other made. ``max_seconds`` refuses an edit that would cover more of the video
(``EditTooLong``), before any of it is made.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from vidagent.errors import OutputError, ToolInputError, VideoError
from vidagent.memory.video_memory import VideoMemory
from vidagent.tools.object_masks import FrameMask, write_segmentation
from vidagent.video import editing
from vidagent.video.editing import Progress
from vidagent.video.track import Track, TrackBox
from vidagent.video.video import Video

EDIT_VERSION = 1  # part of every artifact's name: raise it when an edit's pixels change
DEFAULT_STEP_S = 0.5  # the objects stage's sampling step when the memory cannot tell (2 frames a second)
HIGHLIGHT_MARGIN_S = 1.0  # a highlighted clip starts this long before the object is first seen, ends after
MAX_FRAME_RATE = 30.0  # frames are written at most this many a second
MAX_FRAMES = 3000  # ... and at most this many at once


class EditTooLong(ToolInputError):
    """An edit that would cover more of the video than its maker allows (``VideoEdits(max_seconds=)``)."""

    def __init__(self, kind: str, seconds: float, limit: float) -> None:
        super().__init__(f"the {kind} would cover {seconds:.1f} s of the video, more than the {limit:g} s allowed: "
                         "ask for a shorter window")
        self.kind, self.seconds, self.limit = kind, seconds, limit


@dataclass(frozen=True)
class ObjectTrack:
    """An object of the object memory with its boxes: ``label`` is how it is drawn (``dog 3``)."""

    object_id: int
    category: str
    track: Track

    @property
    def label(self) -> str:
        return f"{self.category} {self.object_id}"

    def digest(self) -> str:
        """What the boxes are, for an artifact's name (a rebuilt object memory gives new files)."""
        data = [(s.time_s, [round(v, 1) for v in s.box], s.mask) for s in self.track.samples]
        return hashlib.blake2b(json.dumps([self.track.step_s, data]).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Edit:
    """A finished edit: the file (a folder of images for frames), the window of the video it covers,
    how many frames or images it holds, and whether it was made before."""

    kind: str  # clip, highlight, remove, frames, segment
    path: Path
    window: tuple[float, float]
    count: int
    reused: bool
    seconds: float

    @property
    def media_type(self) -> str:
        return "inode/directory" if self.kind in ("frames", "segment") else "video/mp4"

    def artifacts(self) -> dict[str, Any]:
        """The edit as an observation's artifacts: ``file`` is its path."""
        return {"file": str(self.path), "kind": self.kind, "media_type": self.media_type,
                "start_s": round(self.window[0], 3), "end_s": round(self.window[1], 3), "count": self.count}


def object_track(memory: VideoMemory, object_id: int, ensure_objects: Callable[[], str | None] | None = None
                 ) -> ObjectTrack:
    """The object ``object_id`` of ``memory``'s object memory with its boxes. ``ensure_objects`` builds
    the object memory when it is missing (it returns why it cannot, or None); a ``ToolInputError``
    when there is none, or no such object (the error lists the objects there are)."""
    if "objects" not in memory.stages:
        missing = ensure_objects() if ensure_objects is not None else "this video's object memory is not built"
        if missing:
            raise ToolInputError(f"no object memory: {missing}")
    library, video_id = memory.library, memory.video_id
    objects = {o.object_id: o for o in library.objects(video_id)}
    if object_id not in objects:
        if not objects:
            raise ToolInputError("the object memory holds no objects (nothing was detected in this video)")
        listed = ", ".join(f"{o.object_id} ({o.category}, {o.first_s:.1f}-{o.last_s:.1f} s)"
                           for o in list(objects.values())[:12])
        more = f" and {len(objects) - 12} more" if len(objects) > 12 else ""
        raise ToolInputError(f"no object {object_id} in this video's object memory; its objects are {listed}{more}")
    detections = library.object_detections(video_id, object_id)
    boxes = [TrackBox(d.time_s, d.box, d.mask) for d in detections]
    return ObjectTrack(object_id, objects[object_id].category, Track(boxes, sampling_step(library.detection_times(video_id))))


def sampling_step(times: list[float]) -> float:
    """The objects stage's sampling step, read off the times it detected anything at: the smallest gap."""
    gaps = np.diff(np.asarray(times, dtype=np.float64))
    gaps = gaps[gaps > 1e-3]
    return float(gaps.min()) if gaps.size else DEFAULT_STEP_S


class VideoEdits:
    """Edits of one video file, written to ``artifacts_dir`` by content (or to a target given)."""

    def __init__(self, video: Video, artifacts_dir: Path, *, max_seconds: float | None = None) -> None:
        self.video = video
        self.artifacts_dir = Path(artifacts_dir)
        self.max_seconds = max_seconds

    def clip(self, start_s: float, end_s: float, *, target: Path | None = None,
             progress: Progress | None = None) -> Edit:
        """The ``[start_s, end_s)`` stretch as an mp4."""
        start, end = self._window(start_s, end_s)
        return self._video_edit("clip", (start, end), {}, target,
                                lambda path: editing.export_clip(self.video, start, end, path, progress=progress))

    def highlight(self, found: ObjectTrack, *, target: Path | None = None, progress: Progress | None = None) -> Edit:
        """The stretch the object is seen in (a second more each side) with its box, label and trace drawn."""
        if not len(found.track):
            raise ToolInputError(f"object {found.object_id} has no boxes in the object memory")
        start = max(0.0, found.track.first_s - HIGHLIGHT_MARGIN_S)
        end = min(self.video.duration_s, found.track.last_s + HIGHLIGHT_MARGIN_S)
        return self._video_edit("highlight", (start, end), {"object": found.object_id, "boxes": found.digest()},
                                target, lambda path: editing.highlight_track(
                                    self.video, found.track, found.label, path, start_s=start, end_s=end,
                                    progress=progress))

    def remove(self, found: ObjectTrack, *, target: Path | None = None, progress: Progress | None = None) -> Edit:
        """The whole video with the object painted out of every frame it is in."""
        if not len(found.track):
            raise ToolInputError(f"object {found.object_id} has no boxes in the object memory")
        window = (0.0, self.video.duration_s)
        settings = {"object": found.object_id, "boxes": found.digest(), "grow": [editing.GROW_FRACTION,
                    editing.GROW_PIXELS], "inpaint": [editing.INPAINT_RADIUS, editing.INPAINT_SIDE]}
        return self._video_edit("remove", window, settings, target,
                                lambda path: editing.remove_track(self.video, found.track, path, progress=progress))

    def segment(self, found: ObjectTrack, masks: Sequence[FrameMask], about: dict[str, Any], *,
                target: Path | None = None, progress: Progress | None = None) -> Edit:
        """The object's ``masks`` (``object_masks``: one per frame the objects stage sampled it in) as PNG images,
        the manifest (``about`` it, and every mask) and the stretch it is seen in with its mask drawn over it, in
        one folder (``vidagent.tools.object_masks``); ``target``, when given, is a new or empty folder."""
        if not len(found.track):
            raise ToolInputError(f"object {found.object_id} has no boxes in the object memory")
        if target is not None and target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise OutputError(target, "something is there already: the masks go into a new or empty folder")
        window = (found.track.first_s, min(self.video.duration_s, found.track.last_s))
        self._check_length("segment", window)
        path = target or self.artifacts_dir / self._name("segment", {"window": list(window), "object": found.object_id,
                                                                    "boxes": found.digest(), "about": about}, "")
        started = time.perf_counter()
        reused = self._made_once(path, target is None, Path.is_dir, lambda: write_segmentation(
            self.video, found.track, masks, about, path, window=window, progress=progress))
        return Edit("segment", path, window, len(masks), reused, time.perf_counter() - started)

    def frames(self, start_s: float, end_s: float, fps: float = 1.0, *, image_format: str = "jpg",
               target: Path | None = None, progress: Progress | None = None) -> Edit:
        """The frames of ``[start_s, end_s)`` at ``fps`` as images in a folder."""
        start, end = self._window(start_s, end_s, allow_instant=True)
        if not 0 < fps <= MAX_FRAME_RATE:
            raise ToolInputError(f"the frame rate must be above 0 and at most {MAX_FRAME_RATE:g} a second, not {fps:g}")
        count = len(editing.frame_times(start, end, fps))
        if count > MAX_FRAMES:
            raise ToolInputError(f"{count} frames is more than {MAX_FRAMES} at once: take a lower rate or a shorter "
                                 "window")
        self._check_length("frames", (start, end))
        path = target or self.artifacts_dir / self._name("frames", {"window": [start, end], "fps": fps,
                                                                    "format": image_format}, "")
        started = time.perf_counter()

        def make() -> None:
            nonlocal count
            count = len(editing.export_frames(self.video, start, end, fps, path, image_format=image_format,
                                              progress=progress))

        reused = self._made_once(path, target is None, Path.is_dir, make)
        return Edit("frames", path, (start, end), count, reused, time.perf_counter() - started)

    def _video_edit(self, kind: str, window: tuple[float, float], settings: dict[str, Any], target: Path | None,
                    make: Callable[[Path], Path]) -> Edit:
        self._check_length(kind, window)
        path = target or self.artifacts_dir / self._name(kind, {"window": list(window), **settings}, ".mp4")
        started = time.perf_counter()
        reused = self._made_once(path, target is None, Path.is_file, lambda: make(path))
        return Edit(kind, path, window, _frame_count(path), reused, time.perf_counter() - started)

    @staticmethod
    def _made_once(path: Path, by_content: bool, made: Callable[[Path], bool], make: Callable[[], object]) -> bool:
        """Make the output at ``path`` unless (named ``by_content``) it is there: whether it was there. One
        thread at a time makes a path; a maker that another process beat to a path named by content takes
        what the other made (its content is the same)."""
        with _one_maker(path):
            if by_content and made(path):
                return True
            try:
                make()
            except OutputError:
                if by_content and made(path):
                    return True
                raise
            return False

    def _check_length(self, kind: str, window: tuple[float, float]) -> None:
        seconds = window[1] - window[0]
        if self.max_seconds is not None and seconds > self.max_seconds + 1e-6:
            raise EditTooLong(kind, seconds, self.max_seconds)

    def _window(self, start_s: float, end_s: float, *, allow_instant: bool = False) -> tuple[float, float]:
        try:
            return editing.window(self.video, start_s, end_s, allow_instant=allow_instant)
        except VideoError as error:  # a window that is not one: the caller's input, said as such
            raise ToolInputError(str(error)) from None

    def _name(self, kind: str, settings: dict[str, Any], suffix: str) -> str:
        """``<kind>-<video id>-<key>``: the key hashes the edit, its settings and the version of the code."""
        identity = json.dumps({"kind": kind, "video": self.video.content_hash, "version": EDIT_VERSION, **settings},
                              sort_keys=True, default=str)
        key = hashlib.blake2b(identity.encode(), digest_size=8).hexdigest()
        return f"{kind}-{self.video.content_hash[:12]}-{key}{suffix}"


_makers: dict[Path, tuple[threading.Lock, int]] = {}  # output path -> its lock, and how many threads hold or wait
_makers_lock = threading.Lock()


@contextlib.contextmanager
def _one_maker(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock: one thread of this process at a time makes (or looks for) that output."""
    key = Path(path).absolute()
    with _makers_lock:
        lock, users = _makers.get(key, (threading.Lock(), 0))
        _makers[key] = (lock, users + 1)
    try:
        with lock:
            yield
    finally:
        with _makers_lock:
            lock, users = _makers[key]
            if users == 1:
                del _makers[key]
            else:
                _makers[key] = (lock, users - 1)


def _frame_count(path: Path) -> int:
    """The frames the video at ``path`` holds, as its container says."""
    import av

    with av.open(str(path)) as container:
        return int(container.streams.video[0].frames)
