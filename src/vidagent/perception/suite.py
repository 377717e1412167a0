"""The set of perception models one session uses, built from settings."""

from __future__ import annotations

from dataclasses import dataclass

from vidagent.config import Settings
from vidagent.perception.base import FrameDescriber, SpeechToText, TextEmbedder


@dataclass
class Perception:
    """Models that turn pixels and sound into text and vectors. Each loads on first use."""

    describer: FrameDescriber
    speech: SpeechToText
    embedder: TextEmbedder

    @classmethod
    def offline(cls, settings: Settings) -> "Perception":
        """The defaults whose weights ship inside installed packages (no network needed)."""
        from vidagent.perception.describer import DetectorDescriber
        from vidagent.perception.detector import CenterNetDetector
        from vidagent.perception.ocr import RapidTextReader
        from vidagent.perception.speech import WhisperSpeechToText
        from vidagent.perception.text_embedding import E5TextEmbedder

        describer = DetectorDescriber(
            CenterNetDetector(settings.models_dir), RapidTextReader(cache_dir=settings.models_dir / "ocr")
        )
        return cls(describer=describer, speech=WhisperSpeechToText(), embedder=E5TextEmbedder())

    def close(self) -> None:
        """Stop worker processes held by the models (the detector's Node worker)."""
        for model in (self.describer, self.speech, self.embedder):
            close = getattr(model, "close", None)
            if callable(close):
                close()
