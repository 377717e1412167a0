"""A copy of a video that web browsers play (the server page's player), made with PyAV.

Browsers play few of the formats PyAV reads. Measured with Debian's Chromium 156 on the test videos and on
clips made for the purpose: H.264, VP8, VP9 and AV1 pictures in MP4, QuickTime, WebM or Matroska play, with
AAC, MP3, Opus, Vorbis or FLAC sound; no AVI, MPEG program or transport stream plays at all, MPEG-4 Part 2 or
HEVC pictures give "no supported streams" (or, beside AAC sound, a player that plays the sound and shows no
picture), and AC-3 or MP2 sound is left out without a word. ``playability`` tells from a file's streams
whether it plays as it is (H.264 only as 8-bit 4:2:0, the one kind every browser decodes).

``make_proxy`` re-encodes one that does not, in one pass over the file: the picture as H.264 (yuv420p, in MP4,
with its index first so playing starts before the whole file is read) where the installed FFmpeg has x264,
else as VP9 or VP8 in WebM (``proxy_format`` picks); the sound as AAC (MP4) or Opus/Vorbis (WebM), or left
out when no such encoder is installed or the soundtrack cannot be read. Frames keep their source times (so
times in the video's memory are times in the copy), the picture is turned upright, at most ``MAX_SIDE``
pixels a side with even sides, and a keyframe every ``KEYFRAME_S`` seconds lets a player seek quickly. A few
undecodable packets are skipped (a browser would skip them too); more than ``MAX_DAMAGED`` of them is a
``VideoError`` that says the data is damaged. The copy is written under a temporary name and renamed when it
is whole.

A copy's work is bounded before and during it (issue 55: a 287 KB VP9 file, one 8192 x 8192 keyframe shown again
by 20,000 one-byte packets, cost 22 minutes of CPU and +1 GB). ``check_copyable`` refuses from the header a
picture over ``MAX_SOURCE_PIXELS``, a duration over ``MAX_SOURCE_S`` and more than ``MAX_STREAMS`` streams; while
copying, a frame over the pixel cap, more frames than the duration allows at ``MAX_RATE``, a copy past
``copy_seconds`` of work or past ``copy_bytes`` on disk is stopped, its temporary file deleted. Each is a
``VideoError``: the file, not the moment, is at fault.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable, Iterator, Mapping

import av
import numpy as np

from vidagent.errors import OutputError, VideoError
from vidagent.video.video import Video, error_reason

log = logging.getLogger(__name__)

# what a browser plays, by FFmpeg's names: a demuxer's names (one of them), codecs' canonical names
BROWSER_CONTAINERS = frozenset({"mp4", "mov", "webm", "matroska", "ogg"})
BROWSER_VIDEO = {"h264": frozenset({"yuv420p", "yuvj420p"}), "vp8": None, "vp9": None, "av1": None}  # None: any pixels
BROWSER_AUDIO = frozenset({"aac", "mp3", "opus", "vorbis", "flac"})

MAX_SIDE = 1920  # a copy's longer side at most (a larger source is scaled down)
KEYFRAME_S = 2.0  # seconds between keyframes in a copy: a seek decodes at most this much first
MAX_DAMAGED = 0.05  # the share of a file's video packets that may be undecodable before it is refused
MAX_RATE = Fraction(120)  # a nominal frame rate above this (a bogus header) guides the encoder as this
MAX_SOURCE_PIXELS = 7680 * 4320  # 8K UHD: a larger picture is refused (its frames alone are hundreds of MB)
MAX_SOURCE_S = 12 * 3600.0  # a longer declared duration is refused (a bogus header, or a copy of hours of work)
MAX_STREAMS = 64  # more streams than a film with every dub and subtitle holds is refused
COPY_S_PER_SECOND = 4.0  # seconds of work a copy may take per second of video (x264 runs faster than real time)
MIN_COPY_S = 120.0  # ... and at least this (a short clip's copy starts the encoder and the muxer)
COPY_BYTES_PER_SECOND = 2 * 1024 * 1024  # bytes a copy may write per second of video (16 Mbit/s; CRF 23 1080p ~5)
MIN_COPY_BYTES = 64 * 1024 * 1024  # ... and at least this
MIN_FREE_BYTES = 1024 * 1024 * 1024  # a copy is not started, and stops, with less free disk than this
_CHECK_EVERY = 32  # frames between looks at the clock and the copy's size
Progress = Callable[[float], None]  # the share of the video made, 0 to 1


@dataclass(frozen=True)
class Playability:
    """Whether a browser plays a file as it is; ``reason`` says what it is, or which part of it does not play."""

    playable: bool
    reason: str


@dataclass(frozen=True)
class ProxyFormat:
    """How a copy is encoded: the picture's encoder and its options, the container, and the sound's encoders
    in order of preference (the first installed one is used)."""

    name: str
    video_codec: str
    container: str
    suffix: str
    media_type: str
    audio_codecs: tuple[str, ...]
    video_options: Mapping[str, str] = field(default_factory=dict)
    clock: Fraction = Fraction(1, 90000)  # the picture's time base

    def audio_codec(self) -> str | None:
        """The first of the format's sound encoders that is installed (None: the copy has no sound)."""
        return next((codec for codec in self.audio_codecs if encodable(codec)), None)


