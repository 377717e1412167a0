"""Cutting the part of a video a question is about (STAR's start/end, TVQA's ``ts``) into a file.

Clips are re-encoded (frame-accurate, unlike a keyframe-aligned stream copy), with the soundtrack
as 16 kHz mono AAC, and kept in a cache folder keyed by source name, size and window, so a clip is
cut once and its memory is built once. A clip is written to a temporary name and renamed, so
parallel workers never read a half-written file.
"""

from __future__ import annotations

import hashlib
import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from vidagent.errors import VideoError
from vidagent.video.video import Video

AUDIO_RATE = 16000


def clip_path(source: Path, start_s: float, end_s: float, folder: Path) -> Path:
    stat = source.stat()
    key = hashlib.sha256(f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:10]
    return folder / f"{source.stem}_{key}_{start_s:.2f}-{end_s:.2f}.mp4"


# Not video.editing.export_clip (an edit, the source's timing and sound kept): cached by window, 16 kHz mono sound.
def cut_clip(source: Path | str, start_s: float, end_s: float, folder: Path | str) -> Path:
    """The ``[start_s, end_s]`` part of ``source`` as an mp4 in ``folder`` (cut now or reused)."""
    source, folder = Path(source), Path(folder)
    video = Video(source)
    start_s = max(0.0, start_s)
    end_s = min(video.duration_s, end_s) if video.duration_s > 0 else end_s
    if end_s <= start_s:
        raise VideoError(f"{source}: the window {start_s:.2f}-{end_s:.2f} s holds no frames")
    target = clip_path(source, start_s, end_s, folder)
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.stem}.{os.getpid()}.part.mp4")
    try:
        _encode(video, start_s, end_s, temporary)
        os.replace(temporary, target)
    except (av.error.FFmpegError, OSError) as error:
        raise VideoError(f"{source}: cannot cut {start_s:.2f}-{end_s:.2f} s ({error})") from error
    finally:
        temporary.unlink(missing_ok=True)
    return target


def _encode(video: Video, start_s: float, end_s: float, target: Path) -> None:
    rotation = video.info.rotation
    samples = video.audio()
    part = samples[int(start_s * AUDIO_RATE): int(end_s * AUDIO_RATE)] if samples is not None else None
    written = 0
    with av.open(str(video.path)) as source, av.open(str(target), "w") as sink:
        in_stream = source.streams.video[0]
        rate = in_stream.average_rate or Fraction(25)
        codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
        out_stream = None
        audio_stream = None
        for frame in source.decode(in_stream):
            if frame.time is None or frame.time < start_s - 1e-6:
                continue
            if frame.time > end_s + 1e-6:
                break
            image = frame.to_ndarray(format="rgb24")
            if rotation:
                image = np.rot90(image, k=rotation // 90)
            height, width = image.shape[0] // 2 * 2, image.shape[1] // 2 * 2
            image = np.ascontiguousarray(image[:height, :width])
            if out_stream is None:  # every stream is added before the first packet is written
                out_stream = sink.add_stream(codec, rate=rate)
                out_stream.width, out_stream.height, out_stream.pix_fmt = width, height, "yuv420p"
                audio_stream = sink.add_stream("aac", rate=AUDIO_RATE) if part is not None and part.size else None
            out = av.VideoFrame.from_ndarray(image, format="rgb24")
            out.pts = written
            out.time_base = Fraction(1) / rate
            for packet in out_stream.encode(out):
                sink.mux(packet)
            written += 1
        if out_stream is None:
            raise VideoError(f"{video.path}: the window {start_s:.2f}-{end_s:.2f} s holds no frames")
        for packet in out_stream.encode():
            sink.mux(packet)
        if audio_stream is not None and part is not None:
            audio = av.AudioFrame.from_ndarray(part.astype(np.float32)[None, :], format="flt", layout="mono")
            audio.sample_rate = AUDIO_RATE
            for packet in audio_stream.encode(audio):
                sink.mux(packet)
            for packet in audio_stream.encode():
                sink.mux(packet)
