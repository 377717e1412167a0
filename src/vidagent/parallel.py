"""Work spread over local worker processes or Ray actors, each holding one long-lived worker
(its models load once), shared by ``vidagent index --workers/--ray`` and ``vidagent eval --ray``.

A worker is made by a picklable factory in its own process (or actor). Work comes in groups
(a video's questions; one video to index): every item of a group goes to the same worker, one
at a time, and whichever worker is free takes the next group, so fast and slow workers share
the work. One result per item streams back as soon as it is ready.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol, Sequence, TypeVar

from vidagent.errors import VidagentError

Item = TypeVar("Item")
Result = TypeVar("Result")
LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024


class Worker(Protocol[Item, Result]):
    def __call__(self, item: Item) -> Result: ...

    def close(self) -> None: ...


class WorkersError(VidagentError):
    """A worker process or Ray actor could not start, died, or Ray could not be reached."""

    exit_code = 6


def first_line(error: BaseException) -> str:
    """The last non-empty line of an error's text (Ray wraps the cause in a long traceback)."""
    return (str(error).strip().splitlines() or [error.__class__.__name__])[-1]


# ----------------------------------------------------------------------------- local processes


def _process_main(factory: Callable[[], Worker], tasks: Any, results: Any) -> None:
    try:
        worker = factory()
    except BaseException as error:  # noqa: BLE001 - reported to the parent as one line
        results.put(("fatal", f"{error.__class__.__name__}: {error}"))
        return
    try:
        while True:
            group = tasks.get()
            if group is None:
                break
            for item in group:
                results.put(("result", worker(item)))
    finally:
        worker.close()
        results.put(("done", None))


def on_processes(factory: Callable[[], Worker[Item, Result]], groups: Sequence[Sequence[Item]],
                 workers: int) -> Iterator[Result]:
    """Results of ``worker(item)`` for every item, computed on ``workers`` spawned processes."""
    if workers < 1:
        raise WorkersError("--workers must be at least 1")
    if not groups:
        return
    context = multiprocessing.get_context("spawn")
    tasks, results = context.Queue(), context.Queue()
    count = min(workers, len(groups))
    for group in groups:
        tasks.put(list(group))
    for _ in range(count):
        tasks.put(None)
    processes = [context.Process(target=_process_main, args=(factory, tasks, results)) for _ in range(count)]
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
                    raise WorkersError(f"a worker process died (exit code {dead[0].exitcode}); "
                                       "rerun the same command to resume") from None
                continue
            if kind == "result":
                yield payload
            elif kind == "done":
                finished += 1
            else:
                raise WorkersError(f"a worker process could not start: {payload}")
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=10)
        for channel in (tasks, results):
            channel.close()
            channel.join_thread()


# ----------------------------------------------------------------------------- Ray


@contextmanager
def ray_cluster(address: str | None, cpus: int | None) -> Iterator[Any]:
    """The ``ray`` module, connected: to ``address`` (``ray://host:10001``, ``host:6379``, ``auto``),
    else to ``$RAY_ADDRESS``, else to a local Ray instance started with ``cpus`` CPUs (all when
    ``None``) and shut down on exit. Already connected: used as it is."""
    try:
        import ray
    except ImportError:
        raise WorkersError("Ray is not installed: pip install 'vidagent[eval]'") from None
    started_here = False
    if not ray.is_initialized():
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        try:
            if address:
                ray.init(address=address, **options)
            else:
                if not os.environ.get("RAY_ADDRESS"):
                    options.update(num_cpus=cpus or os.cpu_count() or 1, object_store_memory=LOCAL_OBJECT_STORE_BYTES)
                ray.init(**options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise WorkersError(f"cannot start or reach Ray ({address or 'local'}): {error}") from None
        started_here = True
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


class _Actor:
    """A Ray actor holding one worker."""

    def __init__(self, factory: Callable[[], Worker]) -> None:
        self.worker = factory()

    def call(self, item: Any) -> Any:
        return self.worker(item)

    def close(self) -> None:
        self.worker.close()


def on_ray(factory: Callable[[], Worker[Item, Result]], groups: Sequence[Sequence[Item]], *,
           workers: int | None = None, address: str | None = None) -> Iterator[Result]:
    """Results of ``worker(item)`` for every item, computed on Ray actors of one CPU each (one per
    CPU of the cluster when ``workers`` is ``None``); an actor gets its next group when it has
    returned every result of the last one."""
    if workers is not None and workers < 1:
        raise WorkersError("--workers must be at least 1")
    if not groups:
        return
    with ray_cluster(address, workers) as ray:
        from ray.exceptions import RayError

        count = min(workers or max(1, int(ray.cluster_resources().get("CPU", 1))), len(groups))
        actor_class = ray.remote(num_cpus=1, max_restarts=0)(_Actor)
        actors = [actor_class.remote(factory) for _ in range(count)]
        waiting = deque(groups)
        pending: dict[Any, int] = {}
        outstanding = [0] * count

        def hand_out(actor: int) -> None:
            for item in waiting.popleft():
                pending[actors[actor].call.remote(item)] = actor
                outstanding[actor] += 1

        try:
            for actor in range(count):
                if waiting:
                    hand_out(actor)
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                actor = pending.pop(ready[0])
                outstanding[actor] -= 1
                try:
                    result = ray.get(ready[0])
                except RayError as error:
                    raise WorkersError(f"a Ray worker failed: {first_line(error)}") from None
                yield result
                if outstanding[actor] == 0 and waiting:
                    hand_out(actor)
        finally:
            for handle in actors:
                if not pending:  # a finished run closes its workers; an interrupted one does not wait
                    try:
                        ray.get(handle.close.remote(), timeout=30)
                    except Exception:  # noqa: BLE001 - best effort: the actor is killed next anyway
                        pass
                ray.kill(handle)
