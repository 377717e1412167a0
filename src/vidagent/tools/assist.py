"""AssistGPT's modules (its appendix table 6) as tools over vidagent's memory and models.

Every module is called the same way, ``name("text query", visual[i])``: a query (``None`` where
the module needs none) and the index of one source. Each is an ordinary ``Tool`` whose source
parameter declares the source kinds it takes, so whoever holds the sources (PEIL's executor) can
refuse a wrong call before running it with a precise message (``source_refusal``). Grounding modules (``narration_ground``, ``subtitle_ground``, ``temporal_reason``,
``region_ground``, ``text_ground``, ``get_frame``) cut a clip or a crop and return it in
``Observation.media``; the Inspector adds it to the sources.

What runs offline: narration is the memory's segment descriptions (the frame describer's, not a
captioning model's, which the memory note says), ASR is the memory's Whisper transcript, text
detection is the OCR reader, object detection and region grounding the COCO detector (or, when one
is configured, ``VIDAGENT_GROUNDING``, an open-vocabulary detector such as Grounding DINO finding
what the query names, as the paper's), the reasoners the chat model. ``knowledge_reason`` sees the
question and the results of the attempt's earlier steps (the paper: "based on the question and
results of all previous reasoning steps"); the narration and subtitle reasoners read a video's
whole narration or speech up to ``ToolShapes.reason_chars``, spread evenly beyond that.

The modules that read a window's descriptions or on-screen text from the memory (``video_narration``,
``narration_reason``, ``narration_ground``, ``text_detect`` over a video) read a partial memory as react's
``caption_retrieval`` does (``vidagent.tools.refining``): a window of at most ``ToolShapes.module_lines``
segments is described in full first, and the observation names it (``artifacts["refined"]``).

Reading a window, localising a text in it, looking and asking, describing and hearing are the shared
capabilities (``vidagent.tools.capabilities``) that react's tools are forms of too: a module here only
turns their results into its observation; the catalogue says which module is a form of which.
"""

from __future__ import annotations

import difflib
import inspect
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from vidagent.config import ToolShapes
from vidagent.errors import ToolInputError
from vidagent.llm.base import ChatModel, Message
from vidagent.perception.base import (FrameDescriber, ObjectDetector, OpenVocabularyDetector, TextEmbedder, TextReader,
                                      VisualQA)
from vidagent.perception.detections import class_names
from vidagent.prompts import prompt
from vidagent.tools import capabilities
from vidagent.tools.base import Evidence, Observation, Parameter, Tool
from vidagent.tools.capabilities import Span
from vidagent.tools.declaration import declaration_of, declared
from vidagent.tools.media import ImageMedia, Media, VideoMedia, frame_media
from vidagent.tools.observed import lines, quote, quote_all, segment_text, with_text
from vidagent.tools.refining import refine_stretch, refined_artifact
from vidagent.video.sampling import spread_evenly
from vidagent.video.source import SourceKind
from vidagent.video.video import SampledFrame

PROMPTS = "vidagent.tools"
MOVING: tuple[SourceKind, ...] = ("video", "clip")
STILL: tuple[SourceKind, ...] = ("image", "crop")


def module(name: str, description: str, accepts: tuple[SourceKind, ...], query: str,
           function: Callable[..., Observation], *, reads_history: bool = False) -> Tool:
    """A module called as ``name(query, visual[i])``: a ``Tool`` whose function takes ``(query, media)``.
    ``accepts`` lists the source kinds it takes (empty: it takes no source, the index must be
    ``None``); ``query`` says whether the text query is ``required``, ``optional`` (used when given)
    or ignored (``none``). A module that ``reads_history`` is also given the question and the
    attempt's earlier results, as ``history``. Its description is its usage line, as the planner reads it."""
    parameters = (Parameter("query", str, "a text query, or None", optional=True, words=False,
                            needed=query == "required"),
                  Parameter("visual", int, "visual[i], or None", optional=True, source=True, accepts=accepts))
    written = "None" if query == "none" else '"query"'
    takes = f" Takes: {', '.join(accepts)}." if accepts else ""
    usage = f"{name}({written}, {'visual[i]' if accepts else 'None'}): {description}{takes}"
    return Tool(name, usage, parameters, function, given=("history",) if reads_history else ())


