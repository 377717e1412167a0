"""What a question is about: its sources (videos, images, and the clips and crops cut from them).

A ``Source`` is plain data with an id that evidence and artifacts refer to. A user's video or
image is identified by its content hash; a clip or crop by its parent's id and where it was cut,
so cutting the same clip twice gives the same source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

SourceKind = Literal["video", "image", "clip", "crop"]
SOURCE_KINDS: tuple[SourceKind, ...] = ("video", "image", "clip", "crop")


@dataclass(frozen=True)
class Source:
    """One input. A clip is a ``window`` (seconds) of its ``parent`` video; a crop is a ``box``
    (x1, y1, x2, y2 in pixels) of its parent image, or of its parent video's frame at ``window[0]``."""

    id: str
    kind: SourceKind = "video"
    path: str = ""
    parent: str | None = None
    window: tuple[float, float] | None = None
    box: tuple[float, float, float, float] | None = None

    @property
    def is_moving(self) -> bool:
        """A video or a clip (has a duration), as opposed to an image or a crop."""
        return self.kind in ("video", "clip")

    def clip(self, start_s: float, end_s: float) -> "Source":
        """A clip of this video or clip, ``start_s``-``end_s`` in the original video's seconds."""
        start, end = round(float(start_s), 2), round(float(end_s), 2)
        return Source(f"{self.root}@{start:g}-{end:g}s", "clip", self.path, self.id, (start, end))

    def crop(self, box: tuple[float, float, float, float], time_s: float | None = None) -> "Source":
        """A crop of this image or crop (``box`` in its pixels), or of this video's frame at ``time_s``."""
        x1, y1, x2, y2 = (round(float(v)) for v in box)
        corners = (float(x1), float(y1), float(x2), float(y2))
        if self.is_moving:
            if time_s is None:
                raise ValueError("a crop of a video needs the time of its frame")
            at = round(float(time_s), 2)
            return Source(f"{self.root}@{at:g}s[{x1},{y1},{x2},{y2}]", "crop", self.path, self.id, (at, at), corners)
        return Source(f"{self.id}[{x1},{y1},{x2},{y2}]", "crop", self.path, self.id, self.window, corners)

    @property
    def root(self) -> str:
        """The id of the user's video or image this source was cut from."""
        return self.id.split("@")[0].split("[")[0]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "path": self.path, "parent": self.parent,
                "window": list(self.window) if self.window else None, "box": list(self.box) if self.box else None}