PROXY_FORMATS = (
    ProxyFormat("H.264 in MP4", "libx264", "mp4", ".mp4", "video/mp4", ("aac",),
                {"preset": "veryfast", "crf": "23"}),
    ProxyFormat("VP9 in WebM", "libvpx-vp9", "webm", ".webm", "video/webm", ("libopus", "libvorbis"),
                {"deadline": "realtime", "cpu-used": "8", "row-mt": "1", "crf": "33", "b": "0"}, Fraction(1, 1000)),
    ProxyFormat("VP8 in WebM", "libvpx", "webm", ".webm", "video/webm", ("libopus", "libvorbis"),
                {"deadline": "realtime", "cpu-used": "8", "b": "2M"}, Fraction(1, 1000)),
)
# short names for what a message names (FFmpeg's long names otherwise: "H.264 / AVC / MPEG-4 AVC / MPEG-4 part 10")
_CODEC_NAMES = {"h264": "H.264", "hevc": "HEVC (H.265)", "mpeg4": "MPEG-4 Part 2", "msmpeg4v3": "MS MPEG-4 v3",
                "msmpeg4v2": "MS MPEG-4 v2", "mpeg2video": "MPEG-2", "mpeg1video": "MPEG-1", "mjpeg": "Motion JPEG",
                "vp8": "VP8", "vp9": "VP9", "av1": "AV1", "theora": "Theora", "wmv3": "WMV 9", "aac": "AAC",
                "mp3": "MP3", "mp2": "MP2", "ac3": "AC-3", "eac3": "E-AC-3", "opus": "Opus", "vorbis": "Vorbis",
                "flac": "FLAC", "pcm_s16le": "PCM"}
_CONTAINER_NAMES = {"mov": "MP4/QuickTime", "matroska": "Matroska/WebM", "avi": "AVI", "mpeg": "MPEG program stream",
                    "mpegts": "MPEG transport stream", "asf": "ASF/WMV", "flv": "Flash video", "ogg": "Ogg"}
_AAC_RATES = (96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000)


def encodable(codec: str) -> bool:
    """Whether the installed FFmpeg has an encoder named ``codec``."""
    if codec not in av.codecs_available:
        return False
    try:
        av.Codec(codec, "w")
    except (av.error.FFmpegError, ValueError):
        return False
    return True


def proxy_format(formats: tuple[ProxyFormat, ...] = PROXY_FORMATS) -> ProxyFormat | None:
    """The first of ``formats`` whose picture encoder is installed; None when there is none."""
    return next((form for form in formats if encodable(form.video_codec)), None)


def playability(path: Path | str) -> Playability:
    """Whether a browser plays the file at ``path`` as it is (its container, its first video stream's codec and
    pixels, its first audio stream's codec); a ``VideoError`` when it cannot be read."""
    try:
        with av.open(str(path)) as container:
            names = container.format.name.split(",")
            if not container.streams.video:
                raise VideoError(f"{path}: no video stream")
            picture = container.streams.video[0].codec_context
            sound = container.streams.audio[0].codec_context if container.streams.audio else None
            return _judge(names, _CONTAINER_NAMES.get(names[0], container.format.long_name), picture, sound)
    except (av.error.FFmpegError, OSError) as error:
        raise VideoError(f"{path}: cannot read as a video ({error_reason(error)})") from error


