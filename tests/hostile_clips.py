"""Videos made to cost a playable copy as much as possible, made with PyAV in the test in well under a second each
(issue 55): a VP9 keyframe followed by thousands of one-byte "show the frame again" packets (each a whole frame to
re-encode), a header whose duration is hours, a file of thousands of streams."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

SHOW_EXISTING_FRAME = b"\x88"  # a VP9 frame header: frame marker 2, profile 0, show_existing_frame 1, slot 0


def repeated_keyframe_clip(path: Path, *, size: tuple[int, int] = (1024, 1024), repeats: int = 20_000,
                           fps: int = 30, last_at_s: float | None = None) -> Path:
    """One VP9 keyframe of ``size`` then ``repeats`` one-byte packets that each show it again, in an MP4 named as
    any other: a few KB that decode to ``repeats`` full frames (the outside attack used 8192 x 8192). With
    ``last_at_s`` the last packet is placed that late, so the header declares that long a video."""
    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = size
    encoder = av.CodecContext.create("libvpx-vp9", "w")
    encoder.width, encoder.height, encoder.pix_fmt = width, height, "yuv420p"
    encoder.time_base = Fraction(1, fps)
    encoder.options = {"deadline": "realtime", "cpu-used": "8"}
    image = np.zeros((height, width, 3), np.uint8)
    frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuv420p")
    frame.pts = 0
    keyframe = b"".join(bytes(packet) for packet in [*encoder.encode(frame), *encoder.encode(None)])
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("vp9", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, fps)
        for index in range(repeats + 1):
            packet = av.Packet(keyframe if index == 0 else SHOW_EXISTING_FRAME)
            packet.pts = packet.dts = round(last_at_s * fps) if last_at_s and index == repeats else index
            packet.time_base = Fraction(1, fps)
            packet.stream = stream
            packet.is_keyframe = index == 0
            container.mux(packet)
    return path


def many_streams_clip(path: Path, *, streams: int = 2000) -> Path:
    """A short MPEG-4 clip in Matroska with ``streams`` silent sound streams beside its picture (this PyAV crashes
    writing a thousand)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="matroska") as container:
        picture = container.add_stream("mpeg4", rate=10)
        picture.width, picture.height, picture.pix_fmt = 64, 48, "yuv420p"
        for _ in range(streams):
            container.add_stream("pcm_s16le", rate=8000)
        for index in range(5):
            image = np.full((48, 64, 3), index * 40, np.uint8)
            container.mux(picture.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(picture.encode())
    return path


_ASS_HEADER = (b"[Script Info]\nScriptType: v4.00+\n\n[Events]\n"
               b"Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n")


def with_text_tracks(source: Path, path: Path, text: str) -> Path:
    """``source``'s pictures copied as they are into Matroska at ``path``, with ``text`` as the file's title and
    comment, its picture stream's title, and a subtitle (ASS) track that shows it for the first 4 s."""
    with av.open(str(source)) as given, av.open(str(path), "w", format="matroska") as container:
        container.metadata["title"] = container.metadata["comment"] = text
        picture_in = given.streams.video[0]
        picture = container.add_stream_from_template(picture_in)
        picture.metadata["title"] = text
        subtitles = container.add_stream("ass")
        subtitles.codec_context.subtitle_header = _ASS_HEADER
        line = av.Packet(f"0,0,Default,,0,0,0,,{text}".encode())
        line.pts = line.dts = 0
        line.duration, line.time_base, line.stream = 4000, Fraction(1, 1000), subtitles
        container.mux(line)
        for packet in given.demux(picture_in):
            if packet.dts is not None:
                packet.stream = picture
                container.mux(packet)
    return path
