"""Stage ``speech``: the audio track transcribed into timed segments (nothing for silent videos).

Long soundtracks are transcribed in chunks of ``CHUNK_S`` seconds so the progress bar moves and
the speech model never holds more than one chunk's state."""

from __future__ import annotations

from typing import Any

from tqdm import tqdm

from vidagent.memory.stages.base import Rows
from vidagent.memory.store import Library
from vidagent.perception.base import SpeechSegment, SpeechToText
from vidagent.video.video import AUDIO_SAMPLE_RATE, Video

CHUNK_S = 600


class SpeechStage:
    name = "speech"
    requires: tuple[str, ...] = ()

    def __init__(self, speech_to_text: SpeechToText) -> None:
        self.speech_to_text = speech_to_text

    def config(self) -> dict[str, Any]:
        return {"speech_to_text": self.speech_to_text.name, "chunk_s": CHUNK_S}

    def build(self, video: Video, library: Library, progress: bool) -> Rows:
        audio = video.audio()
        if audio is None or audio.size == 0:
            return {"speech": []}
        chunk = CHUNK_S * AUDIO_SAMPLE_RATE
        segments: list[SpeechSegment] = []
        seconds = audio.size / AUDIO_SAMPLE_RATE
        with tqdm(total=round(seconds), unit="s", desc=f"transcribing {video.path.name}",
                  disable=not progress or seconds <= CHUNK_S, leave=False) as bar:
            for start in range(0, audio.size, chunk):
                piece = audio[start:start + chunk]
                segments += self.speech_to_text.transcribe(piece, offset_s=start / AUDIO_SAMPLE_RATE)
                bar.update(round(piece.size / AUDIO_SAMPLE_RATE))
        return {"speech": [(s.start_s, s.end_s, s.text) for s in segments]}
