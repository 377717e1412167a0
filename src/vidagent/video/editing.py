"""Pixel work on a video file: cut a clip, draw an object's track on it, paint an object out, and
write its frames as images (DoraemonGPT's utility tools, appendix A.2).

Every output is written under a temporary name beside its target and renamed when it is whole, so a
failed or interrupted run never leaves a half-written file (or folder) under the name asked for; a
failure to write it is an ``OutputError`` (a bad window or an unreadable source, a ``VideoError``).
Videos are re-encoded (H.264, high quality; frame-accurate, unlike a keyframe-aligned stream copy)
at the source's frame times (a variable frame rate stays variable, so the sound stays in step) and
size (even sides: the last row or column of an odd size is dropped), upright, and keep their
soundtrack: the window's audio, re-encoded as AAC at its own rate and channels, interleaved with
the picture. Frames are decoded in one pass from the keyframe before the window (see
``vidagent.video.video``).

An object's mask drawn over the video (``overlay_track``, for a referred object) is a tint and an
outline of its mask in each frame (its box where it has none). Drawing uses supervision's annotators (box, label, and the trace of the box's centre); painting out
paints back, first, the scene seen behind the object where it has moved on (``Background``: a masked median of
frames spread over its stretch, used only where the frame around the hole matches it, i.e. a still camera),
and fills the rest with OpenCV's inpainting (Telea) over the object's region in each frame (its mask moved
with it, or its box, grown a little), worked on the region's neighbourhood at most ``INPAINT_SIDE`` pixels a
side and scaled back, so that a large object costs about what a small one does. On a textured background
Telea alone is off by 62 (of 255) on average inside the hole, the scene behind by 8 (tests/tools/test_utility.py).
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import shutil
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Callable, Iterator

import av
import cv2
import numpy as np

from vidagent.errors import OutputError, VideoError
from vidagent.video.track import Track, grown, region
from vidagent.video.video import SampledFrame, Video, error_reason

Progress = Callable[[float, float], None]  # (seconds of the window done, seconds in all)

_log = logging.getLogger(__name__)
CRF = "18"  # x264's quality: visually lossless, so an edit changes only what it means to change
PRESET = "veryfast"
GROW_FRACTION = 0.1  # an object's box is grown by this much of its size on each side before painting it out
GROW_PIXELS = 4  # ... and by this many pixels (also how far a mask is dilated)
INPAINT_RADIUS = 3  # pixels OpenCV's inpainting looks around each painted pixel (in the scaled neighbourhood)
INPAINT_SIDE = 240  # the neighbourhood painted out is scaled down to at most this many pixels a side
BACKGROUND_SAMPLES = 32  # frames spread over an object's stretch to see what lies behind it (``Background``)
BACKGROUND_MARGIN_S = 2.0  # ... from this long before it is first seen to this long after it is last seen
BACKGROUND_MIN_VIEWS = 2  # a pixel behind the object is known when this many samples show it uncovered
BACKGROUND_REACH = 8  # pixels around the swept area kept, to compare a frame with the background there
BACKGROUND_RING_PIXELS = 20  # fewer known pixels around a hole than this: nothing to compare, Telea alone
STILL_TOLERANCE = 10.0  # mean difference (0-255) around a hole above which the frame is not the background's
# the clock output frames are timed on: fine enough for any source's frame times (90 kHz, MPEG's clock, holds
# 24, 25, 30, 50, 60 and their /1.001 rates exactly); MPEG-4 part 2 takes a denominator of at most 65535
OUTPUT_CLOCK = {"libx264": Fraction(1, 90000), "mpeg4": Fraction(1, 60000)}
IMAGE_FORMATS = ("jpg", "png")
OVERLAY_RGB = (0, 200, 255)  # a referred object's mask is drawn over the video in this colour ...
OVERLAY_ALPHA = 0.45  # ... this opaque
JPEG_QUALITY = 92


# Not eval.clips.cut_clip (cached by window, 16 kHz mono sound): an edit, the source's timing and sound kept.
def export_clip(video: Video, start_s: float, end_s: float, target: Path, *, progress: Progress | None = None) -> Path:
    """The ``[start_s, end_s)`` stretch of ``video`` as an mp4 at ``target``."""
    start, end = window(video, start_s, end_s)
    return _rewrite(video, start, end, target, lambda frame: frame.image, progress)


def highlight_track(video: Video, track: Track, label: str, target: Path, *, start_s: float = 0.0,
                    end_s: float | None = None, progress: Progress | None = None) -> Path:
    """``video``'s ``[start_s, end_s)`` with the object of ``track`` drawn on every frame it is in: its
    box, ``label`` above it, and the trace of where its centre has been."""
    import supervision as sv

    start, end = window(video, start_s, video.duration_s if end_s is None else end_s)
    colour = sv.Color.from_hex("#ff3b30")
    boxes = sv.BoxAnnotator(color=colour, thickness=_thickness(video), color_lookup=sv.ColorLookup.INDEX)
    labels = sv.LabelAnnotator(color=colour, text_color=sv.Color.WHITE, text_scale=_thickness(video) / 4,
                               text_thickness=max(1, _thickness(video) // 2), color_lookup=sv.ColorLookup.INDEX,
                               smart_position=True)
    trace = sv.TraceAnnotator(color=colour, thickness=_thickness(video), color_lookup=sv.ColorLookup.INDEX,
                              trace_length=max(2, round(2 * (video.info.fps or 25))))  # the last two seconds

    def draw(frame: SampledFrame) -> np.ndarray:
        box = track.box_at(frame.time_s)
        if box is None:
            return frame.image
        found = sv.Detections(xyxy=np.array([box], dtype=np.float32), class_id=np.array([0]),
                              tracker_id=np.array([1]))
        scene = np.ascontiguousarray(frame.image[..., ::-1])  # supervision draws in OpenCV's BGR
        scene = trace.annotate(scene, found)
        scene = boxes.annotate(scene, found)
        return labels.annotate(scene, found, labels=[label])[..., ::-1]

    return _rewrite(video, start, end, target, draw, progress)


def remove_track(video: Video, track: Track, target: Path, *, start_s: float = 0.0, end_s: float | None = None,
                 progress: Progress | None = None) -> Path:
    """``video``'s ``[start_s, end_s)`` with the object of ``track`` painted out of every frame it is in."""
    start, end = window(video, start_s, video.duration_s if end_s is None else end_s)
    behind = Background.seen(video, track, start, end)

    def paint(frame: SampledFrame) -> np.ndarray:
        height, width = frame.image.shape[:2]
        placed = track.place(frame.time_s, width, height)
        if placed is None:
            return frame.image
        covered = region(placed, width, height, fraction=GROW_FRACTION, pixels=GROW_PIXELS)
        image, covered = behind.fill(frame.image, covered) if behind is not None else (frame.image, covered)
        return inpaint(image, covered)

    return _rewrite(video, start, end, target, paint, progress)


