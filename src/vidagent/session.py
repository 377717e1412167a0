"""A session holds the loaded models and the library, and answers questions about videos.

Models load on first use and stay loaded for the session's later questions; close the
session (or use it as a context manager) to stop the detector's worker process. The session keeps
resources only: a question's life (open its sources, check its needs, recall, run, check, learn,
report) is the stages of ``vidagent.agent.inquiry``, which ``ask`` runs in order.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from vidagent.agent.answer import Answer
from vidagent.agent.library_question import DEFAULT_MAX_VIDEOS, LibraryAnswer, VideoDone
from vidagent.agent.inquiry import Inquiry, SourceInput, answer_inquiry, asked_question, choose_vqa
from vidagent.agent.planner import Planner
from vidagent.agent.steps import Step
from vidagent.agent.task import Question
from vidagent.config import Settings
from vidagent.errors import ModelUnavailableError, VideoError
from vidagent.experience.store import ExperienceStore
from vidagent.knowledge.sources import Knowledge, KnowledgeLimits, open_knowledge
from vidagent.knowledge.spec import KnowledgeSpec, as_spec
from vidagent.llm.base import ChatModel
from vidagent.llm.budget import Budget
from vidagent.memory.builder import ALL_STAGES, MemoryBuilder
from vidagent.memory.store import Library
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.suite import Perception
from vidagent.perception.base import VisualQA
from vidagent.tools.refer import ReferredMasks, ReferTools, Segmentation
from vidagent.video.video import Video

logger = logging.getLogger(__name__)


class Session:
    """Entry point for indexing videos and asking questions about them: the settings, the library, the models and
    the experience store, built on first use and kept for the session's later questions."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        llm: ChatModel | None = None,
        perception: Perception | None = None,
        vqa: VisualQA | None = None,
        knowledge: Sequence[str | Path | KnowledgeSpec] = (),
    ) -> None:
        """``knowledge``: sources (files, URLs, ``web``) attached to every question of the session."""
        self.settings = settings or Settings.from_env()
        self.knowledge = tuple(as_spec(item) for item in knowledge)
        self._llm = llm
        self._owns_llm = llm is None
        self._perception = perception
        self._vqa = vqa
        self._owns_vqa = False  # a model built here from settings is closed here; one passed in stays the caller's
        self._library: Library | None = None
        self._experience_store: ExperienceStore | None = None

    # -- lazily built parts ------------------------------------------------------------------
    @property
    def llm(self) -> ChatModel:
        if self._llm is None:
            from vidagent.llm.client import build_llm

            self._llm = build_llm(self.settings)
        return self._llm

    @property
    def embedded_llm(self) -> bool:
        """Whether questions are answered by the embedded local model (the default planner depends on it):
        by the settings until a chat model is built or given, then by that model's backend."""
        if self._llm is None:
            return self.settings.llm.backend == "local"
        from vidagent.llm.local import LocalGGUFBackend

        return isinstance(getattr(self._llm, "backend", None), LocalGGUFBackend)

    @property
    def perception(self) -> Perception:
        if self._perception is None:
            self._perception = Perception.from_settings(self.settings)
        return self._perception

    @property
    def library(self) -> Library:
        if self._library is None:
            self._library = Library(self.settings.library_path)
        return self._library

    @property
    def experience_store(self) -> ExperienceStore:
        """The experience kept across questions (semantic and procedural memory, the Learner's traces),
        in the library database."""
        if self._experience_store is None:
            self._experience_store = ExperienceStore(self.settings.library_path, self.perception.embedder)
        return self._experience_store

    def vqa(self, llm: ChatModel) -> VisualQA:
        """Visual question answering for a question asked with ``llm`` (``inquiry.choose_vqa``): the one given to
        the session, a configured model (built once), else ``llm`` itself looking at the frames when it can, or
        reading their descriptions; held to the frames of the question's budget when ``llm`` has one."""
        return choose_vqa(llm, self._configured_vqa(), self.settings, lambda: self.perception.describer)

    def _configured_vqa(self) -> VisualQA | None:
        """The VQA model given to the session, or the one the settings name (built on first use, closed here)."""
        if self._vqa is None and self.settings.backends.vqa:
            from vidagent.perception.backends import build_backend

            self._vqa = build_backend("vqa", self.settings.backends.vqa, self.settings)
            self._owns_vqa = True
        return self._vqa

    # -- work --------------------------------------------------------------------------------
    def builder(self) -> MemoryBuilder:
        return MemoryBuilder(self.library, self.perception, self.settings)

    def index(self, video: str | Path | Video, stages: Sequence[str] = ALL_STAGES, *,
              progress: bool = True) -> VideoMemory:
        """Build (or reuse) the given memory stages of a video (default: all of them)."""
        return self.builder().build(_opened(video), stages, progress=progress)

    def ask(
        self,
        sources: SourceInput | Sequence[SourceInput],
        question: str | Question,
        choices: Sequence[str] | None = None,
        *,
        planner: str | Planner | None = None,
        planner_options: Mapping[str, Any] | None = None,
        on_step: Callable[[Step], None] | None = None,
        progress: bool = False,
        experience: str | None = None,
        knowledge: Sequence[str | Path | KnowledgeSpec] = (),
        budget: Budget | str | None = None,
        check: bool | None = None,
        glance: float | None = None,
    ) -> Answer:
        """Answer a question about a video, or about several videos and images (indexing videos first if needed).

        ``question`` is its text (with ``choices``, its options), or a ``Question`` that also carries
        what an evaluation knows of it (id, whether it wants a time, a known answer, its type).
        ``sources`` is one path (or ``Video``/``Image``, or a memory's id such as ``egoschema:<q_uid>``)
        or a sequence of them; every one is opened before any work, and one that cannot be read stops
        the question with an error naming it. ``planner`` is a registered name (``react``, ``mcts``,
        ``traveler``, ``peil``, ``caption_only``, ``random``, or ``package.module:Class``) built with
        ``planner_options``, or a planner object; ``None`` picks, for one video, ``caption_only`` reading
        five lines with its options scored when the chat model is the embedded one (``react`` with an
        endpoint), and ``peil`` for images or several sources. A planner takes only the sources its ``needs`` name (only
        ``peil`` takes images or several). ``on_step`` is called with each step of the trace as soon
        as it is made. ``experience`` (default: the settings') chooses the memory
        across questions that is replayed before the planner runs and kept after it answers:
        ``none``, ``semantic`` (validated answers about the same video), ``procedural`` (workflows
        that worked for questions of the same type) or ``all``; workflows are kept by the question's
        ``task_type`` (empty: told from the question). ``knowledge`` attaches knowledge sources to this
        question, after the session's (DoraemonGPT's knowledge tools): a table (CSV, TSV, XLSX, Parquet,
        SQLite), a document (PDF, Markdown, HTML, text), an http(s) URL of one, or ``web`` (the
        configured web search); ``PATH#description`` gives the line the planner reads about it. Each
        is read before the question starts; react, mcts and peil offer it to their model. ``budget``
        (a ``Budget`` or ``"calls=N,tokens=T,seconds=S,frames=F"``) bounds the question's model work, every call
        counted (memory selection, tools and planner alike): once it is spent the planner stops and the
        answer is the last one it reached (``artifacts["budget"]`` says what was spent and whether it stopped).
        ``check`` (default: the settings') has the model re-read the evidence the answer cites and say which
        of it supports the answer (``agent.evidence_check``); an answer none of it supports abstains, its
        guess kept. ``glance`` (seconds): a video not indexed yet is answered at once from a partial memory,
        one frame described every ``glance`` seconds, refined where the tools read (``vidagent.memory.glance``);
        ``artifacts["coverage"]`` then says, per video, what the answer saw (``index`` completes it later).
        ``None`` (the default) glances every 20 s at a video of at least ``settings.glance_after_s`` seconds
        (120), at no more stretches than a planner reading a few lines evenly reads (``Needs.lines_read``: the
        default's 5 lines of a 20-minute video, one frame every 240 s), and indexes a shorter one whole; ``0``
        always indexes whole first.
        """
        inquiry = Inquiry(sources, asked_question(question, choices), planner_asked=planner,
                          planner_options=planner_options, on_step=on_step, progress=progress, experience=experience,
                          knowledge=knowledge, budget=budget, check=check, glance=glance)
        return answer_inquiry(inquiry, self)

    def ask_library(self, question: str, sources: Sequence[str | Path] = (), *,
                    max_videos: int = DEFAULT_MAX_VIDEOS, on_video: VideoDone | None = None,
                    progress: bool = False) -> LibraryAnswer:
        """Answer a question over many videos ("which videos show a dog, and when?"): the whole library, or only
        ``sources`` (video files and folders of them, indexed first where needed). The library search finds the
        candidate videos, the chat model judges each on what the search found in it (``on_video`` is called with
        each finding as it is made), and the answer lists the videos with their moments
        (``vidagent.agent.library_question``)."""
        from vidagent.agent.library_question import answer_over_library
        from vidagent.memory.library_index import find_videos
        from vidagent.memory.library_search import LibrarySearch
        from vidagent.memory.search_index import SearchFilters

        ids: list[str] = []
        for path, _named in find_videos(sources):
            video = _opened(path)
            if not self.library.stage_names(video.content_hash):
                self.index(video, progress=progress)
            ids.append(video.content_hash)
        if sources and not ids:
            raise VideoError(f"no video files in {', '.join(str(s) for s in sources)}")
        search = LibrarySearch.open(self.settings, self.library, self.perception.embedder)
        try:
            return answer_over_library(question, search, self.llm, filters=SearchFilters(videos=tuple(ids)),
                                       max_videos=max_videos, on_video=on_video, progress=progress)
        finally:
            search.close()

    def refer_object(self, video: str | Path | Video, expression: str, *, target: str | Path | None = None,
                     use_model: bool = True, progress: bool = False,
                     on_overlay: Callable[[float, float], None] | None = None) -> Segmentation:
        """Referring video object segmentation: the one object of ``video``'s object memory that ``expression``
        ("the black dog", "the second cup from the left", "the person who sits down") refers to, with its
        mask in every frame the objects stage sampled it in, saved as PNG images, a manifest and a video with
        the mask drawn over it, in one folder (``target``, a new or empty folder; default: the library's
        artifacts folder, named by content). The object memory is built first when missing. The expression
        is read without a model where it can be; the chat model reads what it cannot (``use_model=False``:
        never; such an expression is refused). An expression no object fits raises a ``ToolInputError``
        naming the objects there are. ``progress`` shows the memory's build; ``on_overlay(done_s, total_s)``
        follows the overlay video's writing."""
        tools = self._refer_tools(video, use_model, progress)
        return tools.segment(expression, target=Path(target).expanduser() if target is not None else None,
                             progress=on_overlay)

    def refer_masks(self, video: str | Path | Video, expression: str, times: Sequence[float], *,
                    use_model: bool = True, progress: bool = False) -> ReferredMasks:
        """The masks at ``times`` (seconds) of the object ``expression`` refers to, as ``refer_object`` finds it,
        with nothing saved: what an evaluation (Ref-YouTube-VOS's J&F) scores."""
        tools = self._refer_tools(video, use_model, progress)
        return tools.masks_at(tools.resolve(expression), times)

    def _refer_tools(self, video: str | Path | Video, use_model: bool, progress: bool) -> ReferTools:
        memory = self.builder().build(_opened(video), ["objects"], progress=progress)
        llm: ChatModel | None = None
        if use_model:
            try:
                llm = self.llm  # loaded only if the expression needs reading
            except ModelUnavailableError as error:
                logger.info("refer_object without a chat model: %s", error)
        return ReferTools(memory, self.settings.artifacts_dir, llm)

    def open_knowledge(self, items: Sequence[str | Path | KnowledgeSpec]) -> list[Knowledge]:
        """Knowledge sources read and checked (tables loaded, documents embedded, both cached by content);
        the first that cannot be read raises a ``KnowledgeError`` naming it."""
        if not items:
            return []
        limits = KnowledgeLimits(self.settings.knowledge_dir, self.settings.knowledge_max_mib << 20,
                                 self.settings.web_search)
        return open_knowledge(items, self.perception.embedder, limits)

    def close(self) -> None:
        """Stop the detector's worker, free the chat model and its cache, close the library."""
        if self._perception is not None:
            self._perception.close()
        close_vqa = getattr(self._vqa, "close", None)
        if self._owns_vqa and callable(close_vqa):
            close_vqa()
            self._vqa, self._owns_vqa = None, False
        close_llm = getattr(self._llm, "close", None)
        if self._owns_llm and callable(close_llm):  # a model the caller passed in stays the caller's
            close_llm()
            self._llm = None
        if self._library is not None:
            self._library.close()
        if self._experience_store is not None:
            self._experience_store.close()
            self._experience_store = None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _opened(video: str | Path | Video) -> Video:
    """A video given by its path opened (the edge where a path becomes a handle); an opened one as it is."""
    return video if isinstance(video, Video) else Video(video)
