"""Runs the frame stages of one build as a pipeline: this thread decodes, each stage works on
its own thread, so decoding, detection (whose Node workers run outside Python) and OCR overlap.

- One decoding pass: the union of the stages' sample times is decoded once and each frame goes
  to every stage that asked for it (a bounded queue per stage keeps memory flat).
- Near-duplicates: a stage with ``reuse`` limits runs its models only on frames that differ from
  the last frame it ran them on (``vidagent.video.change``); a frame that does not reuses that
  frame's result; a stage that follows change (``ChangeLimits.sparse``) also reuses it for a frame
  that stays still soon after. The decision depends only on pixels and sample times, and frames
  finished by an interrupted build are decoded again to replay it, so a resumed build equals an
  uninterrupted one.
- Checkpoints: each processed batch (with the duplicates it resolved) is saved at once, so a
  killed build resumes where it stopped.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from tqdm import tqdm

from vidagent.memory.stages.base import FrameStage
from vidagent.memory.store import Library
from vidagent.video.change import ChangeLimits, reuses, thumbnail
from vidagent.video.video import SampledFrame, Video

log = logging.getLogger(__name__)

QUEUE_BATCHES = 2  # batches a stage's inbox holds before decoding waits for it
_POLL_S = 0.2


@dataclass
class StageOutcome:
    """What a frame stage produced: one result per sample time, the seconds its models took,
    and how many frames reused an earlier frame's result."""

    results: dict[float, Any]
    seconds: float = 0.0
    reused: int = 0


@dataclass
class _Run:
    """One stage's share of the pipeline."""

    stage: FrameStage
    config: dict[str, Any]
    reuse: ChangeLimits | None
    wanted: set[float]
    outcome: StageOutcome
    inbox: queue.Queue = field(default_factory=queue.Queue)
    key: np.ndarray | None = None  # thumbnail of the last frame the models ran on (decoding thread)
    key_time: float | None = None
    error: BaseException | None = None


