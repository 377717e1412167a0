"""Errors the server adds to vidagent's, and the HTTP status of every error a request can meet."""

from __future__ import annotations

from vidagent.errors import (KnowledgeError, LLMError, MemoryStoreError, ModelUnavailableError, PlannerError,
                             QueryRefusedError, VidagentError, VideoError)
from vidagent.memory.caption_formats import CaptionFormatError


class ServeSetupError(VidagentError):
    """The server cannot start as asked (an unsafe address without a token, a missing folder)."""

    exit_code = 2


class RequestError(VidagentError):
    """A request the server refuses (or fails in a way it can put in words: a 5xx subclass, whose message is
    shown as it is); ``status`` is its HTTP status (a subclass names its own default:
    ``class NotFoundError(RequestError, status=404)``, and one error may still give another)."""

    status = 400
    exit_code = 2

    def __init_subclass__(cls, status: int = 400, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.status = status

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class PathRefusedError(RequestError, status=403):
    """A path outside the folders the server was started with (or one that leads out of them)."""


class NotFoundError(RequestError, status=404):
    """An unknown video id or job id."""


class NoVideoFileError(RequestError, status=409):
    """A request for the file, a frame or a clip of a memory imported from captions (it has no video file),
    or to build such a memory from a video."""


class UploadError(RequestError, status=413):
    """An upload over the size limit (413), or one that is no video (415) or empty (400)."""


class NoPlayableCopyError(RequestError, status=422):
    """A video browsers do not play whose playable copy cannot be made: its data cannot be decoded (422), the
    server's FFmpeg encodes no format browsers play (501), or the copy cannot be written (500)."""


class CrossSiteError(RequestError, status=403):
    """A browser's request from another site (its ``Origin`` or ``Sec-Fetch-Site`` says so) to change something,
    make a file or call an MCP tool."""


class BusyError(RequestError, status=503):
    """The model lane already holds as many jobs as the server takes; the client may try again later."""


class EditTooLongError(RequestError, status=422):
    """An edit that would cover more of the video than the server's ``max_edit_seconds``."""


class TooManyEditsError(RequestError, status=429):
    """As many edits are being made as the server's ``max_edits``; the client may try again when one is done."""


class StorageError(RequestError, status=500):
    """The server cannot write a file it makes (an edit's output): the failure is the server's, its message says
    what went wrong without the server's paths, and the log says where."""


class AskCancelledError(Exception):
    """The client that asked went away; the question is stopped at its next step (not a
    ``VidagentError``, so no part of vidagent mistakes it for a failure to report and go on from)."""


_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (RequestError, 400),  # its own status wins (see status_of)
    (CaptionFormatError, 422),
    (KnowledgeError, 422),  # a knowledge file the server cannot read: a table without a header, a locked PDF
    (QueryRefusedError, 403),
    (PlannerError, 400),
    (VideoError, 422),
    (MemoryStoreError, 409),
    (ModelUnavailableError, 503),
    (LLMError, 502),
    (ValueError, 400),
)


# the name a client sees for an error whose class name says little: one name for a refused request,
# whether FastAPI's validation or the service refused it
PUBLIC_NAMES = {"RequestError": "InvalidRequest", "ValueError": "InvalidRequest", "CrossSiteError": "CrossSiteRequest"}


def status_of(error: BaseException) -> int:
    """The HTTP status for an error raised while serving a request (500 for a bug)."""
    if isinstance(error, RequestError):
        return error.status
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 500


def error_body(error: BaseException) -> dict[str, object]:
    """The JSON body of an error response: what kind, what happened, and the status."""
    status = status_of(error)
    unforeseen = status == 500 and not isinstance(error, RequestError)  # a bug: its text may hold anything
    kind = type(error).__name__ if not unforeseen else "InternalError"
    kind = PUBLIC_NAMES.get(kind, kind)
    message = str(error) if not unforeseen else f"internal error ({type(error).__name__}); see the server log"
    return {"error": kind, "message": message, "status": status}
