"""Errors of the evaluation harness (``VidagentError`` subclasses, printed by the CLI as one line)."""

from __future__ import annotations

from vidagent.errors import VidagentError


class DatasetError(VidagentError):
    """An annotation file is missing, of an unknown format, or malformed."""

    exit_code = 2


class EvalError(VidagentError):
    """An evaluation run cannot start or continue (bad output folder, worker crash)."""

    exit_code = 1


class EvalUsageError(EvalError):
    """The ``vidagent eval`` command line names no run it can do (no dataset, both a dataset and --compare)."""

    exit_code = 2
