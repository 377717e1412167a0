"""The same evaluation, distributed over a Ray cluster (``vidagent eval --ray [ADDRESS]``).

Each Ray actor holds one ``QuestionWorker`` (its own models, loaded once). Videos are handed out
one at a time: an actor gets all the questions of a video (so the memory is built once, on that
actor) and its next video when it has answered them, so fast and slow actors share the work.
Rows stream back to the driver one question at a time, and the driver writes the results file.

Every node must have vidagent (with its models) installed, and see the videos at the same paths
(a shared file system) -- the driver sends paths, not video bytes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Any, Iterator, Sequence

from vidagent.eval.backends import Group
from vidagent.eval.errors import EvalError
from vidagent.eval.worker import QuestionWorker, WorkerConfig

LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024


class _RayWorker:
    """The actor: a question worker that lives as long as the run."""

    def __init__(self, config: WorkerConfig) -> None:
        self.worker = QuestionWorker(config)

    def answer(self, item: Any) -> dict[str, Any]:
        return self.worker.answer(item)

    def close(self) -> None:
        self.worker.close()


class RayBackend:
    """Answers questions on ``workers`` Ray actors (one CPU each, so one LLM thread unless set).

    ``address`` is a cluster address (``ray://host:10001``, ``host:6379``, ``auto``); ``None`` connects to
    ``$RAY_ADDRESS`` if set, else starts a local Ray instance with ``workers`` CPUs for this run.
    ``workers=None`` uses one actor per CPU of the cluster.
    """

    def __init__(self, config: WorkerConfig, *, workers: int | None = None, address: str | None = None) -> None:
        if workers is not None and workers < 1:
            raise EvalError("--workers must be at least 1")
        if config.settings.llm.threads is None:  # an actor holds one CPU: its LLM uses one thread
            config = replace(config, settings=config.settings.with_llm(threads=1))
        self.config = config
        self.workers = workers
        self.address = address or None

    def run(self, groups: Sequence[Group]) -> Iterator[dict[str, Any]]:
        if not groups:
            return
        try:
            import ray
            from ray.exceptions import RayError
        except ImportError:
            raise EvalError("Ray is not installed: pip install 'vidagent[eval]'") from None
        started_here = False
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
            try:
                if self.address:
                    ray.init(address=self.address, **options)
                else:
                    import os

                    if not os.environ.get("RAY_ADDRESS"):
                        options.update(num_cpus=self.workers or os.cpu_count() or 1,
                                       object_store_memory=LOCAL_OBJECT_STORE_BYTES)
                    ray.init(**options)
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise EvalError(f"cannot start or reach Ray ({self.address or 'local'}): {error}") from None
            started_here = True
        count = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        count = min(count, len(groups))
        actor_class = ray.remote(num_cpus=1, max_restarts=0)(_RayWorker)
        actors = [actor_class.remote(self.config) for _ in range(count)]
        waiting = deque(groups)
        pending: dict[Any, int] = {}
        outstanding = [0] * count

        def hand_out(actor: int) -> None:
            for item in waiting.popleft():
                pending[actors[actor].answer.remote(item)] = actor
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
                    row = ray.get(ready[0])
                except RayError as error:
                    first_line = (str(error).strip().splitlines() or [error.__class__.__name__])[-1]
                    raise EvalError(f"a Ray worker failed: {first_line}") from None
                yield row
                if outstanding[actor] == 0 and waiting:
                    hand_out(actor)
        finally:
            for handle in actors:
                if not pending:  # a finished run closes its sessions; an interrupted one does not wait
                    try:
                        ray.get(handle.close.remote(), timeout=30)
                    except Exception:  # noqa: BLE001 - best effort: the actor is killed next anyway
                        pass
                ray.kill(handle)
            if started_here:
                ray.shutdown()
