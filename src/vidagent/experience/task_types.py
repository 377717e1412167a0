"""The task type of a question, by which procedural memory is kept: causal, temporal or descriptive
(NExT-QA's types, as in DigimonGPT). Cue phrases live in ``task_types.txt``."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

DESCRIPTIVE = "descriptive"


def task_type(question: str) -> str:
    """``causal``, ``temporal`` or ``descriptive``: the first type whose cue phrase the question holds."""
    text = " " + " ".join(re.findall(r"[a-z0-9']+", question.lower())) + " "
    for name, cues in _cues():
        if any(f" {cue} " in text for cue in cues):
            return name
    return DESCRIPTIVE


def task_types() -> tuple[str, ...]:
    return tuple(name for name, _ in _cues()) + (DESCRIPTIVE,)


@lru_cache(maxsize=1)
def _cues() -> tuple[tuple[str, tuple[str, ...]], ...]:
    text = resources.files("vidagent.experience").joinpath("task_types.txt").read_text(encoding="utf-8")
    rules = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, cues = line.partition(":")
        rules.append((name.strip(), tuple(" ".join(c.split()) for c in cues.split(",") if c.strip())))
    return tuple(rules)