def _judge(names: list[str], container_name: str, picture: av.CodecContext, sound: av.CodecContext | None) -> Playability:
    """What a browser makes of a file with these demuxer ``names``, picture and sound (None: no sound)."""
    video_codec, video_name = picture.codec.canonical_name, codec_name(picture.codec)
    described = f"{video_name} in {container_name}" + (f" with {codec_name(sound.codec)} sound" if sound else "")
    if not BROWSER_CONTAINERS.intersection(names):
        return Playability(False, f"{described}: web browsers do not open {container_name} files")
    if video_codec not in BROWSER_VIDEO:
        return Playability(False, f"{described}: web browsers do not play {video_name} video")
    pixels = BROWSER_VIDEO[video_codec]
    if pixels is not None and picture.pix_fmt not in pixels:
        return Playability(False, f"{described}: not every web browser plays {video_name} as {picture.pix_fmt}")
    if sound is not None and sound.codec.canonical_name not in BROWSER_AUDIO:
        return Playability(False, f"{described}: web browsers play it without its {codec_name(sound.codec)} sound")
    return Playability(True, described)


def codec_name(codec: av.Codec) -> str:
    """A codec's short name for people (``MPEG-4 Part 2``), FFmpeg's long name where none is set."""
    return _CODEC_NAMES.get(codec.canonical_name, codec.long_name)


def check_copyable(video: Video) -> None:
    """A ``VideoError`` when ``video``'s header asks for more work than a copy may take: a picture over
    ``MAX_SOURCE_PIXELS``, a duration over ``MAX_SOURCE_S``, more than ``MAX_STREAMS`` streams."""
    info = video.info
    if info.width * info.height > MAX_SOURCE_PIXELS:
        raise VideoError(f"{video.path}: its picture is {info.width} x {info.height}, larger than a playable copy is "
                         f"made of (at most {MAX_SOURCE_PIXELS:,} pixels, 7680 x 4320)")
    if info.duration_s > MAX_SOURCE_S:
        raise VideoError(f"{video.path}: it declares {info.duration_s / 3600:,.1f} hours, longer than a playable copy "
                         f"is made of (at most {MAX_SOURCE_S / 3600:g} hours)")
    try:
        with av.open(str(video.path)) as container:
            streams = len(container.streams)
    except (av.error.FFmpegError, OSError) as error:
        raise VideoError(f"{video.path}: cannot read as a video ({error_reason(error)})") from error
    if streams > MAX_STREAMS:
        raise VideoError(f"{video.path}: it holds {streams:,} streams, more than a playable copy is made of "
                         f"(at most {MAX_STREAMS})")


def copy_seconds(duration_s: float) -> float:
    """The most seconds of work a copy of a video of ``duration_s`` may take."""
    return max(MIN_COPY_S, COPY_S_PER_SECOND * duration_s)


def copy_bytes(duration_s: float) -> int:
    """The most bytes a copy of a video of ``duration_s`` may write."""
    return max(MIN_COPY_BYTES, int(COPY_BYTES_PER_SECOND * duration_s))


def make_proxy(video: Video, target: Path, form: ProxyFormat, *, progress: Progress | None = None,
               max_side: int = MAX_SIDE) -> Path:
    """A copy of ``video`` that browsers play, encoded as ``form``, at ``target`` (written under a temporary name
    first). A source that cannot be read, or asks for more work than a copy may take (``check_copyable``, and the
    caps checked while copying), is a ``VideoError``; a copy that cannot be written, an ``OutputError``."""
    target = Path(target)
    check_copyable(video)
    temporary = target.with_name(f".{target.stem}.{os.getpid()}-{secrets.token_hex(4)}.part{form.suffix}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if _free_bytes(target.parent) < MIN_FREE_BYTES:
            raise OSError(f"less than {MIN_FREE_BYTES // 2**20:,} MB of disk is free")
        _Transcoder(video, temporary, form, max_side).run(progress)
        os.replace(temporary, target)
    except (av.error.FFmpegError, OSError) as error:  # the source's own failures are VideoErrors by now
        raise OutputError(target, f"cannot write the playable copy ({error_reason(error)})") from error
    finally:
        with contextlib.suppress(OSError):  # where nothing could be written (no folder), there is nothing to delete
            temporary.unlink(missing_ok=True)
    return target


def output_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """``width`` x ``height`` scaled to fit ``max_side`` (never up), with even sides (at least 2) as 4:2:0 needs."""
    scale = min(1.0, max_side / max(width, height))
    return max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)