def _declared_module(function: Callable[..., Observation], description: str, query: str) -> Tool:
    """The module whose function is the ``@declared`` method ``function``: its name and the kinds of source
    it takes as declared there; given the question and the results so far when its function takes ``history``."""
    declaration = declaration_of(function)
    return module(declaration.name, description, declaration.accepts, query, function,  # type: ignore[arg-type]
                  reads_history="history" in inspect.signature(function).parameters)


def knowledge_module(tool: Tool) -> Tool:
    """A knowledge tool (one parameter, the question) as a module taking no source: ``name("query", None)``."""
    return module(tool.name, tool.description, (), "required", lambda query, media: tool.function(query))


def source_refusal(tool: Tool, query: str, media: Media | None, label: str) -> str | None:
    """Why a call of a module ``tool`` on ``media`` (``label``: how the planner named it) cannot run,
    as the message for the planner, or None when it fits."""
    source = tool.source_parameter
    accepts = source.accepts if source is not None else ()
    text = next((p for p in tool.parameters if not p.source), None)
    if accepts and media is None:
        return f"{tool.name} needs a source: write {tool.name}(..., visual[i])."
    if not accepts and media is not None:
        return f"{tool.name} takes no source: write {tool.name}(\"query\", None)."
    if media is not None and media.source.kind not in accepts:
        kind = media.source.kind
        return (f"{tool.name} takes {' or '.join(accepts)} sources, but {label} is {_article(kind)} {kind}."
                f"{_hint(accepts, media)}")
    if text is not None and text.needed and not query.strip():
        return f"{tool.name} needs a text query: write {tool.name}(\"...\", {label if media else 'None'})."
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
    grounder: OpenVocabularyDetector | None = None  # finds what a query names (Grounding DINO), when configured
    shapes: ToolShapes = field(default_factory=ToolShapes)  # how much each module reads and shows

    @property
    def _detects(self) -> str:
        return "open vocabulary" if self.grounder is not None else "80 everyday COCO classes"

    def tools(self) -> list[Tool]:
        """The modules, each made from its ``@declared`` method (its name and the sources it takes)."""
        return [_declared_module(function, description, query) for function, description, query in (
            (self.caption, "answers the query's question about an image (None: describes the image).", "optional"),
            (self.video_narration, "what is seen over time in a video: one line per stretch of seconds.", "none"),
            (self.object_detect, f"detects and counts the objects the query names in an image ({self._detects}; "
                                 "None: every object found).", "optional"),
            (self.text_detect, "reads the text shown in an image, or on screen over a video.", "none"),
            (self.asr, "the speech of a video, transcribed, with times.", "none"),
            (self.region_ground, "finds the object the query names in an image and crops it (a new source).",
             "required"),
            (self.narration_ground, "finds the clip of a video whose content best matches the query (a new source).",
             "required"),
            (self.text_ground, "finds where the query's text is written in an image and crops it (a new source); "
                               "\"text: object\" looks for the text on that object.", "required"),
            (self.subtitle_ground, "finds the clip of a video where the speech best matches the query "
                                   "(a new source).", "required"),
            (self.knowledge_reason, "answers from general knowledge and the results so far, seeing no source.",
             "required"),
            (self.narration_reason, "answers a question from a video's narration.", "required"),
            (self.subtitle_reason, "answers a question from a video's speech.", "required"),
            (self.temporal_reason, "cuts the clip a time phrase names: \"beginning\", \"middle\", \"end\", "
                                   "or \"before: 3\" / \"after: 2-4\" (seconds); a new source.", "required"),
            (self.get_frame, "takes the frame at a time (seconds, or \"middle\") of a video as an image "
                             "(a new source).", "required"),
        )]

    # -- perceivers ----------------------------------------------------------------------------
    @declared("source", "pixels model", needs="pixels", of="describe ask_frames", accepts=STILL, does="looks_first")
    def caption(self, query: str, media: Media | None) -> Observation:
        image = _still(media)
        if not _given(query):
            seen = capabilities.describe(self.describer, [image.pixels])[0]
            return Observation(f"Description: {seen}", evidence=_evidence(image, seen))
        frame = SampledFrame(image.source.window[0] if image.source.window else 0.0, image.pixels)
        looked = capabilities.ask_frames(self.vqa, query, [frame])
        return Observation(f"Description: {lines(looked.description)}\nAnswer: {quote(looked.answer)}",
                           evidence=_evidence(image, looked.answer, "model"))

    @declared("source", "descriptions", refines=True, of="read_span", accepts=MOVING, does="looks_first")
    def video_narration(self, query: str, media: Media | None) -> Observation:
        return self._narration(_moving(media), self.shapes.module_lines)

    def _narration(self, video: VideoMedia, max_lines: int | None = None, max_chars: int | None = None) -> Observation:
        reading = capabilities.read_span(video.memory, _span(video), self.shapes.module_lines)
        segments = reading.segments
        said = [with_text(s.description, s.on_screen_text) for s in segments]
        narration = [f"{s.start_s:.1f}-{s.end_s:.1f} s: {text}" for s, text in zip(segments, said)]
        if not narration:
            return Observation("The memory holds no narration for this source.", is_error=True)
        text, kept = _shown(narration, "stretches", max_lines, max_chars)
        return Observation(text, evidence=tuple(Evidence(segments[i].start_s, segments[i].end_s, said[i],
                                                         video.source.id) for i in kept),
                           artifacts=refined_artifact(reading.refined))

    @declared("source", "pixels", needs="pixels", accepts=STILL)
    def object_detect(self, query: str, media: Media | None) -> Observation:
        image = _still(media)
        if self.grounder is not None and _given(query):
            return self._ground_objects(query, image)
        detections = self.detector.detect([image.pixels])[0]
        counts: dict[str, int] = {}
        for label in class_names(detections):
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
        return Observation(text, evidence=_evidence(image, listing, "objects"))

    @declared("source", "pixels text", needs="pixels", refines=True, accepts=MOVING + STILL)
    def text_detect(self, query: str, media: Media | None) -> Observation:
        if media is not None and media.source.is_moving:
            return self._text_on_screen(_moving(media))
        image = _still(media)
        boxes = [box for box in self.reader.read(image.pixels) if box.score >= self.shapes.ocr_score]
        if not boxes:
            return Observation("No text was read in this image.", evidence=_evidence(image, ""))
        text = " | ".join(box.text for box in boxes)
        return Observation(f"Text: {quote(text)}", evidence=_evidence(image, text, "text"))

    def _text_on_screen(self, video: VideoMedia) -> Observation:
        """The on-screen text the memory read over a video's window, by time."""
        start, end = video.window
        refined = refined_artifact(refine_stretch(video.memory, video.segments(), self.shapes.module_lines))
        by_time: dict[float, list[str]] = {}
        for time_s, _, text in video.memory.on_screen_text:
            if start <= time_s <= end:
                by_time.setdefault(round(time_s, 1), []).append(text)
        if not by_time:
            return Observation("No on-screen text was read in this source.", artifacts=refined)
        read = [f"{t:.1f} s: {quote_all(texts)}" for t, texts in by_time.items()]
        return Observation("\n".join(spread_evenly(read, self.shapes.module_lines)),
                           evidence=(Evidence(start, end, "on-screen text", video.source.id, kind="text"),),
                           artifacts=refined)

    @declared("source", "speech", needs="speech", of="hear", accepts=MOVING)
    def asr(self, query: str, media: Media | None) -> Observation:
        return self._speech(_moving(media), self.shapes.module_lines)

    def _speech(self, video: VideoMedia, max_lines: int | None = None, max_chars: int | None = None) -> Observation:
        heard = capabilities.hear(video.memory, _span(video))
        if not heard.has_audio:
            return Observation("This video has no audio track.")
        spoken = heard.lines
        said = [f"{a:.1f}-{b:.1f} s: {quote(text)}" for a, b, text in spoken]
        if not said:
            return Observation("No speech was recognised in this source.")
        text, kept = _shown(said, "lines", max_lines, max_chars)
        return Observation(text, evidence=tuple(Evidence(spoken[i][0], spoken[i][1], spoken[i][2], video.source.id,
                                                         kind="speech")
                                                for i in kept))

    # -- locators ------------------------------------------------------------------------------
    @declared("source", "pixels", needs="pixels", accepts=STILL)
    def region_ground(self, query: str, media: Media | None) -> Observation:
        image = _still(media)
        if self.grounder is not None:
            found = self.grounder.detect([image.pixels], [query])[0]
            if not len(found):
                return Observation(f"Nothing matching '{query}' was found.", evidence=_evidence(image, ""))
            best = int(np.argmax(found.confidence))
            crop = image.crop(found.xyxy[best])
            x1, y1, x2, y2 = (int(v) for v in crop.source.box or (0, 0, 0, 0))
            return Observation(f"Found {query} (score {float(found.confidence[best]):.2f}) at [{x1}, {y1}, {x2}, {y2}].",
                               evidence=_evidence(image, query), media=(crop,))
        detections = self.detector.detect([image.pixels])[0]
        if not len(detections):
            return Observation(f"Nothing was detected to match '{query}' (the detector knows 80 COCO classes).")
        names = class_names(detections)
        labels = sorted(set(names))
        similarity = dict(zip(labels, capabilities.similarities(self.embedder, query, labels)))
        scores = [similarity[label] * (0.5 + 0.5 * float(score))
                  for label, score in zip(names, detections.confidence)]
        best = int(np.argmax(scores))
        crop = image.crop(detections.xyxy[best])
        x1, y1, x2, y2 = (int(v) for v in crop.source.box or (0, 0, 0, 0))
        return Observation(f"Found {names[best]} (match {similarity[names[best]]:.2f}) "
                           f"at [{x1}, {y1}, {x2}, {y2}].", evidence=_evidence(image, names[best]),
                           media=(crop,))

    @declared("source", "pixels text", needs="pixels", accepts=STILL)
    def text_ground(self, query: str, media: Media | None) -> Observation:
        """AssistGPT's ``text[:object_name]``: the OCR text most like ``text``; when several match and an
        object is named, the one on (most inside) that object's box."""
        image = _still(media)
        target, _, object_name = (part.strip() for part in query.partition(":"))
        target = target.lower()
        boxes = [box for box in self.reader.read(image.pixels) if box.score >= self.shapes.ocr_score]
        if not boxes:
            return Observation("No text was read in this image.")
        ratios = [_text_match(target, box.text.lower()) for box in boxes]
        best = int(np.argmax(ratios))
        if ratios[best] < self.shapes.text_match:
            shown = quote_all(box.text for box in boxes[:self.shapes.module_lines])
            return Observation(f"No text like '{target}' was found. The texts read are: {shown}")
        note = ""
        matches = [i for i, ratio in enumerate(ratios) if ratio >= self.shapes.text_match]
        if object_name and len(matches) > 1:
            on_object = self._on_object(image, object_name, [boxes[i].box for i in matches])
            if on_object is None:
                note = f" ({len(matches)} texts match; no {object_name} was found to choose by)"
            else:
                best, note = matches[on_object], f" (on the {object_name})"
        crop = image.crop(boxes[best].box)
        return Observation(f"Found {quote(boxes[best].text)} at {[int(v) for v in boxes[best].box]}{note}.",
                           evidence=_evidence(image, boxes[best].text, "text"), media=(crop,))

    def _on_object(self, image: ImageMedia, object_name: str, text_boxes: Sequence[Sequence[float]]) -> int | None:
        """Which of ``text_boxes`` lies most inside a box of the object named (None: no such object found)."""
        if self.grounder is not None:
            objects = self.grounder.detect([image.pixels], [object_name])[0].xyxy
        else:
            found = self.detector.detect([image.pixels])[0]
            objects = [box for box, label in zip(found.xyxy, class_names(found)) if _names(object_name, label)]
        if not len(objects):
            return None
        inside = [max(_inside(text, box) for box in objects) for text in text_boxes]
        return int(np.argmax(inside)) if max(inside) > 0 else None

    @declared("source", "descriptions", refines=True, of="localise", accepts=MOVING)
    def narration_ground(self, query: str, media: Media | None) -> Observation:
        video = _moving(media)
        found = capabilities.localise(video.memory, self.embedder, query, _span(video), limit=1,
                                      whole=self.shapes.module_lines)
        segments, refined = found.segments, found.refined
        if not segments:
            return Observation("The memory holds no narration for this source.", is_error=True)
        if not found.ranked:  # a partial memory has looked at none of them yet
            return Observation("The memory holds no narration for this source yet.", is_error=True,
                               artifacts=refined_artifact(refined))
        match = found.ranked[0]
        best = [s.segment_id for s in segments].index(match.segment.segment_id)
        first, last = segments[max(0, best - 1)], segments[min(len(segments) - 1, best + 1)]
        clip = video.clip(first.start_s, last.end_s)
        start, end = clip.window
        matched = match.segment
        seen = with_text(matched.description, matched.on_screen_text)
        return Observation(f"The best match is {matched.start_s:.1f}-{matched.end_s:.1f} s "
                           f"(similarity {match.score:.2f}): {seen}\n"
                           f"Cut the clip {start:.1f}-{end:.1f} s around it.",
                           evidence=(Evidence(start, end, segment_text(matched), video.source.id),), media=(clip,),
                           artifacts=refined_artifact(refined))

    @declared("source", "speech", needs="speech", of="match_speech", accepts=MOVING)
    def subtitle_ground(self, query: str, media: Media | None) -> Observation:
        video = _moving(media)
        match = capabilities.match_speech(video.memory, self.embedder, query, _span(video))
        if match is None:
            return Observation("Warning: no speech in this source, so no clip was found by its subtitles.")
        start_s, end_s, text = match.line
        clip = video.clip(start_s - 1.0, end_s + 1.0)
        start, end = clip.window
        return Observation(f"The speech that matches best (similarity {match.score:.2f}) is at "
                           f"{start_s:.1f}-{end_s:.1f} s: {quote(text)}\nCut the clip {start:.1f}-{end:.1f} s.",
                           evidence=(Evidence(start, end, text.strip(), video.source.id, kind="speech"),), media=(clip,))

    @declared("source", "", accepts=MOVING)
    def temporal_reason(self, query: str, media: Media | None) -> Observation:
        video = _moving(media)
        start, end = _temporal_window(query, video.window, self.shapes.absolute_parts, self.shapes.relative_parts)
        clip = video.clip(start, end)
        low, high = clip.window
        return Observation(f"'{query}' is {low:.1f}-{high:.1f} s.",
                           evidence=(Evidence(low, high, query, video.source.id),), media=(clip,))

    @declared("source", "pixels", needs="pixels", accepts=MOVING)
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
        frame = frame_media(video, time_s, self.shapes.frame_max_side)
        return Observation(f"Took the frame at {time_s:.1f} s.",
                           evidence=(Evidence(time_s, time_s, "frame", video.source.id),), media=(frame,))

    # -- reasoners -----------------------------------------------------------------------------
    @declared("source", "model")
    def knowledge_reason(self, query: str, media: Media | None, history: str = "") -> Observation:
        results = history[-self.shapes.history_chars:] if history.strip() else "(no results yet)"
        return Observation(self._ask("assist_knowledge", query=query, history=results))

    @declared("source", "descriptions model", refines=True, of="read_span", accepts=MOVING)
    def narration_reason(self, query: str, media: Media | None) -> Observation:
        narration = self._narration(_moving(media), max_chars=self.shapes.reason_chars)
        if narration.is_error:
            return narration
        answer = self._ask("assist_reason", what="a video", material_name="Narration",
                           material_note=prompt(PROMPTS, "assist_note_narration").text, material=narration.text,
                           query=query)
        return Observation(f"Answer: {quote(answer)}", evidence=narration.evidence, artifacts=narration.artifacts)

    @declared("source", "speech model", needs="speech", of="hear", accepts=MOVING)
    def subtitle_reason(self, query: str, media: Media | None) -> Observation:
        speech = self._speech(_moving(media), max_chars=self.shapes.reason_chars)
        if not speech.evidence:
            return Observation(f"{speech.text} There is nothing to reason over.")
        answer = self._ask("assist_reason", what="a video", material_name="Speech",
                           material_note=prompt(PROMPTS, "assist_note_speech").text, material=speech.text, query=query)
        return Observation(f"Answer: {quote(answer)}", evidence=speech.evidence)

    # -- helpers -------------------------------------------------------------------------------
    def _ask(self, name: str, **values: str) -> str:
        """The model's reply to the prompt ``name`` filled with ``values``, under that prompt's budget."""
        reasoner = prompt(PROMPTS, name)
        request = reasoner.render(**values)
        return self.llm.chat([Message("user", request)], max_tokens=reasoner.budget, stop=reasoner.stop).text.strip()

    def _ground_objects(self, query: str, image: ImageMedia) -> Observation:
        """object_detect with the open-vocabulary detector: the objects the query names, counted."""
        assert self.grounder is not None
        names = [name.strip() for name in re.split(r",|\band\b", query) if name.strip()] or [query]
        found = self.grounder.detect([image.pixels], names)[0]
        counts = {name: sum(1 for label in class_names(found) if label == " ".join(name.split())) for name in names}
        listing = "; ".join(f"{n} {name}" for name, n in counts.items())
        return Observation(f"{listing} found (open-vocabulary detection of the query).",
                           evidence=_evidence(image, listing))


