"""A video known only through its memory: no file, no pixels, no audio.

Memories imported from a released caption set (``vidagent import``) have segments with caption text
and embeddings, but nothing to decode. ``StoredVideo`` stands where a ``Video`` stands for them: it
has an id (``egoschema:<q_uid>``), a duration and a description of where its captions came from,
and a request for frames is a ``NoPixelsError`` that says so (tools turn it into an error observation).
Nothing builds stages for it, so it has none of ``Video``'s decoding (segments, audio).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from vidagent.errors import MemoryStoreError
from vidagent.video.video import SampledFrame, VideoInfo

# A memory id with a namespace: "egoschema:0074f737-...", "nextqa:4010069381".
# Names keep to characters that need no quoting anywhere (SQL literals, file names, URLs).
MEMORY_ID = re.compile(r"^(?P<namespace>[a-z][a-z0-9_-]{0,31}):(?P<name>[A-Za-z0-9][A-Za-z0-9._~+=@-]{0,199})$")


def is_memory_id(text: str) -> bool:
    """Whether ``text`` has the shape of a namespaced memory id (``namespace:name``)."""
    return bool(MEMORY_ID.match(text))


def memory_id(namespace: str, name: str) -> str:
    """``namespace:name``, checked."""
    value = f"{namespace.rstrip(':')}:{name}"
    if not is_memory_id(value):
        raise MemoryStoreError(f"{value!r} is not a valid memory id (namespace: lower-case letters, digits, '_' or '-'; "
                               "name: letters, digits and . _ ~ + = @ -)")
    return value


class NoPixelsError(MemoryStoreError):
    """A tool asked for frames or audio of a memory that has none."""


@dataclass(frozen=True)
class CaptionProvenance:
    """Where an imported memory's captions came from."""

    captioner: str
    file: str
    sha256: str
    format: str
    note: str  # what the captions are, said once to planners (the memory note)


class StoredVideo:
    """A video whose memory lives in the library without a file (see the module's description)."""

    has_pixels = False

    def __init__(self, row: Mapping[str, Any], provenance: CaptionProvenance | None = None) -> None:
        self.content_hash = str(row["video_id"])
        self.provenance = provenance
        self.path = str(row["path"])
        self.info = VideoInfo(
            path=self.path, content_hash=self.content_hash, duration_s=float(row["duration_s"]),
            fps=float(row["fps"]), width=int(row["width"]), height=int(row["height"]), rotation=0,
            has_audio=False, codec=str(row["codec"]), container="none",
        )

    @property
    def duration_s(self) -> float:
        return self.info.duration_s

    def frames_at(self, times: Sequence[float], *, max_side: int | None = None, seek: bool = False,
                  one_thread: bool = False) -> Iterator[SampledFrame]:
        where = f" (captions by {self.provenance.captioner})" if self.provenance else ""
        raise NoPixelsError(f"{self.content_hash} is a memory without a video file{where}: it has no frames to look "
                            "at; read its captions instead")

    def __repr__(self) -> str:
        return f"StoredVideo({self.content_hash!r}, {self.duration_s:.1f} s)"
