"""Questions as runs in the model lane, each step published as soon as the planner makes it.

A run whose client has gone is cancelled: it is dropped if it has not started, and stopped at its
next step if it has, so a closed browser tab never holds the lane for a whole search. Every run is held
to the server's cap on a question's work (``ServeConfig.question_cap``), so no request holds the lane for
longer than that (a model call under way finishes first) whatever budget and options it names; a server that
shuts down ends every run's events with an error at once.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from vidagent.agent.answer import Answer
from vidagent.agent.planner import Planner, knowledge_planners, planner_for, planner_names
from vidagent.agent.steps import Step
from vidagent.errors import VidagentError
from vidagent.knowledge.spec import KnowledgeSpec
from vidagent.llm.budget import Budget
from vidagent.llm.stopping import stopping_on
from vidagent.memory.stored_video import StoredVideo
from vidagent.server.display import shown_answer_data, shown_step
from vidagent.server.errors import AskCancelledError, BusyError, RequestError, error_body
from vidagent.server.events import EventLog
from vidagent.server.lane import ModelLane
from vidagent.video.video import Video

log = logging.getLogger(__name__)
MAX_QUESTION_CHARS = 4000
MAX_CHOICES = 26
MAX_SOURCES = 8
MAX_KNOWLEDGE = 8  # knowledge sources per question
MAX_GLANCE_S = 600.0  # the sparsest glance a question may ask for

AskFunction = Callable[..., Answer]  # Session.ask
# Called with an answer and its sources before the answer is published: starts the completion of the partial
# memories it was read from, and returns each one's job id by video id (said with the answer's coverage).
AfterAnswer = Callable[[Answer, Sequence[Video | StoredVideo]], Mapping[str, str]]
CANCELLED = {"error": "Cancelled", "message": "the question was stopped: its client went away", "status": 499}
SHUTTING_DOWN = {"error": "ServerShuttingDown", "status": 503,
                 "message": "the server is shutting down: the question was stopped; ask again when the server is back"}


@dataclass(frozen=True)
class AskSpec:
    """A question as a client gives it: the videos (ids), the question, options, planner and its settings.
    ``planner`` None picks ``react`` for one video and ``peil`` for several."""

    videos: tuple[str, ...]
    question: str
    choices: tuple[str, ...] | None = None
    planner: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    knowledge: tuple[str | KnowledgeSpec, ...] = ()  # files inside the server's folders (resolved), or ``web``
    budget: str | None = None  # ``calls=N,tokens=T,seconds=S,frames=F``: bounds the question's model work
    check_answer: bool | None = None  # check the answer against its evidence (None: the server's setting)
    glance: float | None = None  # seconds: a video not indexed yet is answered from a glance (memory.glance); 0 never,
    # None the default (a glance for a video of at least settings.glance_after_s seconds)

    def check(self, *, embedded: bool = False) -> Planner:
        """Refuse a malformed question before it queues; the planner, built with its options."""
        if not self.videos:
            raise RequestError("name at least one video (its video_id)")
        if len(self.videos) > MAX_SOURCES:
            raise RequestError(f"at most {MAX_SOURCES} videos per question")
        if len(set(self.videos)) != len(self.videos):
            raise RequestError("each video may be named once")
        if not self.question.strip():
            raise RequestError("the question is empty")
        if len(self.question) > MAX_QUESTION_CHARS:
            raise RequestError(f"the question is longer than {MAX_QUESTION_CHARS} characters")
        if self.choices is not None:
            if not 2 <= len(self.choices) <= MAX_CHOICES:
                raise RequestError(f"give between 2 and {MAX_CHOICES} choices, or none")
            if any(not choice.strip() for choice in self.choices):
                raise RequestError("a choice is empty")
        if self.planner and self.planner not in planner_names():  # never ``module:Class`` from a client: imports code
            raise RequestError(f"unknown planner {self.planner!r}: use one of {', '.join(planner_names())}")
        self.held_budget(None)
        if self.glance is not None and not 0 <= self.glance <= MAX_GLANCE_S:
            raise RequestError(f"glance is the seconds between glanced frames: at most {MAX_GLANCE_S:g}, "
                               "0 to index a new video whole first (default: a glance for a video of 2 minutes or more)")
        planner = planner_for(self.planner, dict(self.options), ["video"] * len(self.videos), embedded=embedded)
        if self.knowledge and not planner.needs.knowledge:
            raise RequestError(f"the {planner.name} planner offers its model no tools, so it cannot use knowledge; "
                               f"use {', '.join(knowledge_planners())}")
        return planner

    def held_budget(self, cap: Budget | None) -> Budget | None:
        """The budget the question runs under: its own (``budget``, refused when malformed) held to ``cap``,
        the server's most per question (a smaller limit of its own stays, a larger one is cut to the cap)."""
        try:
            own = Budget.parse(self.budget) if self.budget else None
        except ValueError as error:
            raise RequestError(str(error)) from None
        if cap is None:
            return own
        return cap if own is None else own.within(cap)