def _shown(lines: list[str], what: str, max_lines: int | None, max_chars: int | None) -> tuple[str, list[int]]:
    """``lines`` joined, evenly thinned to at most ``max_lines`` lines or ``max_chars`` characters, with
    a note saying how many of them are shown when some are left out; and the indices of those shown
    (each is its own piece of evidence: what was read, and what the evaluation counts as read)."""
    count = len(lines)
    if max_lines is not None:
        count = min(count, max_lines)
    if max_chars is not None:
        total = sum(len(line) + 1 for line in lines)
        if total > max_chars:
            count = min(count, max(2, len(lines) * max_chars // total))
    kept = spread_evenly(list(range(len(lines))), count)
    note = f"({len(kept)} of {len(lines)} {what}, evenly spread)\n" if len(kept) < len(lines) else ""
    return note + "\n".join(lines[i] for i in kept), kept


def _inside(inner: Sequence[float], outer: Sequence[float]) -> float:
    """The share of box ``inner``'s area that lies inside box ``outer`` (x1, y1, x2, y2)."""
    width = min(inner[2], outer[2]) - max(inner[0], outer[0])
    height = min(inner[3], outer[3]) - max(inner[1], outer[1])
    area = (inner[2] - inner[0]) * (inner[3] - inner[1])
    return max(0.0, width) * max(0.0, height) / area if area > 0 else 0.0


def _temporal_window(query: str, window: tuple[float, float], absolute_parts: int = 5,
                     relative_parts: int = 8) -> tuple[float, float]:
    """AssistGPT's rule: beginning/middle/end are the first/middle/last of five parts; before/after
    a time are the part of eight just before the one holding it, or just after."""
    start, end = window
    text = query.lower()
    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)]
    if ("before" in text or "after" in text) and numbers:
        part = (end - start) / relative_parts
        # the part holding the time, counted past either end (-1, relative_parts) when it lies outside
        if "before" in text:
            index = min(relative_parts, int((min(numbers) - start) // part)) - 1
        else:
            index = max(-1, int((max(numbers) - start) // part)) + 1
        if not 0 <= index < relative_parts:
            raise ToolInputError(f"there is nothing {'before' if 'before' in text else 'after'} "
                                 f"{numbers[0]:g} s in {start:.1f}-{end:.1f} s")
        return start + index * part, start + (index + 1) * part
    part = (end - start) / absolute_parts
    for words, index in ((("beginning", "begin", "start", "first", "opening"), 0), (("middle", "halfway"), absolute_parts // 2),
                         (("end", "last", "final", "finish"), absolute_parts - 1)):
        if any(re.search(rf"\b{word}", text) for word in words):
            return start + index * part, start + (index + 1) * part
    raise ToolInputError("temporal_reason takes \"beginning\", \"middle\", \"end\", \"before: <seconds>\" "
                         f"or \"after: <seconds>\"; got {query!r}")


def _span(video: VideoMedia) -> Span:
    """The window a video or clip covers, as the capabilities take it."""
    return Span.of_times(*video.window)


def _still(media: Media | None) -> ImageMedia:
    """The image or crop a module was given, typed as one (the executor checked its kind against the module's)."""
    if not isinstance(media, ImageMedia):
        raise ToolInputError("this module takes an image or a crop")
    return media


def _moving(media: Media | None) -> VideoMedia:
    """The video or clip a module was given, typed as one (the executor checked its kind against the module's)."""
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


def _evidence(image: ImageMedia, text: str, kind: str = "description") -> tuple[Evidence, ...]:
    window = image.source.window or (0.0, 0.0)
    return (Evidence(window[0], window[1], text, image.source.id, kind=kind),)


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def _hint(accepts: tuple[str, ...], media: Media) -> str:
    if media.source.is_moving and set(accepts) <= set(STILL):
        return " Take a frame first with get_frame(\"<seconds>\", visual[i]), or use a video module."
    if not media.source.is_moving and set(accepts) <= set(MOVING):
        return " Use an image module (caption, object_detect, text_detect) on it."
    return ""


_STOPWORDS = frozenset("the and how many are there any what who which where when does this that with for from "
                       "image video picture count find detect".split())
