"""Ask while indexing (issue 28, item 1): a first memory of the whole video at once, refined where a
question looks, completed later.

Design
------
A question on a video whose temporal memory is not built need not wait for it. ``Glance`` makes a
*partial memory* in three moves:

1. **Coarse pass.** One decoding pass over the video. Of the frames the full ``frames`` stage samples
   (one per 2-s segment), one every ``every_s`` seconds (a *pick*, the middle segment of each stretch)
   is described by the same describer. With ``speech``, the speech stage runs beside it, whole, as in a
   full build; it is off by default: Whisper takes 0.1-0.15x real time over speech (``perception.speech``),
   2-3 minutes for 20 minutes of talk, more than the whole glance, so a glance says "no speech yet" and
   the completion transcribes it (a speech stage already built is used). The result is every segment of the
   video, those nothing was seen or said in yet left empty (no text, a zero embedding that retrieval
   never ranks), so segment ids are those of the full memory from the first answer on.
2. **Refinement.** A tool that reads a window of segments (``caption_retrieval`` over a range it shows
   whole, ``visual_question_answering`` around a segment, AssistGPT's narration, narration grounding and
   on-screen text modules over a clip they read whole: ``vidagent.tools.refining``) first asks the memory
   to ``refine`` it: every full-rate frame of the window is described, and the partial stages are written
   again. This is DoraemonGPT's task-related memory in time as well as in kind: work follows the planner's
   reading.
   The tool's observation names what was refined for it (``artifacts["refined"]``), so the trace shows it.
3. **Completion.** ``complete`` is a full build (``MemoryBuilder.build``); it resumes from what the glance
   described, and does only the rest.

Equal to a full index where refined. Every frame result the glance computes is the result the full
build computes for that sample time, so partial and full memories agree on the refined parts and a
completed memory is byte-for-byte a fresh full one. The full build's near-duplicate reuse makes a
frame's result that of the last frame its models ran on (the *key* frame), which depends on every
frame before it; the coarse pass therefore replays that decision over all sample times (a thumbnail
each, no model) while it decodes, and describes a pick's key frame, not the pick itself, where the
two differ. Any sample time whose key is described gets the key's result, as in the full build.

Nothing half-written. Frame results are kept as checkpoints of the full ``frames`` stage (its own
config key), exactly what an interrupted full build leaves, which is how the completion resumes. The
partial ``frames`` and ``segments`` rows are written as stages whose config adds a ``glance`` entry (the
coverage: sampling interval, windows described at the full rate, speech), so their config keys differ
from a full build's: no reader takes them for a full memory (``has_stage`` is false, the next full build
rewrites them), and ``VideoMemory.coverage`` reads them back in any process. Each write is one
transaction per stage, as for every stage.

Coverage is said with the answer: ``Answer.artifacts["coverage"]`` (the library, ``--json``, the CLI's
``Coverage:`` line) holds ``answered from 0:00-20:00 sampled every 10 s; 3:10-3:40 in full; ...`` and
the windows refined for the question.

Not covered yet: the object memory (its tools build it whole, as before), motion (a glance falls back
to the full build when ``motion`` perception is on), and the other tools that read segments (they read
the partial memory as it is, and its coverage is stated).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Callable, Iterable

from tqdm import tqdm

from vidagent.memory.builder import TEMPORAL_STAGES, MemoryBuilder
from vidagent.memory.coverage import DEFAULT_EVERY_S, Coverage, Window, merge_windows
from vidagent.memory.stages.frames import FramesStage
from vidagent.memory.stages.segments import SegmentsStage
from vidagent.memory.store import GLANCE_KEY
from vidagent.memory.video_memory import VideoMemory
from vidagent.video.change import same_view, thumbnail
from vidagent.video.video import SampledFrame, Video

log = logging.getLogger(__name__)


class Glance:
    """The partial memory of one video: its coarse pass, its refinement, its completion."""

    def __init__(self, builder: MemoryBuilder, video: Video, every_s: float = DEFAULT_EVERY_S, *,
                 speech: bool = False, progress: bool = False) -> None:
        if every_s <= 0:
            raise ValueError("a glance samples at a positive interval")
        self.builder, self.video, self.every_s = builder, video, every_s
        self.speech, self.progress = speech, progress
        self.library = builder.library
        self.frames: FramesStage = builder.stage("frames")  # type: ignore[assignment]
        self.config = self.frames.config()
        self.planned = self.frames.planned(video)  # (time_s, segment_id) of every full-rate frame
        self.keys: dict[float, float] = {}  # sample time -> the key frame whose result it takes
        self.results: dict[float, Any] = {}  # sample time -> its frame result (the full build's)
        self.seconds = 0.0  # model time spent

    # -- the faces ----------------------------------------------------------------------------
    def needed(self) -> bool:
        """Whether the video's temporal memory is missing (a glance has something to do), and a glance
        can make it (not with ``motion`` perception, whose stage it does not build)."""
        missing = self.builder.missing_stages(self.video, TEMPORAL_STAGES)
        return "frames" in missing and "motion" not in self.builder.settings.perception

    def open(self) -> "GlancedMemory":
        """The partial memory after the coarse pass (a stored partial memory is taken up again: its
        results are kept, the near-duplicate chain is replayed)."""
        started = time.perf_counter()
        self.library.add_video(self.video.info)
        for chunk in self.library.checkpoints(self.video.content_hash, "frames", self.config):
            self.results.update((float(t), result) for t, result in chunk)
        step = max(1, round(self.every_s / self.builder.settings.segment_seconds))
        picks = {t for t, segment_id in self.planned if segment_id % step == step // 2} or \
            {self.planned[len(self.planned) // 2][0]}
        speech = _Beside(lambda: self.builder.build(self.video, ["speech"], progress=False)) \
            if self.speech and self.builder.missing_stages(self.video, ["speech"]) else None
        self._scan(picks)
        if speech is not None:
            speech.join()
        self._write()
        log.info("%s: glanced at %d frames of %d in %.1f s", self.video.path.name, len(self.results),
                 len(self.planned), time.perf_counter() - started)
        return GlancedMemory(self)

    def refine(self, start_s: float, end_s: float) -> list[Window]:
        """Describe every full-rate frame of the segments overlapping ``[start_s, end_s]``; returns the
        windows (segment bounds) that were not described before, now described."""
        window = self._segment_window(start_s, end_s)
        if window is None:
            return []
        todo = [t for t, _ in self.planned if window[0] <= t < window[1] and t not in self.results]
        if not todo:
            return []
        before = self._full_windows()
        needed = sorted({self.keys[t] for t in todo} - set(self.results))
        log.info("%s: refining %.1f-%.1f s (%d frames)", self.video.path.name, *window, len(needed))
        frames = list(self.video.frames_at(needed, max_side=self.frames.max_side, seek=True))
        for first in range(0, len(frames), self.frames.batch_size):
            self._describe(frames[first:first + self.frames.batch_size])
        self._save_copies()
        self._write()
        after = self._full_windows()
        return [part for full in after for part in Coverage(0, 1, before).missing(full)]

    def complete(self) -> VideoMemory:
        """The full temporal memory, resumed from what the glance described."""
        return self.builder.build(self.video, TEMPORAL_STAGES, progress=self.progress)

    def coverage(self) -> Coverage:
        speech = not self.builder.missing_stages(self.video, ["speech"])
        return Coverage(self.video.duration_s, self.every_s, self._full_windows(), speech)

    # -- the coarse pass ----------------------------------------------------------------------
    def _scan(self, picks: set[float]) -> None:
        """One pass over every full-rate sample time: the near-duplicate chain replayed as the full
        build makes it, and the key frames the picks take their results from described on a thread."""
        worker = _Describer(self)
        reuse = self.frames.reuse
        key: tuple[float, Any, SampledFrame] | None = None  # time, thumbnail, frame
        queued: set[float] = set()
        times = [t for t, _ in self.planned] if reuse is not None else \
            sorted(t for t in picks if t not in self.results)
        bar = tqdm(total=len(times), unit="frame", desc=f"glancing at {self.video.path.name}",
                   disable=not self.progress, leave=False)
        try:
            for frame in self.video.frames_at(times, max_side=self.frames.max_side):
                bar.update()
                if reuse is None:
                    self.keys[frame.time_s] = frame.time_s
                    worker.put(frame)
                    continue
                small = thumbnail(frame.image)
                if key is None or not same_view(key[1], small, reuse):
                    key = (frame.time_s, small, frame)
                self.keys[frame.time_s] = key[0]
                if frame.time_s in picks and key[0] not in self.results and key[0] not in queued:
                    queued.add(key[0])
                    worker.put(key[2])
        finally:
            worker.close()
            bar.close()
        self.keys.update((t, t) for t, _ in self.planned if t not in self.keys)
        self._save_copies()

    # -- frame results ----------------------------------------------------------------------------
    def _describe(self, frames: list[SampledFrame]) -> None:
        """Run the describer on key frames and keep their results (checkpointed at once)."""
        fresh = [frame for frame in frames if frame.time_s not in self.results]
        if not fresh:
            return
        started = time.perf_counter()
        outputs = self.frames.process(fresh)
        self.seconds += time.perf_counter() - started
        chunk = []
        for frame, output in zip(fresh, outputs):
            self.results[frame.time_s] = output
            chunk.append([frame.time_s, output])
        self._checkpoint(chunk)

    def _save_copies(self) -> None:
        """Every sample time whose key frame is described takes its result (checkpointed)."""
        chunk = [[t, self.results[self.keys[t]]] for t, _ in self.planned
                 if t not in self.results and self.keys.get(t) in self.results]
        for t, result in chunk:
            self.results[t] = result
        self._checkpoint(chunk)

    def _checkpoint(self, chunk: list[list[Any]]) -> None:
        # a chunk is keyed by its first time: each time is kept once, so no chunk replaces another
        if chunk:
            chunk.sort(key=lambda item: item[0])
            self.library.save_checkpoint(self.video.content_hash, "frames", self.config, chunk[0][0], chunk)

    # -- the partial stages -------------------------------------------------------------------
    def _write(self) -> None:
        """Write the partial ``frames`` and ``segments`` stages, each under a config naming its coverage."""
        video_id = self.video.content_hash
        coverage = {GLANCE_KEY: self.coverage().to_dict()}
        self.library.write_stage(video_id, "frames", self.config | coverage,
                                 self.frames.rows(self.video, self.results, partial=True), self.seconds,
                                 keep_checkpoints=True)
        segments: SegmentsStage = self.builder.stage("segments")  # type: ignore[assignment]
        stored = self.library.stage_config(video_id, "segments") or {}
        same = {k: v for k, v in stored.items() if k != GLANCE_KEY} == segments.config() and GLANCE_KEY in stored
        known = {s.segment_id: s for s in self.library.segments(video_id)} if same else {}
        started = time.perf_counter()
        rows = segments.rows(self.video, self.library, partial=True, known=known)
        self.library.write_stage(video_id, "segments", segments.config() | coverage, rows,
                                 time.perf_counter() - started, keep_checkpoints=True)

    def _full_windows(self) -> tuple[Window, ...]:
        """The segments whose every full-rate frame is described, joined into windows."""
        bounds = {s.segment_id: (s.start_s, s.end_s) for s in self.video.segments(self.builder.settings.segment_seconds)}
        pending = {segment_id for t, segment_id in self.planned if t not in self.results}
        return merge_windows([window for segment_id, window in bounds.items() if segment_id not in pending])

    def _segment_window(self, start_s: float, end_s: float) -> Window | None:
        """The bounds of the segments overlapping ``[start_s, end_s]`` (the one holding ``start_s`` when
        they are equal)."""
        segments = self.video.segments(self.builder.settings.segment_seconds)
        hit = [s for s in segments if s.end_s > start_s + 1e-6 and s.start_s < max(end_s, start_s + 1e-3) - 1e-6]
        return (hit[0].start_s, hit[-1].end_s) if hit else None


class GlancedMemory(VideoMemory):
    """A partial memory that refines itself where it is read (``refine``), and remembers what it
    refined since it was opened (``coverage.refined``)."""

    def __init__(self, glance: Glance) -> None:
        super().__init__(glance.video, glance.library)
        self.glance = glance
        self.refined: list[Window] = []

    @property
    def coverage(self) -> Coverage | None:
        stored = super().coverage
        if stored is None:  # completed since
            return None
        return Coverage(stored.duration_s, stored.every_s, stored.full, stored.speech, merge_windows(self.refined))

    def refine(self, start_s: float, end_s: float) -> list[Window]:
        windows = self.glance.refine(start_s, end_s)
        if windows:
            self.refined.extend(windows)
            _forget(self, ("segments", "frames", "speech", "on_screen_text", "_embedding_matrix"))
        return windows

    def complete(self) -> VideoMemory:
        """The full memory (see ``Glance.complete``)."""
        return self.glance.complete()


class _Describer:
    """Describes the frames handed to it on a thread of its own, in the frames stage's batches."""

    def __init__(self, glance: Glance) -> None:
        self.glance = glance
        self.inbox: queue.Queue[SampledFrame | None] = queue.Queue(maxsize=2 * glance.frames.batch_size)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, daemon=True, name="glance-describer")
        self.thread.start()

    def put(self, frame: SampledFrame) -> None:
        if self.error is not None:
            raise self.error
        self.inbox.put(frame)

    def close(self) -> None:
        self.inbox.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _main(self) -> None:
        batch: list[SampledFrame] = []
        for frame in _until_none(self.inbox):
            if self.error is not None:
                continue
            batch.append(frame)
            if len(batch) >= self.glance.frames.batch_size:
                self._run(batch)
                batch = []
        if batch and self.error is None:
            self._run(batch)

    def _run(self, batch: list[SampledFrame]) -> None:
        try:
            self.glance._describe(batch)
        except BaseException as error:  # noqa: BLE001 - raised again by put() and close()
            self.error = error


class _Beside:
    """Runs a function on a thread; ``join`` waits for it and raises what it raised."""

    def __init__(self, function: Callable[[], object]) -> None:
        self.error: BaseException | None = None

        def main() -> None:
            try:
                function()
            except BaseException as error:  # noqa: BLE001 - raised again by join()
                self.error = error

        self.thread = threading.Thread(target=main, daemon=True, name="glance-speech")
        self.thread.start()

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def _until_none(inbox: queue.Queue) -> Iterable[Any]:
    while (item := inbox.get()) is not None:
        yield item


def _forget(memory: VideoMemory, names: tuple[str, ...]) -> None:
    """Drop cached reads so the next one sees what was written since."""
    for name in names:
        memory.__dict__.pop(name, None)
