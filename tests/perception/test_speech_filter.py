"""The filter of Whisper's hallucinations on constructed lines (no model): Whisper's own rules, stock
phrases dropped only over non-speech, the loudness measure, and the filter's version in the cache key."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from vidagent.memory.stages.speech import SpeechStage
from vidagent.perception.speech import WhisperSpeechToText
from vidagent.perception.speech_filter import (
    FILTER_VERSION,
    HeardLine,
    drop_reason,
    filter_version,
    is_stock_phrase,
    normalise,
    peak_dbfs,
    stock_phrases,
)

# A line of real speech as the runtime reports it (the numbers of test.avi's narration).
SAID = HeardLine(start_s=0.0, end_s=5.5, text="I started the outer corner, I swirl, and I move in.",
                 no_speech_prob=0.007, avg_logprob=-0.365, compression_ratio=1.20, temperature=0.0, peak_dbfs=-12.0)


def line(text: str = SAID.text, **fields) -> HeardLine:
    return replace(SAID, text=text, **fields)


@pytest.mark.parametrize("text", [
    "Thank you.", "thank you", "Thank you. Thank you.", "Thank you, thank you, thank you", "Thanks for watching!",
    "Thank you so much for watching, and I'll see you next time.", "Subtitles by the Amara.org community",
    "You", "Bye-bye.", "Please subscribe to my channel.", "Sous-titres réalisés par la communauté d'Amara.org",
])
def test_stock_phrases_are_recognised(text):
    assert is_stock_phrase(text)


@pytest.mark.parametrize("text", [
    "Thank you for the coffee.", "Hello, take a look at what I'm drawing.", "Thank you. It is my trip.",
    "You can't do that.", "Subtitles", "", "...", "Yay!",
])
def test_other_lines_are_not_stock_phrases(text):
    assert not is_stock_phrase(text)


def test_the_phrase_file_loads():
    exact, prefixes = stock_phrases()
    assert "thank you" in exact and "thanks for watching" in exact and "subtitles by " in prefixes
    assert all(phrase and phrase == normalise(phrase) for phrase in exact)
    assert not any(phrase.startswith("#") for phrase in exact)


def test_real_speech_is_kept():
    assert drop_reason(SAID) is None
    # the toddler clip: a voice Whisper is unsure of, still above every threshold
    assert drop_reason(line("Put it in a minute.", no_speech_prob=0.258, avg_logprob=-0.962, peak_dbfs=-23.6)) is None


def test_whispers_no_speech_rule():
    # "Yay!" over applause: Whisper itself says no speech, and is unsure of the words
    assert "no speech" in drop_reason(line("Yay!", no_speech_prob=0.712, avg_logprob=-0.891))
    # a likely "no speech" with confident words is kept (both conditions, as Whisper's rule)
    assert drop_reason(line(no_speech_prob=0.7, avg_logprob=-0.3)) is None


def test_decodes_whisper_rejected_are_dropped():
    assert "rejected" in drop_reason(line("You can't do that.", avg_logprob=-1.355, temperature=1.0))
    assert "looped" in drop_reason(line("the the the the the the the the the", compression_ratio=3.1, temperature=1.0))


def test_a_stock_phrase_is_dropped_only_over_non_speech():
    # said, as the runtime hears speech: kept (a stock phrase alone never drops a line)
    said = line("Thank you.", no_speech_prob=0.043, avg_logprob=-0.533, peak_dbfs=-16.7)
    assert drop_reason(said) is None
    # the same words with a sign of non-speech are dropped
    assert "no-speech p=0.45" in drop_reason(replace(said, no_speech_prob=0.45))
    assert "temperature 0.4" in drop_reason(replace(said, temperature=0.4))
    assert "dBFS" in drop_reason(replace(said, peak_dbfs=-62.0))
    # a line that is not a stock phrase keeps those signs without being dropped
    other = line("Get the pan.", no_speech_prob=0.45, temperature=0.4, peak_dbfs=-62.0)
    assert drop_reason(other) is None


def test_peak_dbfs_finds_the_loudest_frame():
    samples = np.zeros(16000 * 2, np.float32)
    t = np.arange(1600) / 16000
    samples[8000:9600] = 0.5 * np.sin(2 * np.pi * 440 * t)  # 0.1 s tone at 0.5 s: RMS 0.354, -9 dBFS
    assert peak_dbfs(samples, 0.0, 2.0) == pytest.approx(-9.03, abs=0.3)
    assert peak_dbfs(samples, 1.0, 2.0) == -math.inf  # only silence there
    assert peak_dbfs(samples, 2.5, 3.0) == -math.inf  # past the end
    assert peak_dbfs(np.full(100, 0.1, np.float32), 0.0, 1.0) == pytest.approx(-20.0)  # shorter than a frame


def test_the_filter_version_is_in_the_speech_cache_key():
    version = filter_version()
    assert version.startswith(f"{FILTER_VERSION}-") and len(version) == len(f"{FILTER_VERSION}-") + 8
    stt = WhisperSpeechToText()  # nothing loads until first use
    assert stt.name == f"faster-whisper:tiny.en?filter={version}"
    assert f"filter={version}" in SpeechStage(stt).config()["speech_to_text"]


def test_transcribe_leaves_out_what_the_filter_drops(monkeypatch):
    stt = WhisperSpeechToText()
    heard = [
        line("Thank you.", start_s=0.0, end_s=1.0, no_speech_prob=0.885, avg_logprob=-0.895),  # over wind
        line("Hello.", start_s=1.0, end_s=2.0),
        line("Hello.", start_s=2.0, end_s=3.0),  # a loop on one sentence: merged
        line("Thank you.", start_s=3.0, end_s=4.0),  # said
    ]
    monkeypatch.setattr(stt, "hear", lambda audio, sample_rate=16000: heard)
    segments = stt.transcribe(np.ones(16000 * 4, np.float32), offset_s=10.0)
    assert [(s.start_s, s.end_s, s.text) for s in segments] == [(11.0, 13.0, "Hello."), (13.0, 14.0, "Thank you.")]
