"""One-call functions for scripts; use ``Session`` to ask many questions without reloading models."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from vidagent.agent.answer import Answer
from vidagent.agent.library_question import LibraryAnswer
from vidagent.memory.caption_import import ImportReport
from vidagent.config import Settings
from vidagent.memory.search_index import SearchFilters
from vidagent.memory.search_moments import Moment
from vidagent.memory.video_memory import VideoMemory
from vidagent.session import Session
from vidagent.tools.refer import Segmentation


def ask(sources: str | Path | Sequence[str | Path], question: str, choices: Sequence[str] | None = None,
        *, planner: str | None = None, planner_options: Mapping[str, Any] | None = None,
        knowledge: Sequence[str | Path] = (), settings: Settings | None = None) -> Answer:
    """Answer ``question`` about a video (or, with ``planner="peil"``, several videos and images);
    with ``choices``, pick one of them. ``planner`` names the planner (``react``, ``mcts``,
    ``traveler``, ``peil``, ``caption_only``, ``random``; the default is written once in
    ``vidagent.agent.planner.default_description``: ``caption_only`` reading five lines with the options scored with
    the embedded model, ``react`` with an endpoint, ``peil`` for images or several sources) and ``planner_options``
    its settings. ``knowledge`` attaches tables,
    documents, URLs of them or ``web`` (see ``Session.ask``).

    Raises ``VideoError`` (unreadable video), ``LLMError`` (chat model failed),
    ``ModelUnavailableError`` (models not installed), ``KnowledgeError`` (a knowledge source cannot be
    read) — all subclasses of ``VidagentError``.
    """
    with Session(settings) as session:
        return session.ask(sources, question, choices, planner=planner, planner_options=planner_options,
                           knowledge=knowledge)


def index(video: str | Path, *, settings: Settings | None = None, progress: bool = True) -> int:
    """Build the memory of ``video`` ahead of questions; returns the number of segments."""
    with Session(settings) as session:
        memory: VideoMemory = session.index(video, progress=progress)
        return memory.segment_count


def refer_object(video: str | Path, expression: str, *, target: str | Path | None = None,
                 settings: Settings | None = None) -> Segmentation:
    """The object of ``video`` that ``expression`` refers to, with its masks saved (``Session.refer_object``)."""
    with Session(settings) as session:
        return session.refer_object(video, expression, target=target)


def import_captions(path: str | Path, *, format: str | None = None, namespace: str | None = None,
                    only: Sequence[str] | None = None, captioner: str | None = None,
                    settings: Settings | None = None, progress: bool = False) -> "ImportReport":
    """Import a caption set that a published system released (LLoVi's JSON, VideoAgent's ``*_cap.json``
    folder or zip, or a generic JSONL/CSV) as one memory per video, named ``namespace:<video id>``;
    ask about one with ``ask("egoschema:<q_uid>", ...)``. Importing again rebuilds nothing.

    Raises ``CaptionFormatError`` (a ``VidagentError``) naming the file and record of any bad input,
    before anything is written.
    """
    from vidagent.memory.caption_import import ImportOptions
    from vidagent.memory.caption_import import import_captions as import_caption_set
    from vidagent.memory.store import Library
    from vidagent.perception.suite import text_embedder

    settings = settings or Settings.from_env()
    options = ImportOptions(format=format, namespace=namespace, captioner=captioner, only=only)
    with Library(settings.library_path) as library:
        return import_caption_set(library, text_embedder(settings), Path(path), options, progress=progress)


def search(query: str, *, videos: Sequence[str] = (), kinds: Sequence[str] = (), categories: Sequence[str] = (),
           limit: int = 10, settings: Settings | None = None) -> list[Moment]:
    """The ``limit`` best moments for ``query`` across every memory of the library (``vidagent search``): each a
    video, its time spans and the memory lines that matched (objects, on-screen text, speech, descriptions).
    ``videos`` (ids), ``kinds`` (``object``, ``action``, ``text``, ``speech``, ``segment``) and ``categories``
    narrow it. No chat model runs; the search index is brought up to date with the library first."""
    from vidagent.memory.library_search import LibrarySearch

    with LibrarySearch.open(settings or Settings.from_env()) as library_search:
        return library_search.search(query, SearchFilters(videos=tuple(videos), kinds=tuple(kinds),
                                                          categories=tuple(categories)), limit=limit)


def ask_library(question: str, sources: Sequence[str | Path] = (), *, settings: Settings | None = None
                ) -> LibraryAnswer:
    """Answer a question over many videos ("which videos show a dog, and when?"): the whole library, or the video
    files and folders in ``sources`` (``Session.ask_library``). The answer lists the videos with their moments."""
    with Session(settings) as session:
        return session.ask_library(question, sources)