def overlay_track(video: Video, track: Track, target: Path, *, start_s: float = 0.0, end_s: float | None = None,
                  progress: Progress | None = None) -> Path:
    """``video``'s ``[start_s, end_s)`` with the object of ``track`` tinted and outlined in every frame it is
    in: its mask moved with it where it has one, else its box (``OVERLAY_ALPHA`` of ``OVERLAY_RGB``)."""
    start, end = window(video, start_s, video.duration_s if end_s is None else end_s)
    colour = np.array(OVERLAY_RGB, np.float32)

    def tint(frame: SampledFrame) -> np.ndarray:
        height, width = frame.image.shape[:2]
        placed = track.place(frame.time_s, width, height)
        if placed is None:
            return frame.image
        covered = placed.mask if placed.mask is not None else region(placed, width, height, fraction=0.0, pixels=0)
        out = frame.image.copy()
        out[covered] = (out[covered] * (1 - OVERLAY_ALPHA) + colour * OVERLAY_ALPHA).astype(np.uint8)
        contours, _ = cv2.findContours(covered.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        return cv2.drawContours(out, contours, -1, OVERLAY_RGB, _thickness(video))

    return _rewrite(video, start, end, target, tint, progress)


class Background:
    """What lies behind an object that moves in front of a still camera: for each pixel of the area it
    sweeps, the median of the sampled frames in which that pixel is not covered. Painting a person out
    with Telea's method alone leaves a smear the size of the person; where the object has moved on, the
    scene behind it has been seen, and that is what is painted back. A frame whose surroundings of the
    hole do not match the background (the camera moved, the light changed) is left to Telea's method."""

    def __init__(self, box: tuple[int, int, int, int], pixels: np.ndarray, known: np.ndarray) -> None:
        self.box, self.pixels, self.known = box, pixels, known

    @classmethod
    def seen(cls, video: Video, track: Track, start_s: float, end_s: float) -> "Background | None":
        """The background behind ``track``'s object, from ``BACKGROUND_SAMPLES`` frames spread over its
        stretch of the video (and ``BACKGROUND_MARGIN_S`` either side); None where it cannot be seen."""
        if not len(track):
            return None
        width, height = video.info.width, video.info.height
        first = max(0.0, min(start_s, track.first_s) - BACKGROUND_MARGIN_S)
        last = min(video.duration_s, max(end_s, track.last_s) + BACKGROUND_MARGIN_S)
        times = [float(t) for t in np.linspace(first, last, BACKGROUND_SAMPLES)]
        holes = {}
        for t in times:
            placed = track.place(t, width, height)
            holes[round(t, 3)] = None if placed is None else \
                region(placed, width, height, fraction=GROW_FRACTION, pixels=GROW_PIXELS)
        sweep = [hole for hole in holes.values() if hole is not None]
        if not sweep:
            return None
        ys, xs = np.nonzero(np.logical_or.reduce(sweep))
        x1, y1, x2, y2 = grown((int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1), width, height,
                               fraction=0.0, pixels=BACKGROUND_REACH)
        crops, uncovered = [], []
        for frame in video.frames_at(times):
            if frame.image.shape[:2] != (height, width):
                return None
            crops.append(frame.image[y1:y2, x1:x2])
            hole = holes.get(round(frame.time_s, 3))
            uncovered.append(np.ones((y2 - y1, x2 - x1), bool) if hole is None else ~hole[y1:y2, x1:x2])
        stack, seen = np.stack(crops), np.stack(uncovered)
        pixels = np.zeros(stack.shape[1:], np.uint8)
        for row in range(0, stack.shape[1], 32):  # a masked median, a band of rows at a time (bounded memory)
            band = stack[:, row:row + 32].astype(np.float32)
            band[~seen[:, row:row + 32]] = np.nan
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a pixel never uncovered: NaN, not known
                pixels[row:row + 32] = np.nan_to_num(np.nanmedian(band, axis=0)).round().astype(np.uint8)
        known = seen.sum(axis=0) >= BACKGROUND_MIN_VIEWS
        return cls((x1, y1, x2, y2), pixels, known) if known.any() else None

    def fill(self, image: np.ndarray, covered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``image`` with the ``covered`` pixels the background knows painted from it, and the covered pixels
        left for Telea's method; both unchanged where the frame around the hole does not match the background."""
        x1, y1, x2, y2 = self.box
        inner = covered[y1:y2, x1:x2]
        if not inner.any() or image.shape[:2] != covered.shape:
            return image, covered
        ring = cv2.dilate(inner.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool) & ~inner & self.known
        if ring.sum() < BACKGROUND_RING_PIXELS:
            return image, covered
        around = np.abs(image[y1:y2, x1:x2][ring].astype(np.int16) - self.pixels[ring].astype(np.int16)).mean()
        if around > STILL_TOLERANCE:
            return image, covered
        take = inner & self.known
        out, left = image.copy(), covered.copy()
        out[y1:y2, x1:x2][take] = self.pixels[take]
        left[y1:y2, x1:x2][take] = False
        return out, left


def inpaint(image: np.ndarray, covered: np.ndarray) -> np.ndarray:
    """``image`` with the ``covered`` pixels (bool mask) filled from around them (Telea's method); no
    other pixel changes."""
    if not covered.any():
        return image
    height, width = covered.shape
    ys, xs = np.nonzero(covered)
    y1, y2, x1, x2 = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
    scale = min(1.0, INPAINT_SIDE / max(y2 - y1, x2 - x1))
    margin = math.ceil(2 * INPAINT_RADIUS / scale)  # the surroundings the fill is taken from
    left, top, right, bottom = grown((x1, y1, x2, y2), width, height, fraction=0.0, pixels=margin)
    patch, hole = image[top:bottom, left:right], covered[top:bottom, left:right]
    scale = min(1.0, INPAINT_SIDE / max(patch.shape[:2]))
    if scale < 1.0:
        small = (max(1, round(patch.shape[1] * scale)), max(1, round(patch.shape[0] * scale)))
        small_hole = cv2.resize(hole.astype(np.uint8), small, interpolation=cv2.INTER_NEAREST)
        small_hole = cv2.dilate(small_hole, np.ones((3, 3), np.uint8))  # the scaled hole still covers its edge
        filled = cv2.inpaint(cv2.resize(patch, small, interpolation=cv2.INTER_AREA), small_hole * 255,
                             INPAINT_RADIUS, cv2.INPAINT_TELEA)
        filled = cv2.resize(filled, (patch.shape[1], patch.shape[0]), interpolation=cv2.INTER_LINEAR)
    else:
        filled = cv2.inpaint(np.ascontiguousarray(patch), hole.astype(np.uint8) * 255, INPAINT_RADIUS,
                             cv2.INPAINT_TELEA)
    out = image.copy()
    out[top:bottom, left:right][hole] = filled[hole]
    return out


def export_frames(video: Video, start_s: float, end_s: float, fps: float, folder: Path, *,
                  image_format: str = "jpg", progress: Progress | None = None) -> list[Path]:
    """The frames shown at ``start_s``, ``start_s + 1/fps``, ... before ``end_s`` (one frame when they
    are equal) as image files in ``folder`` (new, or empty), named ``frame_00001_2.50s.jpg`` (number and
    time); written into a temporary folder that is renamed when every image is in it."""
    if image_format not in IMAGE_FORMATS:
        raise VideoError(f"frames are written as {' or '.join(IMAGE_FORMATS)}, not {image_format!r}")
    if not fps > 0:
        raise VideoError(f"the frame rate must be positive, not {fps:g}")
    start, end = window(video, start_s, end_s, allow_instant=True)
    times = frame_times(start, end, fps)
    from PIL import Image as PILImage

    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise OutputError(folder, "already exists and is not an empty folder (name a new or empty folder)")
    temporary = folder.with_name(f".{folder.name}.{_unique()}.part")
    names: list[str] = []
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        temporary.mkdir()
        for number, frame in enumerate(video.frames_at(times), start=1):
            name = f"frame_{number:05d}_{frame.time_s:.2f}s.{image_format}"
            options = {"quality": JPEG_QUALITY} if image_format == "jpg" else {}
            PILImage.fromarray(frame.image).save(temporary / name, **options)
            names.append(name)
            if progress is not None:
                progress(frame.time_s - start, end - start)
        os.replace(temporary, folder)
    except OSError as error:
        raise OutputError(folder, f"cannot write the frames ({error.strerror or error})") from error
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return [folder / name for name in names]


def frame_times(start_s: float, end_s: float, fps: float) -> list[float]:
    """``start_s``, ``start_s + 1/fps``, ... before ``end_s``; ``[start_s]`` when the window is an instant."""
    count = max(1, int(np.floor((end_s - start_s) * fps + 1e-6)))
    return [round(start_s + i / fps, 3) for i in range(count)]


def window(video: Video, start_s: float, end_s: float, *, allow_instant: bool = False) -> tuple[float, float]:
    """``[start_s, end_s]`` checked against ``video`` (a little past its end is its end); a ``VideoError``
    that says why when it is no window of it."""
    duration = video.duration_s
    start, end = float(start_s), min(float(end_s), duration)
    if not (np.isfinite(start) and np.isfinite(end)) or start < 0:
        raise VideoError(f"times must be seconds from 0 to {duration:.2f}, not {start_s:g}-{end_s:g}")
    if start >= duration:
        raise VideoError(f"the window starts at {start:g} s, after the video ends ({duration:.2f} s)")
    if end < start or (end == start and not allow_instant):
        raise VideoError(f"the window must end after it starts ({start_s:g}-{end_s:g} s)")
    return start, end


def _unique() -> str:
    """A temporary name's own part: no two writers (processes or threads) share one."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


def _thickness(video: Video) -> int:
    """Lines about 1/360 of the frame's longer side (2 px at 720p)."""
    return max(2, round(max(video.info.width, video.info.height) / 480))


def _rewrite(video: Video, start: float, end: float, target: Path, change: Callable[[SampledFrame], np.ndarray],
             progress: Progress | None) -> Path:
    """Write ``change(frame)`` for every frame of ``[start, end)`` (and the window's audio) to ``target``."""
    target = Path(target)
    temporary = target.with_name(f".{target.stem}.{_unique()}.part{target.suffix or '.mp4'}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _encode(video, start, end, temporary, change, progress)
        os.replace(temporary, target)
    except (av.error.FFmpegError, OSError) as error:  # reading the source fails as a VideoError, not here
        raise OutputError(target, f"cannot write the video ({error_reason(error)})") from error
    finally:
        temporary.unlink(missing_ok=True)
    return target


def _encode(video: Video, start: float, end: float, target: Path, change: Callable[[SampledFrame], np.ndarray],
            progress: Progress | None) -> None:
    """Each output frame is shown at its source time less ``start`` (the first at 0: it stands for the picture
    on screen when the window starts), on a fine clock, so a variable-frame-rate source keeps its timing and
    the sound stays with the picture; the nominal rate only guides the encoder's rate control."""
    rate = _frame_rate(video)
    codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
    clock = OUTPUT_CLOCK[codec]
    with av.open(str(target), "w", format="mp4", options={"movflags": "+faststart"}) as sink:
        picture: av.video.stream.VideoStream | None = None
        sound = _AudioCopy(video, start, end, sink) if video.info.has_audio else None
        last_pts = -1
        for frame in video.frames_between(start, end):
            image = change(frame)
            height, width = image.shape[0] // 2 * 2, image.shape[1] // 2 * 2
            if picture is None:
                options = {"crf": CRF, "preset": PRESET} if codec == "libx264" else {}
                picture = sink.add_stream(codec, rate=rate, options=options)
                picture.width, picture.height, picture.pix_fmt = width, height, "yuv420p"
                picture.codec_context.time_base = clock
                if codec != "libx264":
                    picture.bit_rate = 8_000_000
            out = av.VideoFrame.from_ndarray(np.ascontiguousarray(image[:height, :width]), format="rgb24")
            # the source's time on the output's clock; never before the frame written last (times that round alike)
            pts = 0 if last_pts < 0 else max(last_pts + 1, round(Fraction(frame.time_s - start) / clock))
            out.pts, out.time_base = pts, clock
            out.duration = round(1 / (rate * clock))  # the last frame's: the others end where the next starts
            for packet in picture.encode(out):
                sink.mux(packet)
            last_pts = pts
            shown = float((pts + out.duration) * clock)
            if sound is not None:
                sound.mux_until(shown)
            if progress is not None:
                progress(min(end - start, shown), end - start)
        if picture is None:
            raise VideoError(f"{video.path}: the window {start:.2f}-{end:.2f} s holds no frames")
        for packet in picture.encode():
            sink.mux(packet)
        if sound is not None:
            sound.mux_until(None)


def _frame_rate(video: Video) -> Fraction:
    with av.open(str(video.path)) as container:
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
    return Fraction(rate) if rate else Fraction(25)


_AAC_RATES = (96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000)


class _AudioCopy:
    """The window's soundtrack, re-encoded as AAC (its own rate and channels) and muxed as the
    picture advances, so the two are interleaved in the file."""

    def __init__(self, video: Video, start: float, end: float, sink: av.container.OutputContainer) -> None:
        with av.open(str(video.path)) as container:
            source = container.streams.audio[0]
            rate = int(source.rate or 48000)
            self.rate = rate if rate in _AAC_RATES else 48000  # AAC takes only these; others are resampled
            self.layout = "mono" if source.channels == 1 else "stereo"  # a named layout: "2 channels" is refused
        self.stream = sink.add_stream("aac", rate=self.rate)
        self.stream.layout = self.layout
        self.sink = sink
        self.path, self.start, self.end = video.path, start, end
        self._packets: Iterator[av.Packet] | None = None
        self._pending: av.Packet | None = None

    def mux_until(self, time_s: float | None) -> None:
        """Mux the encoded audio up to ``time_s`` seconds into the clip (None: all the rest)."""
        if self._packets is None:
            self._packets = self._encoded()
        while True:
            if self._pending is None:
                self._pending = next(self._packets, None)
                if self._pending is None:
                    return
            packet = self._pending
            if time_s is not None and packet.pts is not None and packet.time_base is not None \
                    and float(packet.pts * packet.time_base) > time_s:
                return
            self.sink.mux(packet)
            self._pending = None

    def _encoded(self) -> Iterator[av.Packet]:
        size = self.stream.codec_context.frame_size or 1024
        first, last = round(self.start * self.rate), round(self.end * self.rate)
        pending: list[np.ndarray] = []
        held = 0
        written = 0
        for chunk in self._samples(first, last):
            pending.append(chunk)
            held += chunk.shape[1]
            while held >= size:
                block = np.concatenate(pending, axis=1)
                yield from self._encode(block[:, :size], written)
                written += size
                rest = block[:, size:]
                pending, held = [rest], rest.shape[1]
        if held:
            yield from self._encode(np.concatenate(pending, axis=1), written)
        yield from self.stream.encode(None)

    def _encode(self, block: np.ndarray, pts: int) -> Iterator[av.Packet]:
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(block, dtype=np.float32), format="fltp",
                                           layout=self.layout)
        frame.sample_rate, frame.pts = self.rate, pts
        frame.time_base = Fraction(1, self.rate)
        yield from self.stream.encode(frame)

    def _samples(self, first: int, last: int) -> Iterator[np.ndarray]:
        """The soundtrack's samples ``first`` to ``last`` (counted from time 0) as planar float32 chunks."""
        resampler = av.AudioResampler(format="fltp", layout=self.layout, rate=self.rate)
        position: int | None = None
        try:
            with av.open(str(self.path)) as container:
                source = container.streams.audio[0]
                for decoded in container.decode(source):
                    if position is None:
                        position = max(0, round((decoded.time or 0.0) * self.rate))
                    for frame in resampler.resample(decoded):
                        samples = frame.to_ndarray().reshape(len(frame.layout.channels), -1)
                        begin, position = position, position + samples.shape[1]
                        if position <= first:
                            continue
                        if begin >= last:
                            return
                        yield samples[:, max(0, first - begin): last - begin]
        except (av.error.FFmpegError, OSError) as error:  # a damaged soundtrack costs the sound, not the clip
            _log.warning("%s: audio left out of the clip (%s)", self.path, error_reason(error))
