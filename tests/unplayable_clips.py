"""Clips browsers do not play, made with PyAV in the test (no shared data needed): MPEG-4 Part 2 pictures in MP4
(what ``example1.mp4`` is: Chromium gives "no supported streams", or beside AAC sound plays the sound alone), a
damaged one that opens (its first frame decodes) and cannot be decoded past it, and H.264 ones that play."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from media_corpus import bars

SIZE = (160, 120)
FPS = 10


def encoded_clip(path: Path, codec: str, *, seconds: float = 2.0, size: tuple[int, int] = SIZE, audio: bool = False,
                 shift: int = 0) -> Path:
    """``seconds`` of moving bars encoded with ``codec`` at ``FPS``, with a 440 Hz tone as AAC when ``audio``;
    ``shift`` moves the bars, so clips made alike differ in content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    frames = bars(int(seconds * FPS) + shift, size)[shift:]
    with av.open(str(path), "w") as container:
        picture = container.add_stream(codec, rate=FPS)
        picture.width, picture.height, picture.pix_fmt = size[0], size[1], "yuv420p"
        picture.codec_context.gop_size = 4 * FPS
        sound = container.add_stream("aac", rate=16000) if audio else None
        for image in frames:
            container.mux(picture.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(picture.encode())
        if sound is not None:
            t = np.arange(int(16000 * seconds)) / 16000
            tone = av.AudioFrame.from_ndarray((0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None, :],
                                              format="flt", layout="mono")
            tone.sample_rate = 16000
            container.mux([*sound.encode(tone), *sound.encode()])
    return path


def mpeg4_clip(path: Path, **options: object) -> Path:
    """MPEG-4 Part 2 pictures in MP4: a file Chromium shows no picture of."""
    return encoded_clip(path, "mpeg4", **options)  # type: ignore[arg-type]


def h264_clip(path: Path, **options: object) -> Path:
    """H.264 in MP4: a file browsers play as it is."""
    return encoded_clip(path, "libx264", **options)  # type: ignore[arg-type]


def damaged_clip(path: Path) -> Path:
    """An MPEG-4 Part 2 clip whose every video packet after the first is zeros: it opens (its first frame and its
    index are whole), and nothing after its first frame decodes."""
    mpeg4_clip(path)
    with av.open(str(path)) as container:
        places = [(packet.pos, packet.size) for packet in container.demux(container.streams.video[0]) if packet.size]
    data = bytearray(path.read_bytes())
    for position, size in places[1:]:
        data[position: position + size] = bytes(size)
    path.write_bytes(bytes(data))
    return path
