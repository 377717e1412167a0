"""What a server is started with: where videos may come from, upload limits, the token, the address."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from vidagent.config import Settings
from vidagent.llm.budget import Budget
from vidagent.server.errors import ServeSetupError

TOKEN_ENV = "VIDAGENT_TOKEN"
DEFAULT_MAX_UPLOAD_BYTES = 2 << 30  # 2 GiB
DEFAULT_MAX_CLIP_SECONDS = 30.0
DEFAULT_MAX_QUEUED = 32  # questions and index builds waiting for the model lane, the running one included
# the longest stretch of video one edit route covers: an encode runs at about 0.5-1.7 s a second of 720p video on
# the 2-core development machine (README, utility tools), so 5 minutes of video is at most ~8 minutes of work
DEFAULT_MAX_EDIT_SECONDS = 300.0
# edits made at once (each in the edits' own threads, beside the model lane); x264 already spreads one encode over
# the cores, so more at once only share them; another edit meanwhile is refused (429)
DEFAULT_MAX_EDITS = 2
# the most one question may spend, whatever its client asks (a smaller budget of its own stays): a default question
# makes 1-20 model calls and takes seconds to a few minutes on a CPU (mcts n=2 about 20 calls; react and peil at most
# 8 steps), so these only stop a question that would hold the model lane for far longer (mcts n=64 max_depth=50)
DEFAULT_MAX_QUESTION_SECONDS = 900.0
DEFAULT_MAX_QUESTION_CALLS = 200
MIN_TOKEN_CHARS = 8


@dataclass(frozen=True)
class ServeConfig:
    """``video_dirs``: the folders whose videos may be registered by path (uploads go to ``upload_dir``,
    default ``<home>/uploads``). ``token``: the bearer token every API request must carry (required
    when ``host`` is not a loopback address). ``max_queued``: jobs the model lane holds (running and waiting)
    before a new question is refused as busy (503), so a crowd of clients cannot grow the queue without end.
    ``max_edit_seconds``: the most video one edit route (``/api/videos/{id}/edits/...``) covers (longer is 422
    ``EditTooLongError``); ``max_edits``: the edits made at once (one more is 429 ``TooManyEditsError``).
    ``max_question_seconds`` and ``max_question_calls``: the budget every question is held to, whichever face
    it came through (``question_cap``; None: no cap on that)."""

    settings: Settings = field(default_factory=Settings.from_env)
    video_dirs: tuple[Path, ...] = ()
    upload_dir: Path | None = None
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    max_clip_seconds: float = DEFAULT_MAX_CLIP_SECONDS
    max_queued: int = DEFAULT_MAX_QUEUED
    max_edit_seconds: float = DEFAULT_MAX_EDIT_SECONDS
    max_edits: int = DEFAULT_MAX_EDITS
    max_question_seconds: float | None = DEFAULT_MAX_QUESTION_SECONDS
    max_question_calls: int | None = DEFAULT_MAX_QUESTION_CALLS
    token: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000

    @property
    def uploads(self) -> Path:
        return self.upload_dir or self.settings.home / "uploads"

    @property
    def clips_dir(self) -> Path:
        return self.settings.home / "serve-clips"

    @property
    def proxies_dir(self) -> Path:
        """Where the copies of videos browsers do not play are kept (``server.proxies``), by content hash."""
        return self.settings.home / "playable"

    @property
    def question_cap(self) -> Budget | None:
        """The most one question may spend (``max_question_seconds``, ``max_question_calls``), or None for no cap."""
        if self.max_question_seconds is None and self.max_question_calls is None:
            return None
        return Budget(calls=self.max_question_calls, seconds=self.max_question_seconds)

    def check_binding(self) -> None:
        """Refuse to listen beyond loopback without a token: anyone who can reach the port could
        otherwise read the registered videos and spend the machine's time. A token given must be one."""
        if self.token is not None:
            check_token(self.token)
        if not is_loopback(self.host) and not self.token:
            raise ServeSetupError(
                f"refusing to listen on {self.host} without a token: anyone on the network could use the server. "
                f"Give --token TOKEN (or set {TOKEN_ENV}); clients send it as 'Authorization: Bearer TOKEN'")


def check_token(token: str) -> None:
    """Refuse a token that guards nothing: shorter than ``MIN_TOKEN_CHARS``, or holding spaces or control
    characters (a token of spaces would be matched by a cookie of spaces)."""
    if any(character.isspace() or not character.isprintable() for character in token):
        raise ServeSetupError("the token holds spaces or control characters: use letters, digits and punctuation "
                              "(e.g. `openssl rand -hex 16`)")
    if len(token) < MIN_TOKEN_CHARS:
        raise ServeSetupError(f"the token is too short: use at least {MIN_TOKEN_CHARS} characters "
                              "(e.g. `openssl rand -hex 16`)")


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1); any other name counts as beyond loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
