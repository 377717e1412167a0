"""What a server is started with: where videos may come from, upload limits, the token, the address."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from vidagent.config import Settings
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


@dataclass(frozen=True)
class ServeConfig:
    """``video_dirs``: the folders whose videos may be registered by path (uploads go to ``upload_dir``,
    default ``<home>/uploads``). ``token``: the bearer token every API request must carry (required
    when ``host`` is not a loopback address). ``max_queued``: jobs the model lane holds (running and waiting)
    before a new question is refused as busy (503), so a crowd of clients cannot grow the queue without end.
    ``max_edit_seconds``: the most video one edit route (``/api/videos/{id}/edits/...``) covers (longer is 422
    ``EditTooLongError``); ``max_edits``: the edits made at once (one more is 429 ``TooManyEditsError``)."""

    settings: Settings = field(default_factory=Settings.from_env)
    video_dirs: tuple[Path, ...] = ()
    upload_dir: Path | None = None
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    max_clip_seconds: float = DEFAULT_MAX_CLIP_SECONDS
    max_queued: int = DEFAULT_MAX_QUEUED
    max_edit_seconds: float = DEFAULT_MAX_EDIT_SECONDS
    max_edits: int = DEFAULT_MAX_EDITS
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

    def check_binding(self) -> None:
        """Refuse to listen beyond loopback without a token: anyone who can reach the port could
        otherwise read the registered videos and spend the machine's time."""
        if self.token is not None and len(self.token) < 8:
            raise ServeSetupError("the token is too short: use at least 8 characters (e.g. `openssl rand -hex 16`)")
        if not is_loopback(self.host) and not self.token:
            raise ServeSetupError(
                f"refusing to listen on {self.host} without a token: anyone on the network could use the server. "
                f"Give --token TOKEN (or set {TOKEN_ENV}); clients send it as 'Authorization: Bearer TOKEN'")


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1); any other name counts as beyond loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
