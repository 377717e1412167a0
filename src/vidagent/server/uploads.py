"""Uploaded videos: streamed to disk under a size limit, checked to be a video, kept under the user's name.

Bytes go to a temporary file first; a body over the limit, a client that goes away mid-upload or a file
that is no video leaves nothing behind. A kept upload is ``<content hash>/<the file's name>``: the page
and the API list it by the name the user gave, and the same video uploaded twice is one file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from pathlib import Path
from typing import AsyncIterator

from vidagent.server.errors import UploadError
from vidagent.video.video import VIDEO_SUFFIXES

UPLOAD_SUFFIXES = VIDEO_SUFFIXES + (".ogv", ".gif")


MAX_NAME_CHARS = 120
MAX_NAME_BYTES = 200  # in UTF-8: file systems hold 255 bytes a name, and 120 letters of some scripts are 360
MAX_GIVEN_NAME_CHARS = 1024  # the longest ?filename= taken (then shortened); a longer one is refused (422)


def upload_name(filename: str | None) -> str:
    """The name an upload is kept under: the file's own name (no folders; characters a file system or a
    shell may trip on replaced), its suffix a video's, shortened to ``MAX_NAME_CHARS`` characters and
    ``MAX_NAME_BYTES`` bytes; a name that is no video's is refused (415)."""
    name = Path((filename or "upload.mp4").replace("\\", "/")).name
    suffix = Path(name).suffix.lower()
    if suffix not in UPLOAD_SUFFIXES:
        shown = filename if len(filename or "") <= 80 else f"{(filename or '')[:77]}..."
        raise UploadError(f"{shown}: not a video file name (use one of {', '.join(UPLOAD_SUFFIXES)})", status=415)
    stem = re.sub(r"[^\w.\- ()+,]", "_", Path(name).stem).strip(" .") or "upload"
    stem = stem[: MAX_NAME_CHARS - len(suffix)]
    while len(stem.encode()) > MAX_NAME_BYTES - len(suffix):
        stem = stem[:-1]
    return stem.rstrip(" .") + suffix


class UploadFolder:
    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes

    def check_length(self, declared: int | None) -> None:
        if declared is not None and declared > self.max_bytes:
            raise UploadError(f"the upload is {declared} bytes; the limit is {self.max_bytes}")

    async def receive(self, chunks: AsyncIterator[bytes]) -> tuple[Path, str]:
        """Write the body to a temporary file; its path and the BLAKE2b content hash (as videos are hashed)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self.folder / f".upload-{uuid.uuid4().hex}.part"
        digest = hashlib.blake2b(digest_size=16)
        size = 0
        try:
            with temporary.open("wb") as handle:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise UploadError(f"the upload is over the limit of {self.max_bytes} bytes")
                    digest.update(chunk)
                    handle.write(chunk)
            if size == 0:
                raise UploadError("the upload is empty", status=400)
        except BaseException:  # over the limit, a client gone mid-body, a full disk: nothing half-written stays
            temporary.unlink(missing_ok=True)
            raise
        return temporary, digest.hexdigest()

    def keep(self, temporary: Path, content_hash: str, name: str) -> Path:
        """Move a checked upload to ``<content hash>/<name>`` (an identical upload already kept wins)."""
        folder = self.folder / content_hash
        kept = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
        if kept:
            temporary.unlink(missing_ok=True)
            return kept[0]
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / name
        os.replace(temporary, target)
        return target

    def remove(self, path: Path) -> bool:
        """Delete a kept upload (and its content-hash folder); False for a path that is no upload."""
        resolved = Path(os.path.realpath(path))
        folder = resolved.parent
        if folder.parent != Path(os.path.realpath(self.folder)) or not resolved.is_file():
            return False
        resolved.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()
        return True
