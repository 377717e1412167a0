"""A corpus of hostile and unusual media files, generated small and fast with PyAV and PIL.

``build_corpus(folder)`` writes every file and returns ``MediaCase``s: the file and what opening
and indexing it must give, either an error (a one-line ``VideoError`` whose message holds
``error``) or a memory with ``segments`` segments (and the displayed ``size``, and ``audio``).
Generated pictures are frames of moving coloured bars (no real content is needed: the stages
must get through the file, not understand it).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Sequence

import av
import numpy as np
from PIL import Image

from conftest import set_mp4_rotation

SIZE = (160, 120)


@dataclass(frozen=True)
class MediaCase:
    name: str
    path: Path
    error: str = ""  # expected in the one-line error; empty: the file must index
    segments: int = 0
    size: tuple[int, int] | None = None  # displayed width, height
    audio: bool = False


def bars(count: int, size: tuple[int, int] = SIZE) -> list[np.ndarray]:
    """``count`` frames of coloured bars that move a little each frame."""
    width, height = size
    x = np.arange(width)[None, :, None]
    out = []
    for i in range(count):
        base = ((x + 7 * i) // max(1, width // 8)) % 8
        frame = np.broadcast_to(base * np.array([31, 67, 101]) % 256, (height, width, 3)).astype(np.uint8)
        out.append(np.ascontiguousarray(frame))
    return out


def encode(path: Path, frames: Sequence[np.ndarray], *, fps: int = 10, container: str | None = None,
           options: dict[str, str] | None = None, times_ms: Sequence[int] | None = None,
           audio_tracks: int = 0, audio_seconds: float | None = None, video_stream: bool = True) -> Path:
    """Encode frames as H.264 without B-frames (MPEG-4 where libx264 is missing); ``times_ms`` gives
    each frame's own presentation time (variable frame rate); ``audio_tracks`` adds that many tones;
    ``video_stream`` False leaves the video stream out (with no frames, the stream is there, empty)."""
    codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
    with av.open(str(path), "w", format=container, options=options or {}) as output:
        video = None
        if video_stream:
            video = output.add_stream(codec, rate=fps)
            video.height, video.width = frames[0].shape[:2] if frames else SIZE[::-1]
            video.pix_fmt = "yuv420p"
            video.codec_context.options = {"bf": "0"}
            if times_ms is not None:
                video.codec_context.time_base = Fraction(1, 1000)
        audio = [output.add_stream("aac", rate=16000) for _ in range(audio_tracks)]
        for index, image in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            if times_ms is not None:
                frame.pts, frame.time_base = times_ms[index], Fraction(1, 1000)
            for packet in video.encode(frame):  # type: ignore[union-attr]
                output.mux(packet)
        if video is not None:
            for packet in video.encode():
                output.mux(packet)
        seconds = audio_seconds if audio_seconds is not None else len(frames) / fps
        for track, stream in enumerate(audio):
            t = np.arange(int(16000 * seconds)) / 16000
            tone = av.AudioFrame.from_ndarray((0.2 * np.sin(2 * np.pi * (300 + 150 * track) * t))
                                              .astype(np.float32)[None, :], format="flt", layout="mono")
            tone.sample_rate = 16000
            for packet in [*stream.encode(tone), *stream.encode()]:
                output.mux(packet)
    return path


def _cut(source: Path, target: Path, fraction: float) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: int(len(data) * fraction)])
    return target


def _garble(source: Path, target: Path, at: float, length: int) -> Path:
    data = bytearray(source.read_bytes())
    start = int(len(data) * at)
    data[start : start + length] = np.random.default_rng(0).integers(0, 256, length, dtype=np.uint8).tobytes()
    target.write_bytes(bytes(data))
    return target


def build_corpus(folder: Path) -> list[MediaCase]:
    """Write the corpus into ``folder``; the cases in a fixed order."""
    folder.mkdir(parents=True, exist_ok=True)
    plain = encode(folder / "plain.mp4", bars(30))  # 3 s; the index (moov) at the end
    faststart = encode(folder / "faststart.mp4", bars(30), options={"movflags": "+faststart"})
    still = folder / "still_png.mp4"
    Image.fromarray(bars(1)[0]).save(still, format="PNG")
    jpeg = folder / "still_jpeg.mp4"
    Image.fromarray(bars(1)[0]).save(jpeg, format="JPEG")
    rotated = encode(folder / "rotated.mp4", bars(20, (160, 96)))
    set_mp4_rotation(rotated, 1)
    return [
        MediaCase("plain", plain, segments=1, size=SIZE),
        MediaCase("truncated_at_10pc", _cut(plain, folder / "cut10.mp4", 0.1), error="cannot read as a video"),
        MediaCase("truncated_at_50pc", _cut(plain, folder / "cut50.mp4", 0.5), error="cannot read as a video"),
        MediaCase("truncated_at_90pc", _cut(plain, folder / "cut90.mp4", 0.9), error="cannot read as a video"),
        # with its index first, a file cut in its frames still opens, but its data ends before the duration its
        # header gives: refused (indexing it whole repeats the last readable frame; issue 27, item 4)
        MediaCase("faststart_truncated_at_60pc", _cut(faststart, folder / "fast_cut60.mp4", 0.6),
                  error="the file is cut short: its video data ends at"),
        MediaCase("corrupt_packets_mp4", _garble(faststart, folder / "garbled.mp4", 0.5, 400),
                  error="corrupt video data"),
        # garbled clusters end the demuxer's reading half-way: what can be read stops before the header's duration
        MediaCase("corrupt_packets_mkv", _garble(encode(folder / "plain.mkv", bars(30), container="matroska"),
                                                  folder / "garbled.mkv", 0.5, 300),
                  error="its video data ends at"),
        MediaCase("wrong_extension", _renamed(plain, folder / "really_mp4.avi"), segments=1, size=SIZE),
        MediaCase("no_extension", _renamed(plain, folder / "clip"), segments=1, size=SIZE),
        MediaCase("no_video_stream", encode(folder / "tone.mp4", [], audio_tracks=1, audio_seconds=1.0,
                                            video_stream=False), error="no video stream"),
        MediaCase("zero_frames", encode(folder / "empty_video.mkv", [], container="matroska", audio_tracks=1,
                                        audio_seconds=1.0), error="holds no decodable frame"),
        MediaCase("variable_frame_rate", encode(folder / "vfr.mp4", bars(10), times_ms=[0, 100, 150, 900, 1000,
                                                                                        1900, 2000, 2050, 3900, 4000]),
                  segments=2, size=SIZE),
        MediaCase("rotated", rotated, segments=1, size=(96, 160)),
        MediaCase("4k", encode(folder / "uhd.mp4", bars(3, (3840, 2160)), fps=2), segments=1, size=(3840, 2160)),
        MediaCase("still_png_renamed_mp4", still, error="zero length"),
        MediaCase("still_jpeg_renamed_mp4", jpeg, error="zero length"),
        MediaCase("mkv_three_audio_tracks", encode(folder / "tracks.mkv", bars(25), container="matroska",
                                                    audio_tracks=3), segments=1, size=SIZE, audio=True),
    ]


def long_video(path: Path, hours: float) -> Path:
    """A very long video made cheap: one small frame every ten seconds."""
    count = int(hours * 360)
    return encode(path, bars(count, (64, 48)), times_ms=[i * 10_000 for i in range(count)], fps=1)


def _renamed(source: Path, target: Path) -> Path:
    target.write_bytes(source.read_bytes())
    return target
