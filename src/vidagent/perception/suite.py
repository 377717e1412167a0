"""The set of perception models one session uses, built from settings."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from vidagent.config import BackendSettings, Settings
from vidagent.perception.base import (AppearanceModel, FrameDescriber, ImageClassifier, ObjectDetector,
                                      OpenVocabularyDetector, PoseEstimator, SpeechToText, TextEmbedder, TextReader, Tracker,
                                      Segmenter, VideoClassifier)


@dataclass
class Perception:
    """Models that turn pixels and sound into text and vectors. Each loads on first use.

    ``new_tracker(fps)`` makes a fresh tracker for one video sampled at ``fps`` frames per second;
    ``tracker_name`` identifies its kind and parameters (part of the objects stage's config).
    ``classifier`` (ImageNet labels) is there when ``settings.perception`` names "imagenet";
    ``grounder`` (an open-vocabulary detector) when ``settings.backends.grounding`` names one;
    ``captioner`` (the captioning model alone, for object crops) when ``settings.backends.captioner`` names
    one; ``video_classifier`` (people's actions) when ``settings.backends.video_classifier`` names one;
    ``segmenter`` (objects' masks) unless ``settings.backends.segmenter`` is "none"
    (``vidagent.perception.segmenter.build_segmenter``).
    """

    describer: FrameDescriber
    speech: SpeechToText
    embedder: TextEmbedder
    detector: ObjectDetector
    appearance: AppearanceModel
    new_tracker: Callable[[float], Tracker]
    tracker_name: str
    reader: TextReader
    classifier: ImageClassifier | None = None
    grounder: OpenVocabularyDetector | None = None
    captioner: FrameDescriber | None = None
    video_classifier: VideoClassifier | None = None
    segmenter: Segmenter | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> "Perception":
        """The offline defaults, with the backends named in ``settings.backends`` swapped in.

        Each role is built from its own setting, so an offline model that a configured backend
        replaces is neither loaded nor required (an HF detector works without CenterNet installed).
        """
        return cls._build(settings, settings.backends)

    @classmethod
    def offline(cls, settings: Settings) -> "Perception":
        """The defaults whose weights ship inside installed packages (no network needed)."""
        return cls._build(settings, BackendSettings())

    @classmethod
    def _build(cls, settings: Settings, wanted: BackendSettings) -> "Perception":
        from vidagent.perception.backends import build_backend
        from vidagent.perception.caching import CachingDetector
        from vidagent.perception.describer import CaptionWithText, DetectorDescriber
        from vidagent.perception.ocr import RapidTextReader
        from vidagent.perception.segmenter import build_segmenter
        from vidagent.perception.speech import WhisperSpeechToText
        from vidagent.perception.text_screen import ScreenedTextReader
        from vidagent.perception.tracking import ByteTracker

        # one cache in front of the detector: the frames describer and the objects stage share results
        if wanted.detector:
            detector = CachingDetector(build_backend("detector", wanted.detector, settings))
        else:
            from vidagent.perception.detector import CenterNetDetector
            from vidagent.perception.detector_pool import DetectorPool

            # copies that run one frame each on one thread keep every core busier than one copy on all of them
            copies = settings.detector_workers or os.cpu_count() or 1
            detector = CachingDetector(DetectorPool(lambda: CenterNetDetector(settings.models_dir), copies))
        reader = RapidTextReader(cache_dir=settings.models_dir / "ocr")
        # the frames are described through the text screen; the OCR tools read every image they are given
        frame_reader: TextReader = ScreenedTextReader(reader) if settings.screen_text else reader
        classifier: ImageClassifier | None = None
        if "imagenet" in settings.perception:
            from vidagent.perception.classifier import EfficientNetClassifier

            classifier = EfficientNetClassifier(settings.models_dir)
        pose: PoseEstimator | None = None
        if "pose" in settings.perception:
            from vidagent.perception.pose import MoveNetPose

            pose = MoveNetPose(settings.models_dir)
        describer: FrameDescriber
        captioner: FrameDescriber | None = None
        if wanted.captioner:
            captioner = build_backend("captioner", wanted.captioner, settings)
            describer = CaptionWithText(captioner, frame_reader)
        else:
            describer = DetectorDescriber(detector, frame_reader, classifier=classifier, pose=pose)
        appearance: AppearanceModel
        if wanted.appearance:
            appearance = build_backend("appearance", wanted.appearance, settings)
        else:
            from vidagent.perception.appearance import ColourAppearance

            appearance = ColourAppearance()
        grounder: OpenVocabularyDetector | None = None
        if wanted.grounding:
            grounder = build_backend("grounding", wanted.grounding, settings)
        video_classifier: VideoClassifier | None = None
        if wanted.video_classifier:
            video_classifier = build_backend("video_classifier", wanted.video_classifier, settings)
        return cls(describer=describer, speech=WhisperSpeechToText(), embedder=text_embedder(settings),
                   detector=detector, appearance=appearance, new_tracker=ByteTracker,
                   tracker_name=ByteTracker.NAME, reader=reader, classifier=classifier, grounder=grounder,
                   captioner=captioner, video_classifier=video_classifier,
                   segmenter=build_segmenter(wanted.segmenter, settings.models_dir))

    def usage(self) -> dict[str, dict[str, float]]:
        """What the metered models (vision chat models) cost so far: role -> counts (``VisionUsage.snapshot``)."""
        metered = {"captioner": self.captioner}
        return {role: model.usage.snapshot() for role, model in metered.items() if hasattr(model, "usage")}

    def close(self) -> None:
        """Stop worker processes held by the models (the detector's Node worker)."""
        seen: set[int] = set()
        for model in (self.describer, self.detector, self.speech, self.embedder, self.appearance, self.reader,
                      self.segmenter):
            close = getattr(model, "close", None)
            if callable(close) and id(model) not in seen:
                seen.add(id(model))
                close()


def text_embedder(settings: Settings) -> TextEmbedder:
    """The text embedder of every memory (segments, objects, questions): all that work on memories
    without pixels (imported captions) needs, without the vision models or their install."""
    from vidagent.perception.text_embedding import E5TextEmbedder

    return E5TextEmbedder()
