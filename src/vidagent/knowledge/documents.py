"""Textual knowledge: PDF, Markdown, HTML and plain text cut into passages and embedded.

A document is read into parts that say where they are (a PDF's pages, a Markdown or HTML file's
sections, a text file's lines), each part is cut into passages of about ``PASSAGE_CHARS`` on paragraph
and sentence boundaries, and the passages are embedded with the session's text embedder. Passages and
vectors are cached in ``<folder>/<content digest>-<embedder>.npz`` (written whole, then renamed), so a
document is embedded once per embedder. ``DocumentSource.search`` ranks passages by similarity.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Sequence

import numpy as np

from vidagent.errors import KnowledgeError
from vidagent.knowledge.spec import identifier
from vidagent.perception.base import TextEmbedder

DOCUMENT_SUFFIXES = (".pdf", ".md", ".markdown", ".html", ".htm", ".txt", ".text")
PASSAGE_CHARS = 700
# Bounds on a document's work (issue 55: a 20 KB PDF whose 10 pages share one 6.3 MB content stream took 88 s to
# read). A PDF's content streams (its drawing instructions, text among them) are measured decoded before any text is
# extracted, each page's counted (a stream pages share costs each of them); a text page's are 5-50 KB.
MAX_PDF_PAGES = 3000
MAX_PAGE_CONTENT_BYTES = 4 << 20
MAX_PDF_CONTENT_BYTES = 16 << 20
MAX_PASSAGES = 10_000  # passages embedded per document (7 MB of text, a few minutes of the embedder)
_CACHE_VERSION = 1


@dataclass(frozen=True)
class Passage:
    """A piece of a document and where it is (``page 3``, ``section "Cooking times"``, ``lines 10-24``)."""

    text: str
    where: str


@dataclass(frozen=True)
class DocumentSource:
    """A document's passages and their unit vectors (rows of ``vectors``)."""

    name: str
    origin: str
    description: str
    title: str
    parts: int  # pages, sections or paragraphs the document has
    passages: tuple[Passage, ...]
    vectors: np.ndarray

    def search(self, query: np.ndarray, count: int) -> list[Passage]:
        """The ``count`` passages most like the query vector, best first."""
        scores = self.vectors @ np.asarray(query, np.float32)
        return [self.passages[i] for i in np.argsort(-scores, kind="stable")[:count]]


def load_document(path: Path, digest: str, folder: Path, embedder: TextEmbedder) -> tuple[str, int, list[Passage],
                                                                                          np.ndarray]:
    """``path``'s title, part count, passages and their vectors (from the cache when it has them)."""
    cache = folder / f"{digest}-{identifier(embedder.name, 'embedder')}.npz"
    if cache.is_file():
        try:
            with np.load(cache, allow_pickle=False) as stored:
                meta = json.loads(str(stored["meta"]))
                if meta.get("version") == _CACHE_VERSION:
                    passages = [Passage(text, where) for text, where in meta["passages"]]
                    return meta["title"], int(meta["parts"]), passages, stored["vectors"]
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache entry is rebuilt below
    title, parts = read_parts(path)
    passages = passages_of(parts)
    if not passages:
        raise KnowledgeError(f"{path.name}: holds no text to read (a scanned PDF holds images of text, which "
                             f"vidagent does not read)")
    if len(passages) > MAX_PASSAGES:
        raise KnowledgeError(f"{path.name}: {len(passages):,} passages of text, more than the {MAX_PASSAGES:,} a "
                             "document may hold; attach the part the question needs")
    vectors = np.asarray(embedder.embed_passages([p.text for p in passages]), np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"version": _CACHE_VERSION, "title": title, "parts": len(parts),
            "passages": [[p.text, p.where] for p in passages]}
    partial = cache.with_name(f"{cache.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial.npz")
    try:
        np.savez(partial, meta=np.asarray(json.dumps(meta)), vectors=vectors)
        os.replace(partial, cache)
    finally:
        partial.unlink(missing_ok=True)
    return title, len(parts), passages, vectors


