"""What a user names as knowledge: a file, a URL, or ``web``, with an optional one-line description."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

WEB = "web"  # the location that names the configured web search


@dataclass(frozen=True)
class KnowledgeSpec:
    """A knowledge source as given: ``location`` is a file path, an http(s) URL or ``web``;
    ``description`` is the line the planner reads about it (default: told from its content)."""

    location: str
    description: str = ""

    @classmethod
    def parse(cls, text: str) -> "KnowledgeSpec":
        """``PATH_OR_URL`` or ``PATH_OR_URL#description``; a path that exists as written is taken
        whole, ``#`` and all."""
        text = text.strip()
        if not text:
            raise ValueError("an empty knowledge source")
        if "#" in text and not Path(text).expanduser().exists():
            location, _, description = text.partition("#")
            return cls(location.strip(), " ".join(description.split()))
        return cls(text)

    @property
    def is_web(self) -> bool:
        return self.location.lower() == WEB

    @property
    def is_url(self) -> bool:
        return re.match(r"(?i)https?://", self.location) is not None


def as_spec(item: "str | Path | KnowledgeSpec") -> KnowledgeSpec:
    """A spec from a spec, a path or the text a user wrote."""
    if isinstance(item, KnowledgeSpec):
        return item
    return KnowledgeSpec.parse(str(item))


def identifier(text: str, fallback: str = "source") -> str:
    """``text`` as a lower-case SQL/tool identifier: its words (in any script) joined by ``_``, never
    starting with a digit (``fallback`` when it has none)."""
    words = re.findall(r"[^\W_]+", text.lower())
    name = "_".join(words)[:48].strip("_") or fallback
    return f"_{name}" if name[0].isdigit() else name


def unique(name: str, taken: Iterable[str]) -> str:
    """``name``, or ``name_2``, ``name_3``, ... whichever is not taken yet."""
    used = set(taken)
    candidate, number = name, 2
    while candidate in used:
        candidate, number = f"{name}_{number}", number + 1
    return candidate