class FramePipeline:
    """Builds the per-frame results of several frame stages of one video."""

    def __init__(self, library: Library, video: Video, progress: bool,
                 on_frames: Callable[[int, int], None] | None = None) -> None:
        """``on_frames(done, total)`` is told, from the stages' threads, each time frames are finished
        (for a progress bar that moves by frames, not by stages)."""
        self.library = library
        self.video = video
        self.progress = progress
        self.on_frames = on_frames
        self._stop = threading.Event()
        self._frames_lock = threading.Lock()
        self._frames_done = self._frames_total = 0

    def run(self, stages: Sequence[FrameStage]) -> dict[str, StageOutcome]:
        video_id = self.video.content_hash
        runs: list[_Run] = []
        for stage in stages:
            config = stage.config()
            wanted = set(stage.frame_times(self.video))
            done: dict[float, Any] = {}
            for chunk in self.library.checkpoints(video_id, stage.name, config):
                # a result at a time the stage no longer samples (its sampling grid changed) is not used
                done.update((float(t), result) for t, result in chunk if float(t) in wanted)
            runs.append(_Run(stage, config, stage.reuse, wanted,
                             StageOutcome(done), queue.Queue(maxsize=QUEUE_BATCHES * stage.batch_size)))
        total = sum(len(run.wanted) for run in runs)
        finished = sum(len(run.wanted & set(run.outcome.results)) for run in runs)
        self._frames_done, self._frames_total = finished, total
        names = ", ".join(stage.name for stage in stages)
        bar = tqdm(total=total, initial=finished, unit="frame", desc=f"indexing {self.video.path.name} ({names})",
                   disable=not self.progress, leave=False)
        threads = [threading.Thread(target=self._work, args=(run, bar), daemon=True, name=f"stage-{run.stage.name}")
                   for run in runs]
        try:
            for thread in threads:
                thread.start()
            self._decode(runs)
        except BaseException:
            self._stop.set()  # the stages drop what is queued; their finished batches stay checkpointed
            raise
        finally:
            for run in runs:
                self._put(run, None, force=True)
            for thread in threads:
                thread.join()
            bar.close()
        for run in runs:
            if run.error is not None:
                raise run.error
        return {run.stage.name: run.outcome for run in runs}

    # -- the decoding thread ---------------------------------------------------------------------
    def _decode(self, runs: list[_Run]) -> None:
        """Hand each decoded frame to the stages that want it (or tell them whose result it reuses)."""
        todo = [run for run in runs if run.wanted - set(run.outcome.results)]
        if not todo:
            return
        # Frames an earlier build finished are decoded again only where a stage decides about
        # near-duplicates (the decision replays from the start); otherwise only the missing ones.
        times: set[float] = set()
        for run in todo:
            times |= run.wanted if run.reuse else run.wanted - set(run.outcome.results)
        max_side = max(run.stage.max_side for run in todo)
        for frame in self.video.frames_at(sorted(times), max_side=max_side, one_thread=True):
            if self._stop.is_set():
                return
            small = thumbnail(frame.image) if any(run.reuse for run in todo) else None
            for run in todo:
                if frame.time_s not in run.wanted:
                    continue
                finished = frame.time_s in run.outcome.results
                if run.reuse is not None and small is not None:
                    if run.key is not None and run.key_time is not None and \
                            reuses(run.key, small, frame.time_s - run.key_time, run.reuse):
                        if not finished:
                            self._put(run, ("copy", frame.time_s, run.key_time))
                        continue
                    run.key, run.key_time = small, frame.time_s
                if not finished:
                    self._put(run, ("frame", frame))

    def _put(self, run: _Run, item: Any, *, force: bool = False) -> None:
        while True:
            if self._stop.is_set() and not force:
                return
            try:
                run.inbox.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    # -- a stage's thread --------------------------------------------------------------------------
    def _work(self, run: _Run, bar: tqdm) -> None:
        pending: list[SampledFrame] = []
        waiting: dict[float, list[float]] = {}  # a pending key frame -> the frames that reuse its result
        resolved: list[float] = []  # reused results not checkpointed yet
        results = run.outcome.results
        video_id = self.video.content_hash

        def save(times: list[float]) -> None:
            if times:
                chunk = [[t, results[t]] for t in sorted(times)]
                self.library.save_checkpoint(video_id, run.stage.name, run.config, chunk[0][0], chunk)
                bar.update(len(times))
                with self._frames_lock:  # counted here: a disabled tqdm bar counts nothing
                    self._frames_done += len(times)
                    done, total = self._frames_done, self._frames_total
                if self.on_frames is not None:
                    self.on_frames(done, total)

        def flush() -> None:
            nonlocal pending, resolved
            if pending:
                started = time.perf_counter()
                outputs = run.stage.process(pending)
                run.outcome.seconds += time.perf_counter() - started
                chunk: list[float] = []
                for frame, output in zip(pending, outputs):
                    results[frame.time_s] = output
                    chunk.append(frame.time_s)
                    for copy in waiting.pop(frame.time_s, []):
                        results[copy] = output
                        chunk.append(copy)
                save(chunk + resolved)
                pending, resolved = [], []
            elif resolved:
                save(resolved)
                resolved = []

        while True:
            item = run.inbox.get()
            if item is None:
                break
            if run.error is not None or self._stop.is_set():
                continue  # drain, so the decoding thread never blocks on a stage that failed
            try:
                if item[0] == "frame":
                    pending.append(item[1])
                    if len(pending) >= run.stage.batch_size:
                        flush()
                else:
                    _, time_s, key_time = item
                    run.outcome.reused += 1
                    if key_time in results:
                        results[time_s] = results[key_time]
                        resolved.append(time_s)
                    else:
                        waiting.setdefault(key_time, []).append(time_s)
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                run.error = error
                self._stop.set()
        if run.error is None and not self._stop.is_set():
            try:
                flush()
            except BaseException as error:  # noqa: BLE001
                run.error = error
                self._stop.set()
