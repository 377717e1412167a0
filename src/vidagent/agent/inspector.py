"""AssistGPT's Inspector and Executor: the sources a planner can point at, and the calls on them.

The ``Inspector`` keeps every source of one attempt in order, ``visual[0]``, ``visual[1]``, ...:
the user's videos and images first, then each clip or crop a module cuts, with a one-line summary
(kind, where it came from, duration, audio, speech, on-screen text, what it shows) that goes into
the planner's context as soon as the source appears. The ``Executor`` binds the modules (``Tool``s
whose source parameter names the kinds they take) to those sources: the planner calls them with
``(query, visual)``, and the executor checks the index and the source's kind before running one,
so a wrong call becomes a precise error observation, never a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from vidagent.perception.base import FrameDescriber
from vidagent.prompts import prompt
from vidagent.tools.assist import source_refusal
from vidagent.tools.base import Observation, Tool
from vidagent.tools.media import Media, MediaFacts

PROMPTS = "vidagent.agent"


@dataclass(frozen=True)
class SourceEntry:
    """One source of an attempt as the inspector lists it: the media, where it came from, its summary."""

    media: Media
    origin: str
    summary: str

    @property
    def label(self) -> str:
        """``visual[i]``, the planner's name for it."""
        return self.summary.split(":", 1)[0].split(" (", 1)[0]


@dataclass
class Inspector:
    """The sources of one attempt, each with its summary."""

    describer: FrameDescriber | None = None
    entries: list[SourceEntry] = field(default_factory=list)

    def add(self, media: Media, origin: str) -> tuple[SourceEntry, bool]:
        """Record a source (the same clip cut twice is kept once); returns its entry and whether it is new."""
        for entry in self.entries:
            if entry.media.source.id == media.source.id:
                return entry, False
        index = len(self.entries)
        named = f" ({self._user_name(media)})" if media.source.parent is None else ""
        summary = f"visual[{index}]{named}: {self._describe(media, origin, media.facts(self.describer))}"
        entry = SourceEntry(media, origin, summary)
        self.entries.append(entry)
        return entry, True

    def label(self, source_id: str) -> str:
        for index, entry in enumerate(self.entries):
            if entry.media.source.id == source_id:
                return f"visual[{index}]"
        return source_id

    def summaries(self) -> str:
        return "\n".join(entry.summary for entry in self.entries)

    def name(self, index: int) -> str:
        """What the user calls ``visual[index]``: a file name (the path where two share a name), or a clip or crop
        said by its window of such a file."""
        source = self.entries[index].media.source
        if source.parent is None:
            return self._user_name(self.entries[index].media)
        parent = next((i for i, e in enumerate(self.entries) if e.media.source.id == source.parent), None)
        of = self.name(parent) if parent is not None else source.root
        if source.kind == "clip" and source.window:
            return f"{source.window[0]:g}-{source.window[1]:g} s of {of}"
        at = f" at {source.window[0]:g} s" if source.window and source.kind == "crop" else ""
        return f"a crop of {of}{at}"

    def readable(self, text: str) -> str:
        """``text`` with every ``visual[i]`` of this attempt's sources said by its name (``name``): the words of
        an answer the user reads, who never saw the planner's labels."""
        def named(match: re.Match[str]) -> str:
            index = int(match.group(1))
            return self.name(index) if 0 <= index < len(self.entries) else match.group(0)
        return re.sub(r"visual\s*\[\s*(\d+)\s*\]", named, text)

    def _user_name(self, media: Media) -> str:
        source = media.source
        if not source.path:
            return source.id
        name = Path(source.path).name
        same = [e for e in self.entries if e.media.source.parent is None and e.media.source.id != source.id
                and Path(e.media.source.path).name == name]
        return source.path if same else name

    def _describe(self, media: Media, origin: str, known: MediaFacts) -> str:
        what, details = self._moving(media, known) if media.source.is_moving else self._still(media, known)
        content = f"; content: {known.content}" if known.content else ""
        return f"{what}, {origin}; {', '.join(details)}{content}"

    def _moving(self, media: Media, known: MediaFacts) -> tuple[str, list[str]]:
        """What a video or clip is (its length, where it was cut), and whether it has audio, speech and text."""
        source = media.source
        duration = f"{known.duration_s:.1f}"
        what = f"{_article_for_number(duration)} {duration} s {source.kind}"
        if source.kind == "clip" and source.window:
            what += f" ({source.window[0]:.1f}-{source.window[1]:.1f} s of {self.label(source.parent or '')})"
        return what, [f"audio: {'yes' if known.has_audio else 'none'}",
                      f"speech: {'yes' if known.has_speech else 'none'}",
                      f"on-screen text: {'yes' if known.has_text else 'none'}"]

    def _still(self, media: Media, known: MediaFacts) -> tuple[str, list[str]]:
        """What an image or crop is (its size, where it was cut), and whether it shows text."""
        source = media.source
        width, height = known.size or (0, 0)
        what = f"a {width}x{height} {'image' if source.kind == 'image' else 'crop'}"
        if source.kind == "crop":
            at = f" at {source.window[0]:.1f} s" if source.window else ""
            what += f" of {self.label(source.parent or '')}{at}"
        return what, [f"text: {'yes' if known.has_text else 'none'}"]


