"""What a library search returns: the lines it found (``SearchHit``) gathered into moments of videos (``Moment``).

A moment is a span of one video with every line the search found in it: lines that overlap or lie within
``MOMENT_GAP_S`` of each other make one moment, ranked by its best line. Its lines are shown with those found by a
category or by the query's words first (a search for "108" shows the sail number it read before the people beside
it), each group with what says most first (objects, on-screen text, speech, descriptions, then actions). Its spans
are when what the query names is there: the spans of its lines found by a category or by words (an object's where
it was seen), all of its lines' when none was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from vidagent.memory.search_lines import merged_spans

@dataclass(frozen=True)
class SearchHit:
    """One moment the search found: the video, the span, the line that matched and how it matched."""

    video_id: str
    path: str
    kind: str
    start_s: float
    end_s: float
    text: str
    category: str | None
    spans: tuple[tuple[float, float], ...]
    score: float  # the fused rank score (higher is better; comparable within one search)
    similarity: float  # cosine of the query and the line (0 when the vector ranking did not reach it)
    matched_by: tuple[str, ...]  # "category", "words", "meaning": the rankings that found it

    def to_dict(self) -> dict[str, object]:
        return {"video_id": self.video_id, "path": self.path, "kind": self.kind, "start_s": round(self.start_s, 2),
                "end_s": round(self.end_s, 2), "text": self.text, "category": self.category,
                "spans": [[round(a, 2), round(b, 2)] for a, b in self.spans], "score": round(self.score, 5),
                "similarity": round(self.similarity, 4), "matched_by": list(self.matched_by)}


MOMENT_GAP_S = 1.0  # lines of one video closer than this in time make one moment
_SHOWN_FIRST = ("object", "text", "speech", "segment", "action")


def _strong(line: SearchHit) -> bool:
    """Whether ``line`` was found by an object category or by the query's words, not by meaning alone."""
    return bool(set(line.matched_by) & {"category", "words"})


@dataclass(frozen=True)
class Moment:
    """A span of one video and the lines the search found in it (best first): what ``vidagent search`` lists."""

    video_id: str
    path: str
    start_s: float
    end_s: float
    lines: tuple[SearchHit, ...]  # found by category or words first, then what says most first (see the module)
    score: float  # its best line's fused score

    @property
    def strong(self) -> bool:
        """Found by an object category or by the query's words, not by meaning alone."""
        return any(_strong(line) for line in self.lines)

    @property
    def similarity(self) -> float:
        return max(line.similarity for line in self.lines)

    @property
    def matched_by(self) -> tuple[str, ...]:
        return tuple(name for name in ("category", "words", "meaning")
                     if any(name in line.matched_by for line in self.lines))

    def distinct_lines(self, count: int) -> tuple[SearchHit, ...]:
        """Its first ``count`` lines with different words (a text read at several times is listed once)."""
        seen: set[tuple[str, str]] = set()
        shown: list[SearchHit] = []
        for line in self.lines:
            if len(shown) == count:
                break
            if (line.kind, line.text) not in seen:
                seen.add((line.kind, line.text))
                shown.append(line)
        return tuple(shown)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(line.kind for line in self.lines))

    @property
    def spans(self) -> tuple[tuple[float, float], ...]:
        """When what the query names is there: the spans of its lines found by a category or words (all its lines
        when none was), an object's where it was seen."""
        strong = [line for line in self.lines if _strong(line)] or list(self.lines)
        return merged_spans([span for line in strong for span in (line.spans or ((line.start_s, line.end_s),))],
                            gap_s=MOMENT_GAP_S)

    def to_dict(self) -> dict[str, object]:
        return {"video_id": self.video_id, "path": self.path, "start_s": round(self.start_s, 2),
                "end_s": round(self.end_s, 2), "spans": [[round(a, 2), round(b, 2)] for a, b in self.spans],
                "kinds": list(self.kinds), "matched_by": list(self.matched_by), "score": round(self.score, 5),
                "similarity": round(self.similarity, 4), "lines": [line.to_dict() for line in self.lines]}


def moments(hits: Sequence[SearchHit], limit: int) -> list[Moment]:
    """``hits`` gathered into moments, best first: the lines of one video whose spans overlap or lie within
    ``MOMENT_GAP_S`` of each other make one moment, ranked by its best line."""
    by_video: dict[str, list[SearchHit]] = {}
    for hit in hits:
        by_video.setdefault(hit.video_id, []).append(hit)
    found: list[Moment] = []
    for lines in by_video.values():
        groups: list[list[SearchHit]] = []
        for hit in sorted(lines, key=lambda line: (line.start_s, line.end_s)):
            if groups and hit.start_s <= max(line.end_s for line in groups[-1]) + MOMENT_GAP_S:
                groups[-1].append(hit)
            else:
                groups.append([hit])
        for group in groups:
            best = max(group, key=lambda line: line.score)
            ranked = tuple(sorted(group, key=lambda line: (not _strong(line), _SHOWN_FIRST.index(line.kind),
                                                           -line.score)))
            found.append(Moment(best.video_id, best.path, min(line.start_s for line in group),
                                max(line.end_s for line in group), ranked, best.score))
    return sorted(found, key=lambda moment: -moment.score)[:limit]
