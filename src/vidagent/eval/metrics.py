"""Scoring one prediction against the dev-set format (multiple choice, open-ended, localization)."""

from __future__ import annotations

import re
from typing import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def normalise_text(text: str) -> str:
    """Lower case, no punctuation or articles, single spaces."""
    text = re.sub(r"[^\w\s]", " ", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def open_ended_correct(prediction: str, answer: str, accept: Sequence[str] = ()) -> bool:
    """True when an accepted answer appears, as whole words, in the normalised prediction."""
    predicted = f" {normalise_text(prediction)} "
    for candidate in (answer, *accept):
        target = normalise_text(candidate)
        if target and f" {target} " in predicted:
            return True
    return False


def predicted_times(prediction: str) -> list[float]:
    """Numbers in an answer, read as seconds ("1.5 s", "between 2 and 3 seconds")."""
    return [float(x) for x in _NUMBER.findall(prediction)]


def localization_correct(prediction: str, span_s: Sequence[float], tolerance_s: float = 0.5) -> bool:
    """True when the predicted time (or the middle of a predicted range) falls in the span ± tolerance."""
    times = predicted_times(prediction)
    if not times:
        return False
    start, end = span_s
    guess = (times[0] + times[1]) / 2 if len(times) >= 2 and times[1] > times[0] else times[0]
    return start - tolerance_s <= guess <= end + tolerance_s
