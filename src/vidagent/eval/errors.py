"""Errors of the evaluation harness (``VidagentError`` subclasses, printed by the CLI as one line)."""

from __future__ import annotations

from vidagent.errors import VidagentError


class DatasetError(VidagentError):
    """An annotation file is missing, of an unknown format, or malformed."""

    exit_code = 2


class EvalError(VidagentError):
    """An evaluation run cannot start or continue (unknown planner, bad output folder, worker crash)."""

    exit_code = 6
