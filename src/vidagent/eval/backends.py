"""Where questions are answered: in this process, or in local worker processes.

A backend takes groups of questions (one group per video, so each video's memory is built once,
by one worker, and reused for its questions) and yields one result row per question as soon as it
is ready. The Ray backend (``ray_backend.py``) has the same shape.
"""

from __future__ import annotations

import multiprocessing
import queue
from typing import Any, Iterator, Protocol, Sequence

from vidagent.eval.dataset import EvalItem
from vidagent.eval.errors import EvalError
from vidagent.eval.worker import QuestionWorker, WorkerConfig

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


def _process_main(config: WorkerConfig, tasks: Any, results: Any) -> None:
    """A worker process: take a video's questions, answer them, send each row back."""
    try:
        worker = QuestionWorker(config)
    except BaseException as error:  # noqa: BLE001 - reported to the parent as one line
        results.put(("fatal", f"{error.__class__.__name__}: {error}"))
        return
    try:
        while True:
            group = tasks.get()
            if group is None:
                break
            for item in group:
                results.put(("row", worker.answer(item)))
    finally:
        worker.close()
        results.put(("done", None))


class ProcessBackend:
    """``workers`` local processes (spawned, each with its own models), pulling one video at a time."""

    def __init__(self, config: WorkerConfig, workers: int) -> None:
        if workers < 1:
            raise EvalError("--workers must be at least 1")
        self.config = config
        self.workers = workers

    def run(self, groups: Sequence[Group]) -> Iterator[dict[str, Any]]:
        if not groups:
            return
        context = multiprocessing.get_context("spawn")
        tasks, results = context.Queue(), context.Queue()
        for group in groups:
            tasks.put(list(group))
        count = min(self.workers, len(groups))
        for _ in range(count):
            tasks.put(None)
        processes = [context.Process(target=_process_main, args=(self.config, tasks, results))
                     for _ in range(count)]
        for process in processes:
            process.start()
        finished = 0
        try:
            while finished < count:
                try:
                    kind, payload = results.get(timeout=1.0)
                except queue.Empty:
                    dead = [p for p in processes if p.exitcode not in (None, 0)]
                    if dead:
                        raise EvalError(f"a worker process died (exit code {dead[0].exitcode}); "
                                        "rerun the same command to resume") from None
                    continue
                if kind == "row":
                    yield payload
                elif kind == "done":
                    finished += 1
                else:
                    raise EvalError(f"a worker process could not start: {payload}")
        finally:
            for process in processes:
                if process.is_alive():
                    process.terminate()
            for process in processes:
                process.join(timeout=10)
