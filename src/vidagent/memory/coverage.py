"""What part of a video a partial memory has looked at (``vidagent.memory.glance``): one frame every
``every_s`` seconds over the whole video, the windows described at the full rate, and whether the
speech is transcribed. Kept in the config of the partial stages it describes, so it is stored with
them, and said with every answer read from them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

Window = tuple[float, float]
# A glance describes one frame every this many seconds. On the 20-minute bench video (2 shared cores) the first
# answer took 97 CPU s at 20 s and 166 CPU s at 10 s, against 946 CPU s to index first: the 376 s that took
# idle scales to ~40 s at 20 s, within the minute, and ~65 s at 10 s (README, Ask while indexing).
DEFAULT_EVERY_S = 20.0


def glance_every(requested: float | None, duration_s: float, after_s: float, *, looks: int | None = None) -> float:
    """The seconds between a glance's frames for a video of ``duration_s`` (0: no glance, index it whole).
    ``requested``: the caller's choice (0 asks the full way); None is the default, a glance every
    ``DEFAULT_EVERY_S`` seconds for a video of at least ``after_s`` seconds (``after_s`` 0: never by default),
    or, where the question's reader reads at most ``looks`` lines spread evenly over the video, every
    ``duration_s / looks`` seconds if that is longer: one frame for each stretch it reads, none it would not read."""
    if requested is not None:
        return max(0.0, float(requested))
    if after_s <= 0 or duration_s < after_s:
        return 0.0
    return max(DEFAULT_EVERY_S, duration_s / looks) if looks else DEFAULT_EVERY_S


@dataclass(frozen=True)
class Coverage:
    """A partial memory's coverage; ``full`` holds disjoint windows, in order."""

    duration_s: float
    every_s: float
    full: tuple[Window, ...] = ()
    speech: bool = False
    refined: tuple[Window, ...] = field(default=(), compare=False)  # refined for the question being answered

    def with_full(self, window: Window) -> "Coverage":
        """This coverage with ``window`` described at the full rate too (joined with what it touches)."""
        return replace(self, full=merge_windows([*self.full, window]))

    def missing(self, window: Window) -> list[Window]:
        """The parts of ``window`` not yet described at the full rate."""
        start, end = window
        parts: list[Window] = []
        for first, last in self.full:
            if last <= start or first >= end:
                continue
            if first > start:
                parts.append((start, first))
            start = max(start, last)
        if start < end:
            parts.append((start, end))
        return [(a, b) for a, b in parts if b - a > 1e-6]

    @property
    def complete(self) -> bool:
        """Whether every second is described at the full rate (the speech aside)."""
        return not self.missing((0.0, self.duration_s))

    @property
    def interval_text(self) -> str:
        """The interval between the frames looked at, as said to a user: ``10 s``, ``52.6 s`` (of a video glanced
        at 5 frames), ``240 s``."""
        return f"{self.every_s:.3g} s" if self.every_s < 100 else f"{self.every_s:.0f} s"

    def text(self) -> str:
        """How the answer saw the video, in one line: ``answered from 0:00-20:00 sampled every 10 s;
        3:10-3:40 in full; no speech yet``."""
        parts = [f"answered from 0:00-{clock(self.duration_s)} sampled every {self.interval_text}"]
        wide = [(a, b) for a, b in self.full if b - a >= self.every_s - 1e-6]  # the others: samples' segments
        if wide:
            parts.append(", ".join(f"{clock(a)}-{clock(b)}" for a, b in wide) + " in full")
        parts.append("speech transcribed" if self.speech else "no speech yet")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"duration_s": self.duration_s, "every_s": self.every_s,
                "full": [list(window) for window in self.full], "speech": self.speech}

    def report(self) -> dict[str, Any]:
        """What an answer says of it: the coverage, its line and the windows refined for the question."""
        return self.to_dict() | {"text": self.text(), "refined": [list(window) for window in self.refined]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Coverage":
        return cls(float(data["duration_s"]), float(data["every_s"]),
                   tuple((float(a), float(b)) for a, b in data["full"]), bool(data["speech"]))


def merge_windows(windows: Sequence[Window]) -> tuple[Window, ...]:
    """Windows joined where they overlap or touch, in order."""
    merged: list[list[float]] = []
    for start, end in sorted(windows):
        if merged and start <= merged[-1][1] + 1e-6:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return tuple((round(a, 3), round(b, 3)) for a, b in merged)


def clock(seconds: float) -> str:
    """``190`` -> ``3:10``; an hour or more -> ``1:02:03``."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