@dataclass
class AskRun:
    id: str
    spec: AskSpec
    events: EventLog = field(default_factory=EventLog)
    cancelled: threading.Event = field(default_factory=threading.Event)
    future: Future[Answer] | None = None
    video_ids: tuple[str, ...] = ()
    budget: Budget | None = None  # what the question may spend: its own budget held to the server's cap

    def cancel(self) -> None:
        """Drop the question if it still waits; stop it at its next step if it runs."""
        self.cancelled.set()
        if self.future is not None and self.future.cancel():
            self.events.publish("error", CANCELLED)

    def stop(self, reason: Mapping[str, Any]) -> None:
        """Cancel the question and end its events with the error ``reason`` now, not at its next step (the
        server is going away: a client watching is told before its connection closes)."""
        self.events.publish("error", dict(reason))
        self.cancel()


class AskRunner:
    """Runs questions in the lane; past ``max_queued`` pending jobs a new question is refused (``BusyError``).
    Each question's budget is held to ``cap`` (None: its own budget, if any, is all that bounds it)."""

    def __init__(self, lane: ModelLane, ask: AskFunction, max_queued: int | None = None,
                 after: AfterAnswer | None = None, *, embedded: bool = False, cap: Budget | None = None) -> None:
        self._lane = lane
        self._cap = cap
        self._embedded = embedded  # the chat model is the embedded one: its default planner (``planner_for``)
        self._ask = ask
        self._after = after
        self._max_queued = max_queued
        self._ids = itertools.count(1)
        self._live: dict[str, AskRun] = {}
        self._lock = threading.Lock()

    @property
    def live(self) -> int:
        """Questions queued or running."""
        with self._lock:
            return len(self._live)

    def busy(self, video_id: str) -> bool:
        """Whether a question about the video is queued or running."""
        with self._lock:
            return any(video_id in run.video_ids for run in self._live.values())

    def cancel_all(self) -> None:
        """Stop every question still queued or running (the server is shutting down): each one's events end
        with a ``ServerShuttingDown`` error at once, so a stream says why it ends."""
        with self._lock:
            runs = list(self._live.values())
        for run in runs:
            run.stop(SHUTTING_DOWN)

    def start(self, spec: AskSpec, videos: Sequence[Video | StoredVideo]) -> AskRun:
        """Queue the question (checked first: a bad one raises here, before anything streams)."""
        planner = spec.check(embedded=self._embedded)
        run = AskRun(f"ask-{next(self._ids)}", spec, video_ids=tuple(video.content_hash for video in videos),
                     budget=spec.held_budget(self._cap))
        run.events.publish("queued", {"ask_id": run.id, "planner": planner.name, "ahead": self._lane.pending})
        with self._lock:
            self._live[run.id] = run
        try:
            run.future = self._lane.submit(lambda: self._run(run, planner, videos), limit=self._max_queued)
        except BusyError:
            self._forget(run.id)
            raise
        run.future.add_done_callback(lambda _: self._forget(run.id))
        return run

    def _forget(self, run_id: str) -> None:
        with self._lock:
            self._live.pop(run_id, None)

    def _run(self, run: AskRun, planner: Planner, videos: Sequence[Video | StoredVideo]) -> Answer:
        def on_step(step: Step) -> None:
            if run.cancelled.is_set():
                raise AskCancelledError(f"{run.id}: the client went away")
            run.events.publish("step", shown_step(step, run.spec.choices))

        try:
            if run.cancelled.is_set():
                raise AskCancelledError(f"{run.id}: the client went away before it started")
            run.events.publish("started", {"ask_id": run.id})
            spec = run.spec
            started = time.perf_counter()
            with stopping_on(run.cancelled):  # a cancelled question's model calls stop between draws
                answer = self._ask(list(videos), spec.question, list(spec.choices) if spec.choices else None,
                                   planner=planner, on_step=on_step, knowledge=spec.knowledge, budget=run.budget,
                                   check=spec.check_answer, glance=spec.glance)
            if self._after is not None and answer.artifacts.get("coverage"):
                for video_id, job_id in self._after(answer, videos).items():
                    answer.artifacts["coverage"][video_id]["completion_job"] = job_id
        except AskCancelledError:
            log.info("%s cancelled: its client disconnected", run.id)
            run.events.publish("error", CANCELLED)
            raise
        except Exception as error:
            if not run.cancelled.is_set():
                log.warning("%s failed: %s", run.id, error, exc_info=not isinstance(error, VidagentError))
                run.events.publish("error", error_body(error))
                raise
            log.info("%s cancelled during a model call: its client disconnected (%s)", run.id, error)
            run.events.publish("error", CANCELLED)
            raise AskCancelledError(f"{run.id}: the client went away") from error
        log.info("%s answered in %.1f s (%s, %d LLM calls, %d cached)", run.id, time.perf_counter() - started,
                 answer.planner, answer.usage.llm_calls, answer.usage.cached_calls)
        run.events.publish("answer", shown_answer_data(answer.to_dict()))
        return answer