class Executor:
    """The modules as ``Tool``s over the inspector's sources. ``added`` collects the entries of
    sources the modules cut since it was last emptied; ``results`` every call made and what it
    returned, which a module that reads the history (``knowledge_reason``) is given with the question."""

    def __init__(self, modules: Mapping[str, Tool], inspector: Inspector, question: str = "") -> None:
        self.modules = modules
        self.inspector = inspector
        self.question = question
        self.added: list[SourceEntry] = []
        self.results: list[str] = []

    def history(self) -> str:
        """The question and the results of the calls so far, oldest first."""
        asked = [f"Question: {self.question}"] if self.question else []
        return "\n".join(asked + self.results)

    def tools(self) -> list[Tool]:
        """The modules as the planner calls them: the same tools, over this attempt's sources."""
        return [Tool(module.name, module.description, module.parameters, self._runner(module))
                for module in self.modules.values()]

    def _runner(self, module: Tool):  # type: ignore[no-untyped-def]
        def run(query: str | None, visual: int | None) -> Observation:
            return self.execute(module, query, visual)
        return run

    def execute(self, module: Tool, query: str | None, visual: int | None) -> Observation:
        """Check the call, run the module, and record any source it cut."""
        query = query or ""
        entries = self.inspector.entries
        media: Media | None = None
        label = "None"
        source = module.source_parameter
        if visual is not None and source is not None and source.accepts:
            if not 0 <= visual < len(entries):
                last = f"visual[0] to visual[{len(entries) - 1}]" if entries else "no sources"
                return Observation(prompt(PROMPTS, "no_such_source").render(index=visual, listed=last), is_error=True)
            media, label = entries[visual].media, f"visual[{visual}]"
        refusal = source_refusal(module, query, media, label)
        if refusal:
            return Observation(f"Error: {refusal}", is_error=True)
        if "history" in module.given:
            observation = module.function(query, media, history=self.history())
        else:
            observation = module.function(query, media)
        lines = [f"{module.name} of {label}:\n{observation.text}" if media is not None and not observation.is_error
                 else observation.text]
        self.results.append(f"{module.name}({query!r}, {label}) -> {observation.text}")
        for made in observation.media:
            entry, new = self.inspector.add(made, f"cut by {module.name} from {label}")
            if new:
                self.added.append(entry)
            lines.append(f"New source: {entry.summary}" if new else f"(this is {entry.label}, already listed)")
        return Observation("\n".join(lines), observation.evidence, observation.is_error, observation.artifacts,
                           observation.media)


def _article_for_number(number: str) -> str:
    """"an" before a number read with a leading vowel sound (8, 11, 18, 80-89, 800-899, ...), else "a"."""
    return "an" if re.match(r"(8|11\.|18\.|11\d\d\d\.|18\d\d\d\.)", number) else "a"
