"""Where questions are answered: in this process, or in local worker processes.

A backend takes groups of questions (one group per video, so each video's memory is built once,
by one worker, and reused for its questions) and yields one result row per question as soon as it
is ready. The Ray backend (``ray_backend.py``) has the same shape.
"""

from __future__ import annotations

from typing import Any, Iterator, Protocol, Sequence

from vidagent.eval.dataset import EvalItem
from vidagent.eval.errors import EvalError
from vidagent.eval.worker import QuestionWorker, WorkerConfig
from vidagent.parallel import on_processes

Group = Sequence[EvalItem]


class Backend(Protocol):
    def run(self, groups: Sequence[Group]) -> Iterator[dict[str, Any]]: ...


class SerialBackend:
    """Answers every question in this process, one after another."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config

    def run(self, groups: Sequence[Group]) -> Iterator[dict[str, Any]]:
        worker = QuestionWorker(self.config)
        try:
            for group in groups:
                for item in group:
                    yield worker.answer(item)
        finally:
            worker.close()


class QuestionWorkers:
    """A picklable factory of question workers (for ``vidagent.parallel``'s processes and Ray actors)."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config

    def __call__(self) -> QuestionWorker:
        return QuestionWorker(self.config)


class ProcessBackend:
    """``workers`` local processes (spawned, each with its own models), pulling one video at a time."""

    def __init__(self, config: WorkerConfig, workers: int) -> None:
        if workers < 1:
            raise EvalError("--workers must be at least 1")
        self.config = config
        self.workers = workers

    def run(self, groups: Sequence[Group]) -> Iterator[dict[str, Any]]:
        return on_processes(QuestionWorkers(self.config), groups, self.workers)