class _Transcoder:
    """One pass over the source: video and audio packets decoded as they come and encoded into the copy."""

    def __init__(self, video: Video, path: Path, form: ProxyFormat, max_side: int) -> None:
        self.video, self.path, self.form = video, path, form
        self.size = output_size(video.info.width, video.info.height, max_side)
        self.last_pts = -1
        self.frames = 0
        self.written = 0  # bytes of the packets muxed into the copy so far (the muxer writes them as it buffers)
        duration = max(video.info.duration_s, 0.0)
        self.max_frames = math.ceil(duration * MAX_RATE) + 2 * int(MAX_RATE)
        self.deadline = time.monotonic() + copy_seconds(duration)
        self.max_bytes = copy_bytes(duration)

    def run(self, progress: Progress | None) -> None:
        """Write the copy to ``path``, calling ``progress`` with the share made after each frame."""
        info = self.video.info
        try:
            source = av.open(str(self.video.path))
        except (av.error.FFmpegError, OSError) as error:
            raise VideoError(f"{self.video.path}: cannot read as a video ({error_reason(error)})") from error
        with source, self._open_sink() as sink:
            picture_in = source.streams.video[0]
            picture_in.thread_type = "AUTO"
            picture = self._picture_stream(sink, picture_in)
            sound_in = source.streams.audio[0] if source.streams.audio else None
            sound = self._sound_stream(sink, sound_in) if sound_in is not None else None
            packets = damaged = 0
            problem = ""
            wanted = [picture_in] + ([sound_in] if sound is not None else [])
            for packet in self._demuxed(source, wanted):
                is_picture = packet.stream.index == picture_in.index
                packets += is_picture and packet.size > 0  # the flushing packets at the end hold no data
                try:
                    frames = packet.decode()
                except av.error.FFmpegError as error:
                    damaged += is_picture
                    problem = error_reason(error)
                    continue
                for frame in frames:
                    if is_picture:
                        self._within_caps(frame)
                        self._encode_picture(sink, picture, frame)
                        if progress is not None and frame.time is not None and info.duration_s > 0:
                            progress(min(1.0, max(0.0, frame.time / info.duration_s)))
                    elif sound is not None:
                        self._encode_sound(sink, sound, frame)
            _check_damage(info.path, packets, damaged, self.frames)
            if damaged:
                log.warning("%s: %d of %d video packets cannot be decoded (%s); the playable copy skips them",
                            info.path, damaged, packets, problem)
            sink.mux(picture.encode(None))
            if sound is not None:
                sink.mux(sound.encode(None))
        if progress is not None:
            progress(1.0)

    def _within_caps(self, frame: av.VideoFrame) -> None:
        """A ``VideoError`` (the copy stops) for a frame over the pixel cap, a frame past the most the duration
        allows, and, every ``_CHECK_EVERY`` frames, a copy past its time or size, or a disk nearly full."""
        path = self.video.path
        if frame.width * frame.height > MAX_SOURCE_PIXELS:
            raise VideoError(f"{path}: a frame of {frame.width} x {frame.height}, larger than a playable copy is "
                             f"made of (at most {MAX_SOURCE_PIXELS:,} pixels)")
        if self.frames >= self.max_frames:
            raise VideoError(f"{path}: more frames than its {self.video.info.duration_s:g} s hold at "
                             f"{float(MAX_RATE):g} frames a second; the copy was stopped")
        if self.frames % _CHECK_EVERY:
            return
        if time.monotonic() > self.deadline:
            raise VideoError(f"{path}: its copy took more than {copy_seconds(self.video.info.duration_s):,.0f} s "
                             f"(at {self.frames:,} frames) and was stopped")
        if self.written > self.max_bytes:
            raise VideoError(f"{path}: its copy grew past {self.max_bytes:,} bytes and was stopped")
        if _free_bytes(self.path.parent) < MIN_FREE_BYTES:
            raise OSError(f"less than {MIN_FREE_BYTES // 2**20:,} MB of disk is free")

    def _open_sink(self) -> av.container.OutputContainer:
        options = {"movflags": "+faststart"} if self.form.container == "mp4" else {}
        return av.open(str(self.path), "w", format=self.form.container, options=options)

    def _demuxed(self, source: av.container.InputContainer, streams: list[av.stream.Stream]) -> Iterator[av.Packet]:
        """The source's packets; a demuxer that fails midway is a ``VideoError`` (the file is damaged)."""
        try:
            yield from source.demux(streams)
        except av.error.FFmpegError as error:
            raise VideoError(f"{self.video.path}: the video data is damaged ({error_reason(error)})") from error

    def _picture_stream(self, sink: av.container.OutputContainer, source: av.VideoStream) -> av.VideoStream:
        """The copy's picture stream: the copy's size, 4:2:0, the format's clock, a keyframe every ``KEYFRAME_S``."""
        rate = Fraction(source.average_rate or source.guessed_rate or 25)
        rate = min(rate, MAX_RATE) if rate > 0 else Fraction(25)
        stream = sink.add_stream(self.form.video_codec, rate=rate, options=dict(self.form.video_options))
        stream.width, stream.height = self.size
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = self.form.clock
        stream.codec_context.gop_size = max(1, round(KEYFRAME_S * rate))
        return stream

    def _sound_stream(self, sink: av.container.OutputContainer, source: av.AudioStream) -> av.AudioStream | None:
        """The copy's sound stream, or None (no encoder for this format, or a soundtrack it cannot take)."""
        codec = self.form.audio_codec()
        if codec is None:
            log.info("%s: no %s sound encoder installed; the playable copy has no sound", self.video.path,
                     "/".join(self.form.audio_codecs))
            return None
        rate = int(source.rate or 48000)
        if codec == "aac":
            rate = rate if rate in _AAC_RATES else 48000
        elif codec == "libopus":
            rate = 48000
        try:
            stream = sink.add_stream(codec, rate=rate)
            stream.layout = "mono" if source.channels == 1 else "stereo"  # more channels are mixed down
        except (av.error.FFmpegError, ValueError) as error:
            log.warning("%s: the playable copy has no sound (%s)", self.video.path, error_reason(error))
            return None
        return stream

    def _encode_picture(self, sink: av.container.OutputContainer, stream: av.VideoStream, frame: av.VideoFrame) -> None:
        """``frame`` upright, at the copy's size and pixels, at its source time on the copy's clock (never at
        or before the frame written last)."""
        if frame.time is None or frame.time < 0:
            return
        pts = max(self.last_pts + 1, round(Fraction(frame.time) / self.form.clock))
        rotation = self.video.info.rotation
        if rotation:  # display rotation is counter-clockwise in degrees; np.rot90 turns counter-clockwise
            upright = np.ascontiguousarray(np.rot90(frame.to_ndarray(format="rgb24"), k=rotation // 90))
            frame = av.VideoFrame.from_ndarray(upright, format="rgb24")
        out = frame.reformat(width=self.size[0], height=self.size[1], format="yuv420p")
        out.pts, out.time_base = pts, self.form.clock
        out.pict_type = av.video.frame.PictureType.NONE  # the encoder places the keyframes
        self._mux(sink, stream.encode(out))
        self.last_pts = pts
        self.frames += 1

    def _encode_sound(self, sink: av.container.OutputContainer, stream: av.AudioStream, frame: av.AudioFrame) -> None:
        """``frame`` at its source time (the encoder resamples it); sound before time 0 is left out."""
        if frame.time is None or frame.time < 0 or not frame.sample_rate:
            return
        frame.pts, frame.time_base = round(frame.time * frame.sample_rate), Fraction(1, frame.sample_rate)
        self._mux(sink, stream.encode(frame))

    def _mux(self, sink: av.container.OutputContainer, packets: list[av.Packet]) -> None:
        self.written += sum(packet.size for packet in packets)
        sink.mux(packets)


def _free_bytes(folder: Path) -> int:
    """The disk space free to this user under ``folder``."""
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


def _check_damage(path: str, packets: int, damaged: int, frames: int) -> None:
    """A ``VideoError`` when no frame could be decoded, or more than ``MAX_DAMAGED`` of the packets could not."""
    if frames == 0 or damaged > max(1, math.floor(MAX_DAMAGED * packets)):
        raise VideoError(f"{path}: the video data is damaged: {damaged} of its {packets} video packets cannot be "
                         f"decoded{'' if frames else ', and no frame can'}")
