"""Known watermark words: an OCR reading a few letters off a stock vendor's name is read as that name.

Watermarks on stock and web video are the vendors' names drawn as stylised, semi-transparent logos,
which the recogniser reads a letter or three wrong (on the shared clips PP-OCRv5 read the
"shutterstock" logo as "snutterstcck", "snuterstcck", "shutterstck"). The names come from a short list
(``data/overlay_words.txt``), so a single word of at least ``MIN_LENGTH`` letters whose edit distance
to one of them is at most a quarter of that name's length (and smaller than to any other name) is
taken to be that name. Shorter words and readings with spaces are left as read: too many real words lie
that close to a short name.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

MIN_LENGTH = 6
"""Shortest reading (letters and digits) that is compared with the list."""

MAX_DISTANCE_SHARE = 0.25
"""Most edits, as a share of the vendor name's length, for a reading to be taken as that name."""


def known_overlay_word(text: str) -> str:
    """``text``, or the watermark word it is a near misreading of (lower case, as the vendor writes it)."""
    reading = "".join(ch for ch in text.lower() if ch.isalnum())
    if len(reading) < MIN_LENGTH or " " in text.strip():
        return text
    best: tuple[int, str] | None = None
    for word in overlay_words():
        limit = int(MAX_DISTANCE_SHARE * len(word))
        if abs(len(word) - len(reading)) > limit:
            continue
        distance = edit_distance(reading, word)
        if distance <= limit and (best is None or distance < best[0]):
            best = (distance, word)
    if best is None or best[0] == 0:
        return text  # unknown, or already the word (kept as written)
    return best[1]


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between ``a`` and ``b`` (insertions, deletions, substitutions)."""
    previous = list(range(len(b) + 1))
    for i, left in enumerate(a, 1):
        current = [i]
        for j, right in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (left != right)))
        previous = current
    return previous[-1]


@lru_cache(maxsize=1)
def overlay_words() -> tuple[str, ...]:
    """The watermark words of ``data/overlay_words.txt`` (comments and blank lines skipped)."""
    text = resources.files("vidagent.perception").joinpath("data/overlay_words.txt").read_text(encoding="utf-8")
    return tuple(line.strip().lower() for line in text.splitlines() if line.strip() and not line.startswith("#"))
