"""Which of Whisper's lines were said, and which it wrote over sound without speech.

Whisper writes text where nobody speaks: silence became "You", applause "Yay!", wind "Thank you.",
reversed speech "Thank you so much for watching, and I'll see you next time." Three layers stop it,
each built on what the runtime (faster-whisper) itself measures:

1. Voice activity (Silero VAD, in ``speech.py``): audio without a voice never reaches Whisper.
2. Whisper's own decoding rules, applied to every line (``drop_reason``): a window Whisper thinks
   holds no speech (no-speech probability high *and* mean token log-probability low), and a window
   whose every decode Whisper rejected (log-probability below its fallback threshold, or text that
   still repeats itself, at every fallback temperature): the runtime keeps its least bad guess,
   a random sample that differs from run to run.
3. Stock phrases (``data/whisper_stock_phrases.txt``: "Thank you.", "Thanks for watching!",
   "Subtitles by ...") are dropped only when the line *also* looks like non-speech: a raised
   no-speech probability, a decode Whisper reached only by random sampling, or audio too faint to
   hold a voice. A stock phrase alone never drops a line: people do say "Thank you."

The no-speech probability, log-probability and compression ratio are those of the 30 s decoding
window a line came from (faster-whisper reports them per window); the loudness is the line's own.

Thresholds were measured with Whisper ``tiny.en`` (int8, beam 5, VAD on) on the shared clips that are
not reserved (``bench/speech_hallucinations.py`` prints the table) and on constructed non-speech (the
speech clips played backwards, noise, a chord); each constant's comment says what was seen.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

FILTER_VERSION = 2
"""Bump when a rule or threshold changes: it is part of the speech model's name, so memories built
with another filter are rebuilt (the phrase list's digest is added by ``filter_version``)."""

MAX_NO_SPEECH_PROB = 0.6
"""Whisper's ``no_speech_threshold``. A window whose no-speech probability is above this ..."""

MAX_AVG_LOGPROB_IF_NO_SPEECH = -0.5
"""... and whose mean token log-probability is below this is silence with words written over it.
Whisper itself uses -1.0 (its ``log_prob_threshold``); measured: the blips the VAD lets through at
faster-whisper's defaults gave "Thank you." over wind (0.89, -0.90) and "Yay!" over applause (0.71,
-0.89), while real speech had no-speech probabilities of 0.01-0.26 and log-probabilities of -0.29 to
-0.96."""

MIN_AVG_LOGPROB = -1.0
"""Whisper's ``log_prob_threshold``: a decode whose mean token log-probability is below this is
rejected and retried at a higher temperature (0.2, 0.4, ... 1.0). The runtime keeps the best of its
tries when all are rejected, so a line still below it is one Whisper could not decode: the speech
clips played backwards gave a different line on every run ("Thank you for watching!", "You can't do
that.", "I hope you enjoyed this video.", -1.3 to -1.6). Real speech measured -0.29 to -0.96 (the
lowest: a toddler's unclear voice, whose sampled transcripts disagree)."""

MAX_COMPRESSION_RATIO = 2.4
"""Whisper's ``compression_ratio_threshold``: text that gzip compresses better than this is a loop
("the the the ..."), rejected and retried like a low log-probability; a line still above it looped at
every temperature. No shared clip came near (real speech 0.87-1.25)."""

STOCK_MIN_NO_SPEECH_PROB = 0.3
"""A stock phrase from a window whose no-speech probability is above this is dropped. Real speech
measured 0.007-0.26 (the highest: the toddler's voice); stock phrases over speech played backwards
0.32 and 0.53, over wind 0.89."""

STOCK_MAX_TEMPERATURE = 0.0
"""A stock phrase Whisper only reached by sampling (its beam search rejected: temperature above this)
is dropped. Every real line measured came from the beam search (temperature 0)."""

STOCK_MAX_DBFS = -50.0
"""A stock phrase whose loudest 0.1 s is quieter than this (dB below full scale) is dropped: too faint
to be a voice near the microphone, though Whisper normalises it up. Real lines peaked at -12 to -24
dBFS; a room where nobody speaks (cup.mp4) averages -39 dBFS and gives no line at all."""

ENERGY_FRAME_S = 0.1
"""The frame over which a line's loudness is measured (its loudest frame counts)."""

SAMPLE_RATE = 16000

_CLAUSE_END = re.compile(r"[.!?,;:…。、！？]+(?=\s|$)")
_JOINERS = ("and ", "so ")  # "Thanks for watching, and see you next time." is two stock phrases


@dataclass(frozen=True)
class HeardLine:
    """One line as the speech runtime decoded it, with what it measured about the line's window."""

    start_s: float
    end_s: float
    text: str
    no_speech_prob: float
    avg_logprob: float
    compression_ratio: float
    temperature: float
    """The sampling temperature of the decode kept: 0 is Whisper's beam search; above 0, the beam
    search was rejected and a random sample kept instead."""
    peak_dbfs: float
    """The loudness of the line's loudest ``ENERGY_FRAME_S`` (dB below full scale)."""


def drop_reason(line: HeardLine) -> str | None:
    """Why ``line`` is not speech that was said (a short reason), or ``None`` to keep it."""
    if line.no_speech_prob > MAX_NO_SPEECH_PROB and line.avg_logprob < MAX_AVG_LOGPROB_IF_NO_SPEECH:
        return f"no speech (p={line.no_speech_prob:.2f}, logprob={line.avg_logprob:.2f})"
    if line.avg_logprob < MIN_AVG_LOGPROB:
        return f"every decode rejected (logprob={line.avg_logprob:.2f})"
    if line.compression_ratio > MAX_COMPRESSION_RATIO:
        return f"every decode looped (compression={line.compression_ratio:.2f})"
    if is_stock_phrase(line.text):
        evidence = _non_speech_evidence(line)
        if evidence:
            return f"stock phrase over non-speech ({evidence})"
    return None


def _non_speech_evidence(line: HeardLine) -> str | None:
    """What marks ``line`` as non-speech for the stock-phrase rule, or ``None``."""
    if line.no_speech_prob > STOCK_MIN_NO_SPEECH_PROB:
        return f"no-speech p={line.no_speech_prob:.2f}"
    if line.temperature > STOCK_MAX_TEMPERATURE:
        return f"sampled at temperature {line.temperature:.1f}"
    if line.peak_dbfs < STOCK_MAX_DBFS:
        return f"{line.peak_dbfs:.0f} dBFS"
    return None


def is_stock_phrase(text: str) -> bool:
    """Whether ``text`` consists only of phrases Whisper writes over non-speech (one or several,
    e.g. "Thank you. Thank you.")."""
    clauses = [normalise(clause) for clause in _CLAUSE_END.split(text)]
    clauses = [_without_joiner(clause) for clause in clauses if clause]
    if not clauses:
        return False
    exact, prefixes = stock_phrases()
    return all(clause in exact or any(clause.startswith(prefix) for prefix in prefixes) for clause in clauses)


def normalise(text: str) -> str:
    """Lower case, apostrophes removed, every other non-alphanumeric character a single space."""
    text = text.lower().replace("'", "").replace("\u2019", "")
    return " ".join("".join(ch if ch.isalnum() else " " for ch in text).split())


def _without_joiner(clause: str) -> str:
    for joiner in _JOINERS:
        if clause.startswith(joiner):
            return clause[len(joiner):]
    return clause


@lru_cache(maxsize=1)
def stock_phrases() -> tuple[frozenset[str], tuple[str, ...]]:
    """The stock phrases, normalised: (whole phrases, prefixes)."""
    exact: set[str] = set()
    prefixes: list[str] = []
    for line in _phrase_file().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith(" *"):
            prefixes.append(normalise(line[:-2]) + " ")
        else:
            exact.add(normalise(line))
    return frozenset(exact), tuple(prefixes)


def filter_version() -> str:
    """This filter's version and the digest of its phrase list, e.g. ``"2-1a2b3c4d"``."""
    digest = hashlib.sha256(_phrase_file().encode("utf-8")).hexdigest()[:8]
    return f"{FILTER_VERSION}-{digest}"


@lru_cache(maxsize=1)
def _phrase_file() -> str:
    return resources.files("vidagent.perception").joinpath("data/whisper_stock_phrases.txt").read_text(encoding="utf-8")


def peak_dbfs(samples: np.ndarray, start_s: float, end_s: float, sample_rate: int = SAMPLE_RATE) -> float:
    """The RMS loudness (dBFS) of the loudest ``ENERGY_FRAME_S`` frame of ``samples`` between
    ``start_s`` and ``end_s``; ``-inf`` for a span without samples."""
    start, end = max(int(start_s * sample_rate), 0), min(math.ceil(end_s * sample_rate), samples.size)
    span = samples[start:end]
    if span.size == 0:
        return -math.inf
    frame = max(int(ENERGY_FRAME_S * sample_rate), 1)
    usable = span.size - span.size % frame if span.size >= frame else span.size
    frames = span[:usable].reshape(-1, min(frame, usable)).astype(np.float64)
    loudest = float(np.sqrt((frames ** 2).mean(axis=1)).max())
    return 20.0 * math.log10(loudest) if loudest > 0 else -math.inf
