"""Caps on an answer's confidence where what it rests on cannot support a high one, and the threshold under which
it abstains (issue 51).

An answer's confidence is what its planner measured (an option's likelihood, a share of votes, the check's option
probability). Whatever that number is, two states of the run bound it: an evidence check that re-read what the
answer cites and found no support, or no evidence to read (``UNSUPPORTED_CAP``; planners list evidence
differently, so an empty list alone says nothing), and a run its budget stopped before the planner finished
(``BUDGET_CAP``). Each cap is below an even chance, so none of these answers can read as likely right. Where the user sets a threshold
(``Settings.min_confidence``), an answer below it abstains, saying why, and keeps its best guess.
"""

from __future__ import annotations

UNSUPPORTED_CAP = 0.3
"""Highest confidence of an answer the evidence check found unsupported (verdict "unsupported" or "no evidence")."""

BUDGET_CAP = 0.4
"""Highest confidence of an answer its budget stopped the planner to give."""

def confidence_cap(*, check_failed: bool, budget_stopped: bool) -> tuple[float, str] | None:
    """The lowest cap the run's state puts on its answer's confidence, with the reason; None when nothing caps it."""
    caps = [(UNSUPPORTED_CAP, "the check found no support for it")] if check_failed else []
    if budget_stopped:
        caps.append((BUDGET_CAP, "its budget stopped the planner"))
    return min(caps) if caps else None


def below_threshold(confidence: float | None, threshold: float) -> str:
    """Why an answer of ``confidence`` abstains under ``threshold`` ("" when it does not: no threshold set, no
    confidence measured, or at or above it)."""
    if threshold <= 0 or confidence is None or confidence >= threshold:
        return ""
    return f"its confidence ({confidence:.0%}) is below the threshold set ({threshold:.0%})"
