"""Ask while indexing (issue 28, item 1): a first memory of the whole video at once, refined where a
question looks, completed later.

Design
------
A question on a video whose temporal memory is not built need not wait for it. ``Glance`` makes a
*partial memory* in three moves:

1. **Coarse pass (the first look).** Of the frames the full ``frames`` stage samples (one per 2-s
   segment), one every ``every_s`` seconds (a *pick*, the middle segment of each stretch) is looked at
   through the keyframe nearest to it within half an interval: only keyframes are decoded (0.8 s for a
   20-minute H.264 video, against 20-35 s to decode every frame), and the describer runs on those frames,
   each kept for the segment that shows it. Where no keyframe lies that near (a stream with sparse
   keyframes) or the describer reads whole segments (a vision chat model), the pick's own frames are decoded
   from a seek. With ``speech``, the speech stage runs beside it, whole, as in a
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

Equal to a full index where refined. The full build's near-duplicate reuse makes a frame's result that
of the last frame its models ran on (the *key* frame), which depends on every frame before it; the first
refinement therefore replays that decision over all sample times (one decoding pass, a thumbnail each, no
model), and a window is described together with the key frames its frames take their results from. Every
result a refinement computes is the result the full build computes for that sample time, so partial and
full memories agree on the refined parts and a completed memory is byte-for-byte a fresh full one. The
first look's results are not (another frame of the stretch than the one the full build describes there):
they are kept out of the checkpoints a completion resumes from, and a refinement replaces them.

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
import threading
import time
from bisect import bisect_right
from itertools import groupby
from typing import Any, Callable

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
        self.segment_of = dict(self.planned)
        segments = video.segments(builder.settings.segment_seconds)
        self.segment_starts = [segment.start_s for segment in segments]
        first_sample: dict[int, float] = {}
        for time_s, segment_id in self.planned:
            first_sample.setdefault(segment_id, time_s)
        self.first_sample = [first_sample[segment.segment_id] for segment in segments]
        self.keys: dict[float, float] = {}  # sample time -> the key frame whose result it takes
        self.results: dict[float, Any] = {}  # sample time -> its frame result (the full build's)
        self.glimpses: dict[float, Any] = {}  # sample time -> the result of a frame near it (the first look)
        self.chain_replayed = False
        self.seconds = 0.0  # model time spent

    # -- the faces ----------------------------------------------------------------------------
    def needed(self) -> bool:
        """Whether the video's temporal memory is missing (a glance has something to do), and a glance
        can make it (not with ``motion`` perception, whose stage it does not build)."""
        missing = self.builder.missing_stages(self.video, TEMPORAL_STAGES)
        return "frames" in missing and "motion" not in self.builder.settings.perception

    def open(self) -> "GlancedMemory":
        """The partial memory after the coarse pass (a stored partial memory is taken up again: its
        refined results are kept, the first look is taken again)."""
        started = time.perf_counter()
        self.library.add_video(self.video.info)
        for chunk in self.library.checkpoints(self.video.content_hash, "frames", self.config):
            self.results.update((float(t), result) for t, result in chunk)
        step = max(1, round(self.every_s / self.builder.settings.segment_seconds))
        picks = {t for t, segment_id in self.planned if segment_id % step == step // 2} or \
            {self.planned[len(self.planned) // 2][0]}
        speech = _Beside(lambda: self.builder.build(self.video, ["speech"], progress=False)) \
            if self.speech and self.builder.missing_stages(self.video, ["speech"]) else None
        self._glimpse(picks)
        if speech is not None:
            speech.join()
        self._write()
        log.info("%s: glanced at %d frames of %d in %.1f s", self.video.path.name,
                 len(self.results) + len(self.glimpses), len(self.planned), time.perf_counter() - started)
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
        self._replay_chain()
        todo = [t for t in todo if t not in self.results]
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
    def _glimpse(self, picks: set[float]) -> None:
        """The first look: for each pick not described yet, the keyframe nearest to it within half an
        interval (only keyframes are decoded: about a second for 20 minutes of video), or the frame at the
        pick (decoded from a seek) where no keyframe lies that near or the describer reads whole segments;
        each described and kept as the result of the sample time of the segment that shows it. Another
        frame of the stretch than the one the full build describes there, so these results are kept apart
        from the checkpoints a completion resumes from, and a refined window replaces them."""
        todo = sorted(t for t in picks if t not in self.results and t not in self.glimpses)
        if not todo:
            return
        max_side = self.frames.max_side
        frames: dict[float, SampledFrame] = {}
        if self.frames.grouped is None:
            near = list(self.video.keyframes_near(todo, self.every_s / 2, max_side=max_side))
            for frame in (frame for _, frame in near if frame is not None):
                sample = self._sample_time(frame.time_s)
                if sample not in self.results:
                    frames.setdefault(sample, SampledFrame(sample, frame.image))
            todo = [pick for pick, frame in near if frame is None]
        for _, members in groupby(todo, key=self.segment_of.__getitem__):
            times = list(members)
            frames.update((frame.time_s, frame) for frame in self.video.frames_at(times, max_side=max_side, seek=True))
        ordered = [frames[t] for t in sorted(frames)]
        bar = tqdm(total=len(ordered), unit="frame", desc=f"glancing at {self.video.path.name}",
                   disable=not self.progress, leave=False)
        with bar:
            for first in range(0, len(ordered), self.frames.batch_size):
                batch = ordered[first:first + self.frames.batch_size]
                self.glimpses.update(zip((frame.time_s for frame in batch), self._timed_process(batch)))
                bar.update(len(batch))

    def _sample_time(self, time_s: float) -> float:
        """The (first) sample time of the segment showing ``time_s``."""
        index = max(0, bisect_right(self.segment_starts, time_s + 1e-6) - 1)
        return self.first_sample[index]

    def _replay_chain(self) -> None:
        """Which key frame each sample time takes its result from, as the full build's near-duplicate
        chain decides it: one decoding pass over every sample time (a thumbnail each, no model), done
        once, when a window is first refined (a first answer that refines nothing never pays for it)."""
        if self.chain_replayed:
            return
        self.chain_replayed = True
        reuse = self.frames.reuse
        if reuse is not None:
            key: tuple[float, Any] | None = None  # time, thumbnail
            times = [t for t, _ in self.planned]
            bar = tqdm(total=len(times), unit="frame", desc=f"reading {self.video.path.name}",
                       disable=not self.progress, leave=False)
            with bar:
                for frame in self.video.frames_at(times, max_side=self.frames.max_side):
                    bar.update()
                    small = thumbnail(frame.image)
                    if key is None or not same_view(key[1], small, reuse):
                        key = (frame.time_s, small)
                    self.keys[frame.time_s] = key[0]
        self.keys.update((t, t) for t, _ in self.planned if t not in self.keys)
        self._save_copies()

    # -- frame results ----------------------------------------------------------------------------
    def _describe(self, frames: list[SampledFrame]) -> None:
        """Run the describer on key frames and keep their results (checkpointed at once)."""
        fresh = [frame for frame in frames if frame.time_s not in self.results]
        if not fresh:
            return
        chunk = []
        for frame, output in zip(fresh, self._timed_process(fresh)):
            self.results[frame.time_s] = output
            chunk.append([frame.time_s, output])
        self._checkpoint(chunk)

    def _timed_process(self, frames: list[SampledFrame]) -> list[Any]:
        """The describer's results for ``frames``, its time counted as the glance's model time."""
        started = time.perf_counter()
        outputs = self.frames.process(frames)
        self.seconds += time.perf_counter() - started
        return outputs

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
                                 self.frames.rows(self.video, self.glimpses | self.results, partial=True), self.seconds,
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


def _forget(memory: VideoMemory, names: tuple[str, ...]) -> None:
    """Drop cached reads so the next one sees what was written since."""
    for name in names:
        memory.__dict__.pop(name, None)
