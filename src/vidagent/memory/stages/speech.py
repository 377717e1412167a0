"""Stage ``speech``: the audio track transcribed into timed segments (nothing for silent videos)."""

from __future__ import annotations

from typing import Any

from vidagent.memory.stages.base import Rows
from vidagent.memory.store import Library
from vidagent.perception.base import SpeechToText
from vidagent.video.video import Video


class SpeechStage:
    name = "speech"
    requires: tuple[str, ...] = ()

    def __init__(self, speech_to_text: SpeechToText) -> None:
        self.speech_to_text = speech_to_text

    def config(self) -> dict[str, Any]:
        return {"speech_to_text": self.speech_to_text.name}

    def build(self, video: Video, library: Library, progress: bool) -> Rows:
        audio = video.audio()
        if audio is None or audio.size == 0:
            return {"speech": []}
        segments = self.speech_to_text.transcribe(audio)
        return {"speech": [(s.start_s, s.end_s, s.text) for s in segments]}
