"""The set of perception models one session uses, built from settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from vidagent.config import Settings
from vidagent.perception.base import (AppearanceModel, FrameDescriber, ObjectDetector, SpeechToText,
                                      TextEmbedder, Tracker)


@dataclass
class Perception:
    """Models that turn pixels and sound into text and vectors. Each loads on first use.

    ``new_tracker(fps)`` makes a fresh tracker for one video sampled at ``fps`` frames per second;
    ``tracker_name`` identifies its kind and parameters (part of the objects stage's config).
    """

    describer: FrameDescriber
    speech: SpeechToText
    embedder: TextEmbedder
    detector: ObjectDetector
    appearance: AppearanceModel
    new_tracker: Callable[[float], Tracker]
    tracker_name: str

    @classmethod
    def from_settings(cls, settings: Settings) -> "Perception":
        """The offline defaults, with the backends named in ``settings.backends`` swapped in."""
        wanted = settings.backends
        if not (wanted.captioner or wanted.detector or wanted.appearance):
            return cls.offline(settings)
        from vidagent.perception.describer import CaptionWithText
        from vidagent.perception.hf import build_backend
        from vidagent.perception.ocr import RapidTextReader

        suite = cls.offline(settings)
        reader = RapidTextReader(cache_dir=settings.models_dir / "ocr")
        if wanted.detector:
            suite.detector.close()  # type: ignore[attr-defined]
            from vidagent.perception.caching import CachingDetector

            suite.detector = CachingDetector(build_backend("detector", wanted.detector))
            from vidagent.perception.describer import DetectorDescriber

            suite.describer = DetectorDescriber(suite.detector, reader)
        if wanted.captioner:
            suite.describer = CaptionWithText(build_backend("captioner", wanted.captioner), reader)
        if wanted.appearance:
            suite.appearance = build_backend("appearance", wanted.appearance)
        return suite

    @classmethod
    def offline(cls, settings: Settings) -> "Perception":
        """The defaults whose weights ship inside installed packages (no network needed)."""
        from vidagent.perception.appearance import ColourAppearance
        from vidagent.perception.caching import CachingDetector
        from vidagent.perception.describer import DetectorDescriber
        from vidagent.perception.detector import CenterNetDetector
        from vidagent.perception.ocr import RapidTextReader
        from vidagent.perception.speech import WhisperSpeechToText
        from vidagent.perception.text_embedding import E5TextEmbedder
        from vidagent.perception.tracking import ByteTracker

        detector = CachingDetector(CenterNetDetector(settings.models_dir))  # frames and objects share results
        describer = DetectorDescriber(detector, RapidTextReader(cache_dir=settings.models_dir / "ocr"))
        return cls(describer=describer, speech=WhisperSpeechToText(), embedder=E5TextEmbedder(),
                   detector=detector, appearance=ColourAppearance(), new_tracker=ByteTracker,
                   tracker_name=ByteTracker.NAME)

    def close(self) -> None:
        """Stop worker processes held by the models (the detector's Node worker)."""
        seen: set[int] = set()
        for model in (self.describer, self.detector, self.speech, self.embedder, self.appearance):
            close = getattr(model, "close", None)
            if callable(close) and id(model) not in seen:
                seen.add(id(model))
                close()
