"""The same evaluation, distributed over a Ray cluster (``vidagent eval --ray [ADDRESS]``).

Each Ray actor holds one ``QuestionWorker`` (its own models, loaded once). Videos are handed out
one at a time: an actor gets all the questions of a video (so the memory is built once, on that
actor) and its next video when it has answered them, so fast and slow actors share the work.
Rows stream back to the driver one question at a time, and the driver writes the results file.

Every node must have vidagent (with its models) installed, and see the videos at the same paths
(a shared file system) -- the driver sends paths, not video bytes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator, Sequence

from vidagent.eval.backends import Group, QuestionWorkers
from vidagent.eval.errors import EvalError
from vidagent.eval.worker import WorkerConfig
from vidagent.parallel import on_ray


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
        return on_ray(QuestionWorkers(self.config), groups, workers=self.workers, address=self.address)
