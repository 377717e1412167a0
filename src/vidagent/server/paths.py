"""The folders a server may read videos from, and the check every given path goes through."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from vidagent.server.errors import PathRefusedError


class AllowedFolders:
    """Paths are resolved (``..`` and every symlink followed) before they are compared, so neither a
    ``..`` trick nor a symlink that leads out of the folders reaches a file outside them."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self.folders = tuple(Path(folder).expanduser().resolve() for folder in folders)

    def contains(self, path: Path) -> bool:
        """Whether ``path`` (resolved) lies in one of the folders."""
        resolved = Path(os.path.realpath(path))
        return any(resolved.is_relative_to(folder) for folder in self.folders)

    def resolve(self, given: str, *, what: str = "video file", folder_ok: bool = False) -> Path:
        """The real path of ``given``, which must name an existing file (or, ``folder_ok``, a folder) inside
        the folders; ``what`` names what is wanted in the error."""
        if not given or "\x00" in given:
            raise PathRefusedError(f"give the path of a {what}", status=400)
        if not self.folders:
            upload = "; upload instead" if what == "video file" else ""
            raise PathRefusedError(f"this server takes no {what} by path (start it with --videos DIR){upload}")
        path = Path(given).expanduser()
        candidates = [path] if path.is_absolute() else [folder / path for folder in self.folders]
        inside = [Path(os.path.realpath(c)) for c in candidates]
        inside = [p for p in inside if any(p.is_relative_to(folder) for folder in self.folders)]
        if not inside:
            raise PathRefusedError(f"{given}: outside the folders this server reads ({self.describe()})")
        for resolved in inside:
            if resolved.is_file() or (folder_ok and resolved.is_dir()):
                return resolved
        raise PathRefusedError(f"{given}: no such file in {self.describe()}", status=404)

    def files(self, suffixes: Iterable[str], limit: int = 500, depth: int = 3) -> list[Path]:
        """Files with one of ``suffixes`` in the folders (``depth`` levels down, at most ``limit``), each
        resolved and still inside: a symlink that leads out is left out."""
        wanted = {suffix.lower() for suffix in suffixes}
        found: list[Path] = []
        seen: set[Path] = set()

        def walk(folder: Path, level: int) -> None:
            try:
                entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
            except OSError:
                return
            for entry in entries:
                if len(found) >= limit or entry.name.startswith("."):
                    continue
                resolved = Path(os.path.realpath(entry.path))
                if not self.contains(resolved) or resolved in seen:
                    continue
                if entry.is_dir() and level < depth:
                    seen.add(resolved)
                    walk(resolved, level + 1)
                elif entry.is_file() and resolved.suffix.lower() in wanted:
                    seen.add(resolved)
                    found.append(resolved)

        for folder in self.folders:
            walk(folder, 1)
        return found

    def describe(self) -> str:
        return ", ".join(str(folder) for folder in self.folders) or "no folders"