def read_parts(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """The document's title and its parts as (where, text)."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return _pdf(path)
    text = _text(path)
    if suffix in (".md", ".markdown"):
        return _markdown(text, path.stem)
    if suffix in (".html", ".htm"):
        return _html(text, path.stem)
    return path.stem, _lines(text)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise KnowledgeError(f"{path.name}: not UTF-8 text ({error.reason} at byte {error.start})") from error


def _pdf(path: Path) -> tuple[str, list[tuple[str, str]]]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise KnowledgeError(f"{path.name}: the PDF is password-protected; give a copy without a password")
        _check_pdf_size(path, reader)
        pages = [(f"page {number}", page.extract_text() or "") for number, page in enumerate(reader.pages, 1)]
        title = str((reader.metadata or {}).get("/Title") or "").strip()
    except KnowledgeError:
        raise
    except (PdfReadError, OSError, ValueError, KeyError, TypeError) as error:
        raise KnowledgeError(f"{path.name}: not a readable PDF ({type(error).__name__}: {error})") from error
    except Exception as error:  # pypdf raises its dependency's errors for an encryption it cannot undo
        raise KnowledgeError(f"{path.name}: cannot read the PDF ({type(error).__name__}: {error})") from error
    return title or path.stem, pages


def _check_pdf_size(path: Path, reader: object) -> None:
    """Refuse a PDF of more than ``MAX_PDF_PAGES`` pages, or whose pages' content streams decode past the caps,
    before any text is extracted from it."""
    pages = reader.pages  # type: ignore[attr-defined]
    if len(pages) > MAX_PDF_PAGES:
        raise KnowledgeError(f"{path.name}: {len(pages):,} pages, more than the {MAX_PDF_PAGES:,} a PDF may have; "
                             "attach the part the question needs")
    total = 0
    for number, page in enumerate(pages, 1):
        size = _content_bytes(page)
        total += size
        if size > MAX_PAGE_CONTENT_BYTES or total > MAX_PDF_CONTENT_BYTES:
            raise KnowledgeError(f"{path.name}: page {number}'s drawing instructions decode to {size:,} bytes "
                                 f"({total:,} up to it; at most {MAX_PAGE_CONTENT_BYTES:,} a page and "
                                 f"{MAX_PDF_CONTENT_BYTES:,} in all): too much to read for its text")


def _content_bytes(page: object) -> int:
    """The decoded size of a page's content streams and of the forms its resources name."""
    from pypdf.generic import ArrayObject

    def streams(value: object) -> list[object]:
        value = value.get_object() if value is not None else None  # type: ignore[attr-defined]
        return list(value) if isinstance(value, ArrayObject) else [] if value is None else [value]

    found = streams(page.get("/Contents"))  # type: ignore[attr-defined]
    resources = page.get("/Resources")  # type: ignore[attr-defined]
    objects = resources.get_object().get("/XObject") if resources is not None else None
    if objects is not None:
        found += [item for item in objects.get_object().values()
                  if item.get_object().get("/Subtype") == "/Form"]
    return sum(len(stream.get_object().get_data()) for stream in found if hasattr(stream.get_object(), "get_data"))


def _markdown(text: str, stem: str) -> tuple[str, list[tuple[str, str]]]:
    parts: list[tuple[str, str]] = []
    heading, body = "", []
    title = ""
    for line in text.splitlines():
        match = re.match(r"\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            parts.append((_section(heading), "\n".join(body)))
            heading, body = match.group(1), []
            title = title or heading
        else:
            body.append(line)
    parts.append((_section(heading), "\n".join(body)))
    return title or stem, [(where, part) for where, part in parts if part.strip()]


class _HTMLParts(HTMLParser):
    """Text under each heading of an HTML page (script, style and the like left out)."""

    SKIP = {"script", "style", "noscript", "template", "svg", "head"}
    HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
    BLOCKS = {"p", "div", "li", "br", "tr", "section", "article", "table", "ul", "ol", "blockquote", "pre"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[tuple[str, list[str]]] = [("", [])]
        self.title = ""
        self._skipping = 0
        self._in_heading = False
        self._in_title = False
        self._heading: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.SKIP:
            self._skipping += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self.HEADINGS:
            self._in_heading, self._heading = True, []
        elif tag in self.BLOCKS:
            self.parts[-1][1].append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in self.HEADINGS and self._in_heading:
            self._in_heading = False
            self.parts.append((" ".join("".join(self._heading).split()), []))
        elif tag in self.BLOCKS:
            self.parts[-1][1].append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._skipping:
            return
        elif self._in_heading:
            self._heading.append(data)
        else:
            self.parts[-1][1].append(data)


def _html(text: str, stem: str) -> tuple[str, list[tuple[str, str]]]:
    parser = _HTMLParts()
    parser.feed(text)
    parser.close()
    parts = [(_section(heading), re.sub(r"[ \t]+", " ", "".join(chunks))) for heading, chunks in parser.parts]
    first_heading = next((heading for heading, _ in parser.parts if heading), "")
    return " ".join(parser.title.split()) or first_heading or stem, [(w, p) for w, p in parts if p.strip()]


def _lines(text: str) -> list[tuple[str, str]]:
    """A plain text's paragraphs, grouped into parts of about a passage, named by their lines."""
    parts: list[tuple[str, str]] = []
    start, buffer = 1, []
    for number, line in enumerate(text.splitlines() + [""], 1):
        buffer.append(line)
        if not line.strip() and sum(len(b) for b in buffer) >= PASSAGE_CHARS:
            parts.append((f"lines {start}-{number - 1}", "\n".join(buffer)))
            start, buffer = number + 1, []
    if "".join(buffer).strip():
        parts.append((f"lines {start}-{start + len(buffer) - 2}", "\n".join(buffer)))
    return [(where, part) for where, part in parts if part.strip()]


def _section(heading: str) -> str:
    return f'section "{heading}"' if heading else "the beginning"


def _pieces(text: str) -> list[str]:
    """``text`` cut into passages of about ``PASSAGE_CHARS``: whole paragraphs where they fit, else sentences."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]
    units: list[str] = []
    for paragraph in paragraphs:
        if len(paragraph) <= PASSAGE_CHARS:
            units.append(paragraph)
        else:
            units += [s for s in re.split(r"(?<=[.!?])\s+", paragraph) if s]
    pieces: list[str] = []
    for unit in units:
        while len(unit) > PASSAGE_CHARS:  # one sentence longer than a passage: cut at a space
            cut = unit.rfind(" ", 0, PASSAGE_CHARS)
            cut = cut if cut > PASSAGE_CHARS // 2 else PASSAGE_CHARS
            pieces.append(unit[:cut].strip())
            unit = unit[cut:].strip()
        if pieces and len(pieces[-1]) + 1 + len(unit) <= PASSAGE_CHARS:
            pieces[-1] = f"{pieces[-1]} {unit}"
        elif unit:
            pieces.append(unit)
    return pieces


def passages_of(parts: Sequence[tuple[str, str]]) -> list[Passage]:
    """Every passage of ``parts`` with where it is."""
    return [Passage(text, where) for where, part in parts for text in _pieces(part)]
