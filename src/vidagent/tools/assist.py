"""AssistGPT's modules (its appendix table 6) as tools over vidagent's memory and models.

Every module is called the same way, ``name("text query", visual[i])``: a query (``None`` where
the module needs none) and the index of one source. A ``VisualTool`` declares which source kinds
it takes, so the planner's executor can refuse a wrong call before running it with a precise
message. Grounding modules (``narration_ground``, ``subtitle_ground``, ``temporal_reason``,
``region_ground``, ``text_ground``, ``get_frame``) cut a clip or a crop and return it in
``Observation.media``; the Inspector adds it to the sources.

What runs offline: narration is the memory's segment descriptions (the frame describer's, not a
captioning model's, which the memory note says), ASR is the memory's Whisper transcript, text
detection is the OCR reader, object detection and region grounding the COCO detector, the
reasoners the chat model.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from vidagent.errors import ToolInputError
from vidagent.llm.base import ChatModel, Message
from vidagent.perception.base import FrameDescriber, ObjectDetector, TextEmbedder, TextReader
from vidagent.prompts import load_prompt, render
from vidagent.tools.base import Evidence, Observation
from vidagent.tools.media import ImageMedia, Media, VideoMedia, frame_media, spread_evenly, unlabelled
from vidagent.tools.observed import frame_text, lines, quote, quote_all, with_text
from vidagent.tools.vqa import VisualQA
from vidagent.video.source import SourceKind
from vidagent.video.video import SampledFrame

PROMPTS = "vidagent.tools"
MOVING: tuple[SourceKind, ...] = ("video", "clip")
STILL: tuple[SourceKind, ...] = ("image", "crop")
MAX_LINES = 15  # narration, subtitle and text lines shown at once
ABSOLUTE_PARTS = 5  # temporal_reason: beginning / middle / end of five parts
RELATIVE_PARTS = 8  # temporal_reason: before / after over eight parts
MIN_TEXT_MATCH = 0.6  # text_ground: similarity of the query to a piece of OCR text
MIN_OCR_SCORE = 0.5
REASON_TOKENS = 120
FRAME_MAX_SIDE = 768


@dataclass(frozen=True)
class VisualTool:
    """A module called as ``name(query, visual[i])``. ``accepts`` lists the source kinds it takes
    (empty: it takes no source, the index must be ``None``); ``query`` says whether the text
    query is ``required`` or ignored (``none``)."""

    name: str
    description: str
    accepts: tuple[SourceKind, ...]
    query: str  # "required" or "none"
    function: Callable[[str, Media | None], Observation]

    def usage(self) -> str:
        query = '"query"' if self.query == "required" else "None"
        visual = "visual[i]" if self.accepts else "None"
        takes = f" Takes: {', '.join(self.accepts)}." if self.accepts else ""
        return f"{self.name}({query}, {visual}): {self.description}{takes}"

    def refusal(self, query: str, media: Media | None, label: str) -> str | None:
        """Why this call cannot run (the message for the planner), or None when it fits."""
        if self.accepts and media is None:
            return f"{self.name} needs a source: write {self.name}(..., visual[i])."
        if not self.accepts and media is not None:
            return f"{self.name} takes no source: write {self.name}(\"query\", None)."
        if media is not None and media.source.kind not in self.accepts:
            kind = media.source.kind
            return (f"{self.name} takes {' or '.join(self.accepts)} sources, but {label} is {_article(kind)} {kind}."
                    f"{_hint(self, media)}")
        if self.query == "required" and not query.strip():
            return f"{self.name} needs a text query: write {self.name}(\"...\", {label if media else 'None'})."
        return None


@dataclass
class AssistModules:
    """Builds the modules over one session's models."""

    describer: FrameDescriber
    reader: TextReader
    detector: ObjectDetector
    embedder: TextEmbedder
    vqa: VisualQA
    llm: ChatModel

    def tools(self) -> list[VisualTool]:
        any_kind = MOVING + STILL
        return [
            VisualTool("caption", "answers a question about an image, or describes it when the query is None.",
                       STILL, "none", self.caption),
            VisualTool("video_narration", "what is seen over time in a video: one line per stretch of seconds.",
                       MOVING, "none", self.video_narration),
            VisualTool("object_detect", "detects and counts objects (80 everyday COCO classes) in an image.",
                       STILL, "none", self.object_detect),
            VisualTool("text_detect", "reads the text shown in an image, or on screen over a video.",
                       any_kind, "none", self.text_detect),
            VisualTool("asr", "the speech of a video, transcribed, with times.", MOVING, "none", self.asr),
            VisualTool("region_ground", "finds the object the query names in an image and crops it (a new source).",
                       STILL, "required", self.region_ground),
            VisualTool("narration_ground", "finds the clip of a video whose content best matches the query "
                       "(a new source).", MOVING, "required", self.narration_ground),
            VisualTool("text_ground", "finds where the query's text is written in an image and crops it "
                       "(a new source).", STILL, "required", self.text_ground),
            VisualTool("subtitle_ground", "finds the clip of a video where the speech best matches the query "
                       "(a new source).", MOVING, "required", self.subtitle_ground),
            VisualTool("knowledge_reason", "answers from general knowledge, seeing no source.", (), "required",
                       self.knowledge_reason),
            VisualTool("narration_reason", "answers a question from a video's narration.", MOVING, "required",
                       self.narration_reason),
            VisualTool("subtitle_reason", "answers a question from a video's speech.", MOVING, "required",
                       self.subtitle_reason),
            VisualTool("temporal_reason", "cuts the clip a time phrase names: \"beginning\", \"middle\", \"end\", "
                       "or \"before: 3\" / \"after: 2-4\" (seconds); a new source.", MOVING, "required",
                       self.temporal_reason),
            VisualTool("get_frame", "takes the frame at a time (seconds, or \"middle\") of a video as an image "
                       "(a new source).", MOVING, "required", self.get_frame),
        ]

    # -- perceivers ----------------------------------------------------------------------------
    def caption(self, query: str, media: Media | None) -> Observation:
        image = _still(media)
        if not _given(query):
            description = self.describer.describe([image.pixels])[0]
            return Observation(f"Description: {frame_text(description)}", evidence=_evidence(image, description.text))
        frame = SampledFrame(image.source.window[0] if image.source.window else 0.0, image.pixels)
        result = self.vqa.answer(query, [frame], self.llm)
        return Observation(f"Description: {lines(result.description)}\nAnswer: {quote(result.answer)}",
                           evidence=_evidence(image, result.answer))

    def video_narration(self, query: str, media: Media | None) -> Observation:
        video = _moving(media)
        narration = [f"{s.start_s:.1f}-{s.end_s:.1f} s: {with_text(unlabelled(s.description), s.on_screen_text)}"
                     for s in video.segments()]
        if not narration:
            return Observation("The memory holds no narration for this source.", is_error=True)
        shown = spread_evenly(narration, MAX_LINES)
        note = f"({len(shown)} of {len(narration)} stretches, evenly spread)\n" if len(shown) < len(narration) else ""
        start, end = video.window
        return Observation(note + "\n".join(shown), evidence=(Evidence(start, end, "narration", video.source.id),))

    def object_detect(self, query: str, media: Media | None) -> Observation:
        image = _still(media)
        detections = self.detector.detect([image.pixels])[0]
        counts: dict[str, int] = {}
        for label in detections.labels:
            counts[label] = counts.get(label, 0) + 1
        if not counts:
            return Observation("No objects of the 80 COCO classes were detected.", evidence=_evidence(image, ""))
        listing = ", ".join(f"{n} {label}" for label, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        asked = [label for label in counts if _names(query, label)]
        missing = [word for word in _query_words(query) if not any(_names(word, label) for label in counts)]
        text = f"Detected: {listing}."
        if _given(query) and asked:
            text = f"{'; '.join(f'{counts[label]} {label}' for label in asked)} found. " + text
        elif _given(query) and missing:
            text = f"None of '{query}' was detected (the detector knows 80 COCO classes). " + text
        return Observation(text, evidence=_evidence(image, listing))

    def text_detect(self, query: str, media: Media | None) -> Observation:
        if isinstance(media, VideoMedia):
            start, end = media.window
            by_time: dict[float, list[str]] = {}
            for time_s, _, text in media.memory.on_screen_text:
                if start <= time_s <= end:
                    by_time.setdefault(round(time_s, 1), []).append(text)
            if not by_time:
                return Observation("No on-screen text was read in this source.")
            read = [f"{t:.1f} s: {quote_all(texts)}" for t, texts in by_time.items()]
            return Observation("\n".join(spread_evenly(read, MAX_LINES)),
                               evidence=(Evidence(start, end, "on-screen text", media.source.id),))
        image = _still(media)
        boxes = [box for box in self.reader.read(image.pixels) if box.score >= MIN_OCR_SCORE]
        if not boxes:
            return Observation("No text was read in this image.", evidence=_evidence(image, ""))
        text = " | ".join(box.text for box in boxes)
        return Observation(f"Text: {quote(text)}", evidence=_evidence(image, text))

    def asr(self, query: str, media: Media | None) -> Observation:
        video = _moving(media)
        if not video.memory.video.info.has_audio:
            return Observation("This video has no audio track.")
        heard = [f"{a:.1f}-{b:.1f} s: {quote(text)}" for a, b, text in video.speech()]
        if not heard:
            return Observation("No speech was recognised in this source.")
        start, end = video.window
        return Observation("\n".join(spread_evenly(heard, MAX_LINES)),
                           evidence=(Evidence(start, end, "speech", video.source.id),))

    # -- locators ------------------------------------------------------------------------------
    def region_ground(self, query: str, media: Media | None) -> Observation:
        image = _still(media)
        detections = self.detector.detect([image.pixels])[0]
        if not len(detections):
            return Observation(f"Nothing was detected to match '{query}' (the detector knows 80 COCO classes).")
        labels = sorted(set(detections.labels))
        similarity = dict(zip(labels, self._similarities(query, labels)))
        scores = [similarity[label] * (0.5 + 0.5 * float(score))
                  for label, score in zip(detections.labels, detections.scores)]
        best = int(np.argmax(scores))
        crop = image.crop(detections.boxes[best])
        x1, y1, x2, y2 = (int(v) for v in crop.source.box or (0, 0, 0, 0))
        return Observation(f"Found {detections.labels[best]} (match {similarity[detections.labels[best]]:.2f}) "
                           f"at [{x1}, {y1}, {x2}, {y2}].", evidence=_evidence(image, detections.labels[best]),
                           media=(crop,))

    def text_ground(self, query: str, media: Media | None) -> Observation:
        image = _still(media)
        target = query.split(":")[0].strip().lower()
        boxes = [box for box in self.reader.read(image.pixels) if box.score >= MIN_OCR_SCORE]
        if not boxes:
            return Observation("No text was read in this image.")
        ratios = [_text_match(target, box.text.lower()) for box in boxes]
        best = int(np.argmax(ratios))
        if ratios[best] < MIN_TEXT_MATCH:
            shown = quote_all(box.text for box in boxes[:MAX_LINES])
            return Observation(f"No text like '{target}' was found. The texts read are: {shown}")
        crop = image.crop(boxes[best].box)
        return Observation(f"Found {quote(boxes[best].text)} at {[int(v) for v in boxes[best].box]}.",
                           evidence=_evidence(image, boxes[best].text), media=(crop,))

    def narration_ground(self, query: str, media: Media | None) -> Observation:
        video = _moving(media)
        segments = video.segments()
        if not segments:
            return Observation("The memory holds no narration for this source.", is_error=True)
        inside = [s.segment_id for s in segments]
        ranked = video.memory.rank_segments(self.embedder.embed_queries([query])[0], video.memory.segment_count)
        match = next(r for r in ranked if r.segment.segment_id in inside)
        best = inside.index(match.segment.segment_id)
        first, last = segments[max(0, best - 1)], segments[min(len(segments) - 1, best + 1)]
        clip = video.clip(first.start_s, last.end_s)
        start, end = clip.window
        found = match.segment
        seen = with_text(unlabelled(found.description), found.on_screen_text)
        return Observation(f"The best match is {found.start_s:.1f}-{found.end_s:.1f} s "
                           f"(similarity {match.score:.2f}): {seen}\n"
                           f"Cut the clip {start:.1f}-{end:.1f} s around it.",
                           evidence=(Evidence(start, end, found.description, video.source.id),), media=(clip,))

    def subtitle_ground(self, query: str, media: Media | None) -> Observation:
        video = _moving(media)
        lines = video.speech()
        if not lines:
            return Observation("Warning: no speech in this source, so no clip was found by its subtitles.")
        scores = self._similarities(query, [text for _, _, text in lines])
        best = int(np.argmax(scores))
        start_s, end_s, text = lines[best]
        clip = video.clip(start_s - 1.0, end_s + 1.0)
        start, end = clip.window
        return Observation(f"The speech that matches best (similarity {scores[best]:.2f}) is at "
                           f"{start_s:.1f}-{end_s:.1f} s: {quote(text)}\nCut the clip {start:.1f}-{end:.1f} s.",
                           evidence=(Evidence(start, end, text.strip(), video.source.id),), media=(clip,))

    def temporal_reason(self, query: str, media: Media | None) -> Observation:
        video = _moving(media)
        start, end = _temporal_window(query, video.window)
        clip = video.clip(start, end)
        low, high = clip.window
        return Observation(f"'{query}' is {low:.1f}-{high:.1f} s.",
                           evidence=(Evidence(low, high, query, video.source.id),), media=(clip,))

    def get_frame(self, query: str, media: Media | None) -> Observation:
        video = _moving(media)
        start, end = video.window
        if query.strip().lower() in ("middle", "centre", "center"):
            time_s = (start + end) / 2
        else:
            match = re.search(r"-?\d+(?:\.\d+)?", query)
            if match is None:
                raise ToolInputError(f"get_frame needs a time in seconds or \"middle\", got {query!r}")
            time_s = float(match.group())
            if not start <= time_s <= end:
                raise ToolInputError(f"{time_s:g} s lies outside this source ({start:.1f}-{end:.1f} s)")
        frame = frame_media(video, time_s, FRAME_MAX_SIDE)
        return Observation(f"Took the frame at {time_s:.1f} s.",
                           evidence=(Evidence(time_s, time_s, "frame", video.source.id),), media=(frame,))

    # -- reasoners -----------------------------------------------------------------------------
    def knowledge_reason(self, query: str, media: Media | None) -> Observation:
        return Observation(self._ask(render(load_prompt(PROMPTS, "assist_knowledge"), query=query)))

    def narration_reason(self, query: str, media: Media | None) -> Observation:
        narration = self.video_narration("", media)
        if narration.is_error:
            return narration
        prompt = render(load_prompt(PROMPTS, "assist_reason"), what="a video", material_name="Narration",
                        material_note=_DESCRIBER_NOTE, material=narration.text, query=query)
        return Observation(f"Answer: {quote(self._ask(prompt))}", evidence=narration.evidence)

    def subtitle_reason(self, query: str, media: Media | None) -> Observation:
        speech = self.asr("", media)
        if not speech.evidence:
            return Observation(f"{speech.text} There is nothing to reason over.")
        prompt = render(load_prompt(PROMPTS, "assist_reason"), what="a video", material_name="Speech",
                        material_note="It was transcribed automatically and may hold mistakes.",
                        material=speech.text, query=query)
        return Observation(f"Answer: {quote(self._ask(prompt))}", evidence=speech.evidence)

    # -- helpers -------------------------------------------------------------------------------
    def _ask(self, prompt: str) -> str:
        return self.llm.chat([Message("user", prompt)], max_tokens=REASON_TOKENS, stop=("\n\n",)).text.strip()

    def _similarities(self, query: str, texts: Sequence[str]) -> list[float]:
        query_vector = self.embedder.embed_queries([query])[0]
        return [float(v) for v in self.embedder.embed_passages(list(texts)) @ query_vector]


_DESCRIBER_NOTE = ("Each line says what was seen in that stretch; where it is a detector description it lists "
                   "objects only, not actions.")


def _temporal_window(query: str, window: tuple[float, float]) -> tuple[float, float]:
    """AssistGPT's rule: beginning/middle/end are the first/third/last of five parts; before/after
    a time are the part of eight just before the one holding it, or just after."""
    start, end = window
    text = query.lower()
    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)]
    if ("before" in text or "after" in text) and numbers:
        part = (end - start) / RELATIVE_PARTS
        # the part holding the time, counted past either end (-1, RELATIVE_PARTS) when it lies outside
        if "before" in text:
            index = min(RELATIVE_PARTS, int((min(numbers) - start) // part)) - 1
        else:
            index = max(-1, int((max(numbers) - start) // part)) + 1
        if not 0 <= index < RELATIVE_PARTS:
            raise ToolInputError(f"there is nothing {'before' if 'before' in text else 'after'} "
                                 f"{numbers[0]:g} s in {start:.1f}-{end:.1f} s")
        return start + index * part, start + (index + 1) * part
    part = (end - start) / ABSOLUTE_PARTS
    for words, index in ((("beginning", "begin", "start", "first", "opening"), 0), (("middle", "halfway"), 2),
                         (("end", "last", "final", "finish"), ABSOLUTE_PARTS - 1)):
        if any(re.search(rf"\b{word}", text) for word in words):
            return start + index * part, start + (index + 1) * part
    raise ToolInputError("temporal_reason takes \"beginning\", \"middle\", \"end\", \"before: <seconds>\" "
                         f"or \"after: <seconds>\"; got {query!r}")


def _still(media: Media | None) -> ImageMedia:
    if not isinstance(media, ImageMedia):
        raise ToolInputError("this module takes an image or a crop")
    return media


def _moving(media: Media | None) -> VideoMedia:
    if not isinstance(media, VideoMedia):
        raise ToolInputError("this module takes a video or a clip")
    return media


def _given(query: str) -> bool:
    return query.strip().lower() not in ("", "none", "null", "n/a")


def _query_words(query: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", query.lower()) if len(w) > 2 and w not in _STOPWORDS] \
        if _given(query) else []


def _names(text: str, label: str) -> bool:
    """Whether ``text`` names the COCO ``label`` (singular or plural)."""
    words = set(re.findall(r"[a-z]+", text.lower()))
    label_words = label.lower().split()
    return all(w in words or w + "s" in words or w + "es" in words for w in label_words) or \
        (label.lower() == "person" and bool(words & {"people", "persons", "man", "men", "woman", "women", "child"}))


def _text_match(target: str, text: str) -> float:
    if target and target in text:
        return 1.0
    return difflib.SequenceMatcher(None, target, text).ratio()


def _evidence(image: ImageMedia, text: str) -> tuple[Evidence, ...]:
    window = image.source.window
    return (Evidence(window[0], window[1], text, image.source.id),) if window else \
        (Evidence(0.0, 0.0, text, image.source.id),)


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def _hint(tool: VisualTool, media: Media) -> str:
    if isinstance(media, VideoMedia) and set(tool.accepts) <= set(STILL):
        return " Take a frame first with get_frame(\"<seconds>\", visual[i]), or use a video module."
    if isinstance(media, ImageMedia) and set(tool.accepts) <= set(MOVING):
        return " Use an image module (caption, object_detect, text_detect) on it."
    return ""


_STOPWORDS = frozenset("the and how many are there any what who which where when does this that with for from "
                       "image video picture count find detect".split())
