"""The one handle on a video file: metadata, sampled frames, segments and audio (PyAV).

Frames are decoded straight through the stream once and only the frames nearest the
requested times are converted to RGB (and scaled, in swscale): seeking to each sample
point re-decodes whole GOPs and is several times slower on the short clips this tool sees,
and some files (a single keyframe at the start) give corrupt frames after a seek to a frame
that is no keyframe. A window that starts late (``frames_between``) is the one exception: one
seek to the keyframe at or before its start, then straight through, so cutting the last minute
of an hour does not decode the 59 before it; where the seek does not land on such a keyframe
the stream is read from its start as before.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterator, Sequence

import av
import numpy as np

from vidagent.errors import VideoError
from vidagent.video.pixels import fit_side

AUDIO_SAMPLE_RATE = 16000
TRUNCATION_SLACK_S = 0.5  # video data may end this much (or 2 % of the duration) before the header's duration
# frames_between seeks this much before a window's start when a seek to the start itself lands after it (a
# keyframe whose decoding time is before the start and whose presentation time is after it, with B-frames)
SEEK_BACKOFF_S = (0.0, 1.0, 5.0)
# frames_at decodes in full the frames this close (seconds) to a requested time's boundary too, so a last-bit
# difference between its arithmetic and the decoder's frame time cannot leave the served frame skipped
_SHOWN_MARGIN_S = 1e-4
# where frames_at lets the decoder skip frames nothing is predicted from (see Video._frames_shown)
# (H.264 only: an HEVC picture marked non-reference may still be predicted from by a higher temporal layer)
_SKIPPING_CODECS = frozenset({"h264"})
_SKIPPING_CONTAINERS = frozenset({"mp4", "mov", "matroska"})
# Demuxers that happily "decode" things that are not videos (text files, still images).
_NOT_VIDEO_FORMATS = ("tty", "image2", "ansi", "bin", "xbin", "idf", "adf")

# The file endings taken for a video wherever a folder is searched or a name checked; the eval's dataset
# finder and the server's uploads accept a few more (eval/dataset.py, server/uploads.py).
VIDEO_SUFFIXES = (".mp4", ".mkv", ".webm", ".avi", ".mov", ".m4v", ".mpg", ".mpeg")


@dataclass(frozen=True)
class VideoInfo:
    """What a video is, read from its container and first decoded frame."""

    path: str
    content_hash: str
    duration_s: float
    fps: float
    width: int  # as displayed, after rotation
    height: int
    rotation: int  # degrees the stored frames are turned to display upright
    has_audio: bool
    codec: str
    container: str


@dataclass(frozen=True)
class SampledFrame:
    """One decoded frame: its presentation time and RGB pixels (H, W, 3) uint8."""

    time_s: float
    image: np.ndarray


@dataclass(frozen=True)
class Segment:
    """A fixed-length time window of the video; ids start at 0."""

    segment_id: int
    start_s: float
    end_s: float

    @property
    def centre_s(self) -> float:
        return (self.start_s + self.end_s) / 2


def file_content_hash(path: Path, chunk_bytes: int = 1 << 20) -> str:
    """The video's identity: BLAKE2b of the file bytes (a renamed or moved file keeps it)."""
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def existing_file(path: str | Path) -> Path:
    """The file's real path (user folder expanded, made absolute, links followed); a ``VideoError``
    when it names no file. Absolute, because the library keeps where a video was last seen: a path
    relative to one shell's folder would hide the video from the server (and from anyone elsewhere)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise VideoError(f"{path}: no such file")
    if path.is_dir():
        raise VideoError(f"{path}: a folder, not a file (name a video or image in it; `vidagent index` "
                         f"takes folders)")
    if not path.is_file():
        raise VideoError(f"{path}: not a file")
    return path.resolve()


class Video:
    """A readable video file. Opening validates it; every failure is a ``VideoError``."""

    def __init__(self, path: str | Path) -> None:
        self.path = existing_file(path)
        self.info = self._probe()

    # -- metadata ---------------------------------------------------------------------------
    def _probe(self) -> VideoInfo:
        try:
            with av.open(str(self.path)) as container:
                if container.format.name.split(",")[0] in _NOT_VIDEO_FORMATS or not container.streams.video:
                    raise VideoError(f"{self.path}: no video stream (not a video file?)")
                stream = container.streams.video[0]
                first = next(container.decode(stream), None)
                if first is None:
                    raise VideoError(f"{self.path}: the video stream holds no decodable frame")
                duration = _duration_s(container, stream)
                _check_complete(self.path, container, stream, duration, first.pts)
                fps = float(stream.average_rate or stream.guessed_rate or 0) or 0.0
                rotation = int(getattr(first, "rotation", 0) or 0) % 360
                width, height = first.width, first.height
                if rotation in (90, 270):
                    width, height = height, width
                info = VideoInfo(
                    path=str(self.path),
                    content_hash=file_content_hash(self.path),
                    duration_s=duration,
                    fps=fps,
                    width=width,
                    height=height,
                    rotation=rotation,
                    has_audio=bool(container.streams.audio),
                    codec=stream.codec_context.name,
                    container=container.format.name,
                )
        except VideoError:
            raise
        except (av.error.FFmpegError, OSError, UnicodeDecodeError) as error:
            raise VideoError(f"{self.path}: cannot read as a video ({error_reason(error)})") from error
        if info.duration_s <= 0:
            raise VideoError(f"{self.path}: the video has zero length")
        return info

    @property
    def duration_s(self) -> float:
        return self.info.duration_s

    @property
    def content_hash(self) -> str:
        return self.info.content_hash

    # -- segments ---------------------------------------------------------------------------
    def segments(self, seconds: float = 2.0) -> list[Segment]:
        """Consecutive windows of ``seconds`` covering the whole video.

        A remainder shorter than a quarter segment joins the last full segment instead of
        standing alone as a sliver nobody can describe.
        """
        if seconds <= 0:
            raise ValueError("segment length must be positive")
        count = max(1, math.ceil(self.duration_s / seconds - 0.25))
        return [
            Segment(i, round(i * seconds, 3), round(self.duration_s if i == count - 1 else (i + 1) * seconds, 3))
            for i in range(count)
        ]

    # -- frames -----------------------------------------------------------------------------
    def frames_at(self, times_s: Sequence[float], *, max_side: int | None = None,
                  seek: bool = False, one_thread: bool = False) -> Iterator[SampledFrame]:
        """Yield, for each requested time (seconds, any order), the decoded frame shown then.

        One pass through the stream; only chosen frames are converted. Results come in time
        order; a time past the last frame gets the last frame. ``max_side`` scales frames down
        so their longer side is at most that many pixels. ``seek``: start decoding at the keyframe
        at or before the first time instead of at the start (for a window far into a long video).
        ``one_thread``: decode on this thread alone, for a caller whose models keep every core busy (the
        decoder's frame threads cost a quarter more CPU for the same frames: 3.5 against 2.8 CPU s for 9,000
        frames of 640x360 H.264, ``bench/index_library.py``'s video); otherwise the decoder takes a thread a core.
        """
        targets = sorted(set(max(0.0, float(t)) for t in times_s))
        if not targets:
            return
        next_target = 0
        previous = None
        shown = None if seek else self._frames_shown(targets)
        for frame in self._decoded(from_s=targets[0] if seek else 0.0, one_thread=one_thread, only=shown):
            # A target is served by the last frame whose time is <= target (the frame on screen).
            while next_target < len(targets) and frame.time > targets[next_target] + 1e-6:
                chosen = previous if previous is not None else frame
                yield self._convert(chosen, targets[next_target], max_side)
                next_target += 1
            if next_target >= len(targets):
                return
            previous = frame
        if previous is None:
            raise VideoError(f"{self.path}: no decodable frames")
        while next_target < len(targets):
            yield self._convert(previous, targets[next_target], max_side)
            next_target += 1

    def keyframes_near(self, times_s: Sequence[float], within_s: float, *,
                       max_side: int | None = None) -> Iterator[tuple[float, SampledFrame | None]]:
        """For each requested time (in time order), the keyframe nearest to it from ``within_s`` seconds
        before it to (not including) ``within_s`` after it (the frame with its own time), or None where no
        keyframe lies that near. Times ``2 * within_s`` apart never share a keyframe.

        Only keyframes are decoded (a twentieth to a three-hundredth of the frames of a usual stream):
        the cheapest look at a whole video, for a first glance that can take a frame near a time in
        place of the frame at it. A frame is converted once however many times it serves.
        """
        targets = sorted({max(0.0, float(t)) for t in times_s})
        if not targets:
            return
        converted: dict[int, SampledFrame] = {}

        def take(target: float, *candidates: av.VideoFrame | None) -> SampledFrame | None:
            """The candidate nearest to ``target`` within reach (the earlier on a tie), converted once."""
            reachable = [frame for frame in candidates if frame is not None and
                         -within_s - 1e-6 <= frame.time - target < within_s - 1e-6]
            if not reachable:
                return None
            nearest = min(reachable, key=lambda frame: abs(frame.time - target))
            if id(nearest) not in converted:
                converted[id(nearest)] = self._convert(nearest, nearest.time, max_side)
            return converted[id(nearest)]

        previous: av.VideoFrame | None = None
        index = 0
        try:
            with av.open(str(self.path)) as container:
                stream = container.streams.video[0]
                stream.codec_context.skip_frame = "NONKEY"
                for frame in container.decode(stream):
                    if frame.time is None:
                        continue
                    while index < len(targets) and frame.time >= targets[index]:
                        yield targets[index], take(targets[index], previous, frame)
                        index += 1
                    if index >= len(targets):
                        return
                    previous = frame
                    converted = {key: value for key, value in converted.items() if key == id(frame)}
        except (av.error.FFmpegError, OSError) as error:
            raise VideoError(f"{self.path}: corrupt video data ({error_reason(error)})") from error
        for target in targets[index:]:
            yield target, take(target, previous)

    def frames_between(self, start_s: float, end_s: float) -> Iterator[SampledFrame]:
        """Yield every frame, at full size, that starts in ``[start_s, end_s)`` (to the last frame when
        ``end_s`` reaches the video's end), in time order, each with its exact presentation time (not
        rounded: an edit times its output frames by them); when none starts there, the one on screen at
        ``start_s``. One pass, from the keyframe at or before ``start_s`` (see the module's note)."""
        start, end = max(0.0, float(start_s)), float(end_s)
        to_the_end = end >= self.duration_s - 1e-6
        previous = None
        yielded = False
        for frame in self._decoded(from_s=start):
            if frame.time < start - 1e-6:
                previous = frame
                continue
            if not to_the_end and frame.time >= end - 1e-6:
                break
            yielded = True
            yield self._convert(frame, frame.time, None, exact=True)
        if not yielded:
            if previous is None:
                raise VideoError(f"{self.path}: no decodable frames between {start:.2f} and {end:.2f} s")
            yield self._convert(previous, previous.time, None, exact=True)

    def sample(self, fps: float, *, max_side: int | None = None) -> Iterator[SampledFrame]:
        """Frames at a fixed rate, starting half an interval in."""
        if fps <= 0:
            raise ValueError("sampling rate must be positive")
        step = 1.0 / fps
        count = max(1, int(self.duration_s * fps))
        return self.frames_at([step / 2 + i * step for i in range(count)], max_side=max_side)

    def _frames_shown(self, targets: Sequence[float]) -> frozenset[int] | None:
        """The presentation stamps (``pts``) of the frames ``frames_at`` serves ``targets`` (sorted) with: for
        each, the last frame whose time is at or before it (the first frame for a time before every frame),
        with the frames a hair (``_SHOWN_MARGIN_S``) either side of that boundary. Read from the packets alone
        (a tenth of a second for 30,000 of them), up to a second past the last target.

        None (decode everything) where a packet has no stamp; where no packet is shown at another time than
        it is decoded at: a stream without B-frames (nothing to skip), or one whose stamps do not say the order
        frames are shown in (a file that gives B-frames their decoding times: the decoder hands frames out of
        their stamps' order, so which one serves a time cannot be told from the packets); and for codecs or
        containers other than H.264 in MP4 or Matroska (an AVI's packed B-frames come out of order too)."""
        try:
            with av.open(str(self.path)) as container:
                stream = container.streams.video[0]
                formats = set(container.format.name.split(","))
                if (not stream.time_base or stream.codec_context.name not in _SKIPPING_CODECS
                        or not formats & _SKIPPING_CONTAINERS):
                    return None
                base = Fraction(stream.time_base)
                # a packet is shown no earlier than it is decoded: past this decoding stamp none serves a target
                last_dts = math.ceil((Fraction(targets[-1]) + 1) / base)
                stamps, reordered = [], False
                for packet in container.demux(stream):
                    if packet.size:
                        if packet.pts is None:
                            return None
                        stamps.append(packet.pts)
                        reordered = reordered or (packet.dts is not None and packet.dts != packet.pts)
                        if packet.dts is not None and packet.dts > last_dts:
                            break
        except (av.error.FFmpegError, OSError):
            return None  # the decoding pass says what is wrong
        if not stamps or not reordered:
            return None
        stamps.sort()
        times = [stamp * base.numerator / base.denominator for stamp in stamps]
        shown: set[int] = {stamps[0]}
        for target in targets:
            first_after = bisect.bisect_right(times, target + 1e-6 + _SHOWN_MARGIN_S)
            last_before = bisect.bisect_right(times, target + 1e-6 - _SHOWN_MARGIN_S) - 1
            shown.update(stamps[max(0, last_before):max(1, first_after)])
        return frozenset(shown)

    def _decoded(self, from_s: float = 0.0, *, one_thread: bool = False,
                 only: frozenset[int] | None = None) -> Iterator[av.VideoFrame]:
        """Every frame of the video stream that has a time, in decode order, in one pass: from the start,
        or (``from_s`` > 0) from the keyframe at or before ``from_s`` where one seek finds it; damaged data
        ends it with a ``VideoError``. ``one_thread``: see ``frames_at``. ``only``: the stamps (``pts``) of the
        frames wanted: the decoder skips the frames no other frame is predicted from (``skip_frame`` NONREF,
        set packet by packet) unless they are wanted, which saves a third of the decoding on B-frame H.264
        (9.8 -> 6.6 CPU s for 30,000 frames) and leaves every wanted frame as it was (the frames they are
        predicted from are decoded as before)."""
        try:
            if from_s > 0:
                with av.open(str(self.path)) as container:
                    seeked = _seek_keyframe(container, from_s, one_thread)
                    if seeked is not None:
                        yield from seeked
                        return
            with av.open(str(self.path)) as container:
                stream = container.streams.video[0]
                _set_threads(stream, one_thread)
                if only is None:
                    frames: Iterator[av.VideoFrame] = container.decode(stream)
                else:
                    frames = _decoded_skipping(container, stream, only)
                for frame in frames:
                    if frame.time is not None:
                        yield frame
        except (av.error.FFmpegError, OSError) as error:
            raise VideoError(f"{self.path}: corrupt video data ({error_reason(error)})") from error

    def _convert(self, frame: av.VideoFrame, time_s: float, max_side: int | None, *,
                 exact: bool = False) -> SampledFrame:
        width, height = frame.width, frame.height
        if max_side and max(width, height) > max_side:
            width, height = fit_side(width, height, max_side, minimum=2)
        try:
            image = frame.to_ndarray(format="rgb24", width=width, height=height)
        except (av.error.FFmpegError, OSError) as error:
            raise VideoError(f"{self.path}: corrupt video data ({error_reason(error)})") from error
        rotation = self.info.rotation
        if rotation:
            # Display rotation is counter-clockwise in degrees; np.rot90 turns counter-clockwise.
            image = np.ascontiguousarray(np.rot90(image, k=rotation // 90))
        return SampledFrame(time_s=time_s if exact else round(time_s, 3), image=image)

    # -- audio ------------------------------------------------------------------------------
    def audio(self) -> np.ndarray | None:
        """The soundtrack as 16 kHz mono float32 in [-1, 1], or ``None`` when there is no audio track."""
        if not self.info.has_audio:
            return None
        chunks: list[np.ndarray] = []
        try:
            with av.open(str(self.path)) as container:
                stream = container.streams.audio[0]
                resampler = av.AudioResampler(format="flt", layout="mono", rate=AUDIO_SAMPLE_RATE)
                for frame in container.decode(stream):
                    for out in resampler.resample(frame):
                        chunks.append(out.to_ndarray().reshape(-1))
                for out in resampler.resample(None):
                    chunks.append(out.to_ndarray().reshape(-1))
        except (av.error.FFmpegError, OSError) as error:
            raise VideoError(f"{self.path}: corrupt audio data ({error_reason(error)})") from error
        if not chunks:
            return np.zeros(0, np.float32)
        # Lossy decoders overshoot full scale a little; clip so every consumer sees [-1, 1].
        return np.clip(np.concatenate(chunks), -1.0, 1.0).astype(np.float32, copy=False)

    def __repr__(self) -> str:
        info = self.info
        return f"Video({info.path!r}, {info.duration_s:.1f}s, {info.width}x{info.height}, {info.fps:.2f} fps)"


def _check_complete(path: Path, container: av.container.InputContainer, stream: av.video.stream.VideoStream,
                    duration_s: float, first_pts: int | None) -> None:
    """Refuse a file whose video data stops well before the duration its header gives (a download or copy
    cut short). Indexing it as a whole would fill the memory with the last readable frame repeated to the
    end and answer about a video that is not there; indexing only the readable part would answer about
    a video other than the one the user named. Reading the packets (no decoding) costs about as much as
    hashing the file, which opening does anyway. The demuxing goes on after the first frame, which
    opening decoded already (``first_pts``): a one-frame video's data ends where that frame's does."""
    if duration_s <= 0 or not stream.time_base:
        return
    base = Fraction(stream.time_base)
    start = stream.start_time or 0
    rate = float(stream.average_rate or stream.guessed_rate or 0)
    frame_s = 1.0 / rate if rate > 0 else 0.0  # a packet that gives no duration shows for one frame
    end = float((first_pts - start) * base) + frame_s if first_pts is not None else 0.0
    for packet in container.demux(stream):
        if packet.size and packet.pts is not None:
            shown = float(packet.duration * base) if packet.duration else frame_s
            end = max(end, float((packet.pts - start) * base) + shown)
    if duration_s - end > max(TRUNCATION_SLACK_S, 0.02 * duration_s):
        raise VideoError(f"{path}: the file is cut short: its video data ends at {end:.2f} s of the {duration_s:.2f} s "
                         f"its header gives (an unfinished download or copy?); get the whole file, or cut the "
                         f"readable part into a file of its own")


def _decoded_skipping(container: av.container.InputContainer, stream: av.video.stream.VideoStream,
                      wanted: frozenset[int]) -> Iterator[av.VideoFrame]:
    """``container.decode(stream)``, the decoder told before each packet whether it may skip that packet's
    frame where nothing is predicted from it: only where its stamp is not ``wanted``."""
    context = stream.codec_context
    for packet in container.demux(stream):
        context.skip_frame = "DEFAULT" if packet.pts is None or packet.pts in wanted else "NONREF"
        yield from packet.decode()


def _set_threads(stream: av.video.stream.VideoStream, one_thread: bool) -> None:
    """The decoder on this thread alone, or on a thread a core (frame threads)."""
    if one_thread:
        stream.codec_context.thread_count = 1
    else:
        stream.thread_type = "AUTO"


def _seek_keyframe(container: av.container.InputContainer, from_s: float,
                   one_thread: bool = False) -> Iterator[av.VideoFrame] | None:
    """The frames (that have a time) of ``container``'s video stream from the keyframe at or before
    ``from_s``, or None where no seek lands on one: a seek lands on the keyframe whose decoding time is at
    or before its target, whose presentation time may be after ``from_s`` (B-frames), so the seek is tried
    again a little earlier (``SEEK_BACKOFF_S``); a first frame that is no keyframe, or that starts after
    ``from_s`` every time, or a stream that cannot seek, gives None (read it from the start)."""
    stream = container.streams.video[0]
    if not stream.time_base:
        return None
    _set_threads(stream, one_thread)
    base = Fraction(stream.time_base)
    for back in SEEK_BACKOFF_S:
        target = max(0.0, from_s - back)
        try:
            container.seek(math.floor(Fraction(target) / base), stream=stream, backward=True, any_frame=False)
            frames = (frame for frame in container.decode(stream) if frame.time is not None)
            first = next(frames, None)
        except av.error.FFmpegError:
            return None
        if first is None or not first.key_frame:
            return None
        if first.time <= from_s + 1e-6:
            return itertools.chain((first,), frames)
        if target == 0.0:
            return None
    return None


def _duration_s(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> float:
    if stream.duration and stream.time_base:
        return float(stream.duration * Fraction(stream.time_base))
    if container.duration:
        return container.duration / av.time_base
    if stream.frames and stream.average_rate:
        return float(stream.frames / stream.average_rate)
    return 0.0


def error_reason(error: BaseException) -> str:
    """A decoder's or the file system's failure in a few words, for a one-line error."""
    text = getattr(error, "strerror", None) or str(error)
    return text.split(":")[0].strip() or error.__class__.__name__
