"""``open_knowledge``: every source a question names, read and checked before the question starts."""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Union
from urllib.parse import unquote, urlsplit

import httpx

from vidagent.errors import KnowledgeError
from vidagent.knowledge.documents import DOCUMENT_SUFFIXES, DocumentSource, load_document
from vidagent.knowledge.spec import KnowledgeSpec, as_spec, identifier, unique
from vidagent.knowledge.tables import TABLE_SUFFIXES, TableSource, load_tables
from vidagent.knowledge.web import WebSearch
from vidagent.perception.base import TextEmbedder
from vidagent.video.video import file_content_hash

WEB_TOOL = "web_search"
_CONTENT_SUFFIXES = {"text/csv": ".csv", "text/tab-separated-values": ".tsv", "application/pdf": ".pdf",
                     "text/markdown": ".md", "text/html": ".html", "text/plain": ".txt",
                     "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
                     "application/vnd.apache.parquet": ".parquet", "application/x-sqlite3": ".sqlite"}


@dataclass(frozen=True)
class WebSource:
    """The configured web search, as a knowledge source."""

    search: WebSearch
    description: str = ""
    name: str = WEB_TOOL
    origin: str = "the web"


Knowledge = Union[TableSource, DocumentSource, WebSource]


@dataclass(frozen=True)
class KnowledgeLimits:
    """Where knowledge is cached, how large a file may be, and the web search, if any."""

    folder: Path
    max_bytes: int = 256 << 20
    web_endpoint: str = ""
    timeout_s: float = 10.0


def open_knowledge(items: Iterable[str | Path | KnowledgeSpec], embedder: TextEmbedder,
                   limits: KnowledgeLimits) -> list[Knowledge]:
    """Each named source, read (tables loaded, documents embedded) and given a unique name; the
    first that cannot be read stops all of them with an error naming it."""
    opened: list[Knowledge] = []
    names: set[str] = set()
    for spec in (as_spec(item) for item in items):
        source = _open(spec, embedder, limits, names)
        names.add(source.name)
        opened.append(source)
    return opened


def _open(spec: KnowledgeSpec, embedder: TextEmbedder, limits: KnowledgeLimits, taken: set[str]) -> Knowledge:
    if spec.is_web:
        if not limits.web_endpoint:
            raise KnowledgeError("web search is not configured: set VIDAGENT_WEB_SEARCH to a SearxNG-style "
                                 "JSON search endpoint")
        if WEB_TOOL in taken:
            raise KnowledgeError("web search is attached twice")
        return WebSource(WebSearch(limits.web_endpoint, limits.timeout_s), spec.description)
    path = _download(spec.location, limits) if spec.is_url else _local(spec.location)
    origin = _url_name(spec.location) if spec.is_url else path.name
    size = path.stat().st_size
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES + DOCUMENT_SUFFIXES:
        raise KnowledgeError(f"{origin}: vidagent reads tables ({', '.join(TABLE_SUFFIXES)}) and documents "
                             f"({', '.join(DOCUMENT_SUFFIXES)}), not {suffix or 'files without a suffix'}")
    if size > limits.max_bytes and suffix not in (".sqlite", ".sqlite3", ".db"):  # a database is queried, not loaded
        raise KnowledgeError(f"{origin}: {size / (1 << 20):,.0f} MiB; knowledge files are limited to "
                             f"{limits.max_bytes / (1 << 20):,.0f} MiB (VIDAGENT_KNOWLEDGE_MAX_MIB)")
    if size == 0:
        raise KnowledgeError(f"{origin}: the file is empty")
    is_database = suffix in (".sqlite", ".sqlite3", ".db")
    digest = "" if is_database else file_content_hash(path)  # a database is queried where it is: nothing cached
    name = unique(f"{identifier(Path(origin).stem)}_knowledge", taken)
    try:
        if suffix in TABLE_SUFFIXES:
            database, tables = load_tables(path, digest, limits.folder / "tables")
            return TableSource(name, origin, spec.description, database, tables)
        title, parts, passages, vectors = load_document(path, digest, limits.folder / "documents", embedder)
    except OSError as error:
        raise KnowledgeError(f"{origin}: cannot be read ({error.strerror or error})") from error
    return DocumentSource(name, origin, spec.description, title, parts, tuple(passages), vectors)


def _local(location: str) -> Path:
    path = Path(location).expanduser()
    if not path.exists():
        raise KnowledgeError(f"{location}: no such file")
    if not path.is_file():
        raise KnowledgeError(f"{location}: not a file")
    if not os.access(path, os.R_OK):
        raise KnowledgeError(f"{location}: not readable (permission denied)")
    return path.resolve()


def _download(url: str, limits: KnowledgeLimits) -> Path:
    """The file at ``url``, fetched into the cache (at most ``max_bytes``), named by the URL."""
    folder = limits.folder / "downloads"
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.blake2b(url.encode(), digest_size=12).hexdigest()
    try:
        with httpx.stream("GET", url, timeout=limits.timeout_s, follow_redirects=True) as response:
            response.raise_for_status()
            suffix = Path(urlsplit(url).path).suffix.lower() or \
                _CONTENT_SUFFIXES.get(response.headers.get("content-type", "").split(";")[0].strip(), "")
            target = folder / f"{key}{suffix}"
            partial = target.with_name(f"{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial")
            received = 0
            try:
                with partial.open("wb") as handle:
                    for chunk in response.iter_bytes():
                        received += len(chunk)
                        if received > limits.max_bytes:
                            raise KnowledgeError(f"{url}: larger than {limits.max_bytes / (1 << 20):,.0f} MiB, "
                                                 f"the knowledge limit (VIDAGENT_KNOWLEDGE_MAX_MIB)")
                        handle.write(chunk)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    except httpx.HTTPStatusError as error:
        raise KnowledgeError(f"{url}: the server answered {error.response.status_code}") from error
    except httpx.HTTPError as error:
        raise KnowledgeError(f"{url}: cannot be fetched ({error})") from error
    return target


def _url_name(url: str) -> str:
    return unquote(Path(urlsplit(url).path).name) or urlsplit(url).netloc


