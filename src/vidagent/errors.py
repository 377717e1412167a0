"""The exceptions vidagent raises. Every user-facing failure is a ``VidagentError``.

The CLI prints ``str(error)`` on one line and exits non-zero; library users catch the
specific subclass they care about.
"""

from __future__ import annotations


class VidagentError(Exception):
    """Base class of every error vidagent raises on purpose."""

    exit_code: int = 1


class VideoError(VidagentError):
    """The input is missing, is not a video, or cannot be decoded."""

    exit_code = 2


class OutputError(VidagentError):
    """A file or folder vidagent makes cannot be written where it goes: no space left, no permission, or
    something else already under its name. ``path`` is where, ``problem`` what went wrong there (a face
    that must not show its paths, the server, answers with ``problem`` and logs ``path``)."""

    exit_code = 2

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = str(path), problem


class ModelUnavailableError(VidagentError):
    """A model's files are not installed, or a model backend cannot be loaded."""

    exit_code = 3


class LLMError(VidagentError):
    """The chat model failed: server down, timed out, or returned something unusable."""

    exit_code = 4


class MemoryStoreError(VidagentError):
    """The video memory database cannot be opened, built or queried."""

    exit_code = 5


class ToolInputError(VidagentError):
    """A tool was called with arguments it cannot use (reported back to the agent; from the command line, bad
    input: exit 2)."""

    exit_code = 2


class QueryRefusedError(VidagentError):
    """A SQL statement tried to do more than read (write, attach, load an extension, ...)."""

    exit_code = 6


class PlannerError(VidagentError):
    """An unknown planner, or a planner option it does not have or cannot use."""

    exit_code = 2


class PromptError(VidagentError):
    """A prompt file is malformed, or a template was rendered with a missing or an unused value."""


class KnowledgeError(VidagentError):
    """A knowledge source attached to a question cannot be read: a missing or unreadable file, a
    format vidagent does not read, a table without a header, a protected PDF, a file over the size
    limit, or a web search that is not configured or does not answer."""

    exit_code = 2
