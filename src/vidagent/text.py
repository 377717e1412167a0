"""Answers folded for comparing them: the one place answer text is normalised (ground: every layer
may use it, and it uses nothing).

Two strengths are in use, and each caller keeps the one it had, because they group differently:
``fold`` ("Brown " and "brown" are one answer) for votes among answers and matching an answer to its
option; ``normalise_answer`` ("The red car." and "red car" are one answer) for scoring open-ended
answers and matching a reply to an option's words.
"""

from __future__ import annotations

import re

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def fold(text: str) -> str:
    """Lower case, each run of white space one space, none at the ends."""
    return " ".join(text.lower().split())


def normalise_answer(text: str) -> str:
    """Folded, and punctuation and the articles a, an, the gone."""
    text = re.sub(r"[^\w\s]", " ", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty").split()
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)


def numerals(text: str) -> str:
    """``text`` with the number words zero to twenty written as digits ("three people" -> "3 people"), so a
    count written either way reads as one."""
    return _NUMBER_WORD.sub(lambda match: str(_NUMBER_WORDS.index(match.group(1).lower())), text)
