"""The ``Toolbox``: everything a planner may use for one question, built by the session.

It holds the question's sources as media (``tools.media``: a video's memory, an image's pixels), in
the user's order, and what the planners read of them is derived from those: the first video's
account (length, segments) and the opened memories for planners that read a memory whole (the
caption-only baseline). Besides: the tools (over the memory, the vision models and the chat model),
a note on what the memory's descriptions are, and for planners that take several sources (PEIL) an
``assist`` kit with the AssistGPT modules that take a source each, the frame describer (to summarise
images) and the bank of kept traces. The experience replayed for the question, if any, comes with
it. A planner works only through its toolbox, never through the session.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from vidagent.agent.memory_selection import MemorySelection
from vidagent.agent.steps import ObservationStep, ToolCallStep, Trace
from vidagent.config import ToolShapes
from vidagent.errors import PlannerError
from vidagent.experience.replay import Replay
from vidagent.experience.store import ExperienceStore
from vidagent.llm.base import Usage
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.base import FrameDescriber
from vidagent.prompts import load_prompt, prompt
from vidagent.tools import catalogue
from vidagent.tools.base import Observation, Tool
from vidagent.tools.evidence_selection import EvidenceSelector
from vidagent.tools.media import Media, VideoMedia, videos_among

PROMPTS = "vidagent.agent"


@dataclass(frozen=True)
class AssistKit:
    """What AssistGPT's planner works with besides the chat model and the toolbox's sources: the modules
    (each taking any source), the describer that summarises images, and the bank of kept traces with
    whose it is (its scope)."""

    modules: Mapping[str, Tool] = field(default_factory=dict)
    describer: FrameDescriber | None = None
    examples: ExperienceStore | None = None
    bank_scope: str = ""
    withheld: tuple[str, ...] = ()  # modules the sources cannot serve (no frames in a memory of captions)


@dataclass(frozen=True)
class Toolbox:
    tools: Mapping[str, Tool]
    sources: tuple[Media, ...] = ()  # the question's videos and images, in the user's order
    memory_note: str = ""
    context_tokens: int = 4096  # the chat model's context window, for planners that fill it
    assist: AssistKit = field(default_factory=AssistKit)  # AssistGPT's modules, describer and example bank (PEIL)
    replay: Replay | None = None  # experience chosen for this question (DigimonGPT), shown before it
    sees_frames: bool = True  # visual_question_answering looks at pixels (False: it reads frame descriptions)
    selection: MemorySelection | None = None  # which memories were built ahead of the question, and why
    shapes: ToolShapes = field(default_factory=ToolShapes)  # how much the tools read and show (settings.tools)
    withheld: tuple[str, ...] = ()  # tools this question's memory cannot serve (a memory of captions has no objects)
    attached: tuple[str, ...] = ()  # the knowledge tools (and modules) the user attached: offered by every planner
    selector: EvidenceSelector | None = None  # chooses what to read by retrieval (tools.evidence_selection)

    def experience(self) -> str:
        """The replayed experience as the section a planner puts before the question ('' when none)."""
        return self.replay.section() if self.replay else ""

    @classmethod
    def of(cls, tools: Iterable[Tool], **values: object) -> "Toolbox":
        return cls({tool.name: tool for tool in tools}, **values)  # type: ignore[arg-type]

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    @property
    def video(self) -> VideoMedia | None:
        """The first (for the planners over one video: the only) video among the sources."""
        return next(iter(videos_among(self.sources)), None)

    @property
    def memories(self) -> Mapping[str, VideoMemory]:
        """The memories opened for the question by video id, in the sources' order (none for a planner
        that needs no memory): what the caption-only baseline reads whole and the answer's guards check."""
        return {video.memory.video_id: video.memory for video in videos_among(self.sources) if video.opened}

    def select(self, names: Iterable[str] | None) -> "Toolbox":
        """The same toolbox with only the named tools, in that order (``None``: every tool it holds that its
        declaration offers by default, ``Declaration.offered``: a tool only offered when named is not handed
        to a planner that takes every tool), and the user's knowledge tools after them; a name the memory
        withholds is left out, not an error."""
        if names is None:
            offered = catalogue.names(offered=True)
            names = [name for name in self.tools if name in offered]
        return replace(self, tools=select_tools(self.tools, names, self.withheld, self.attached))

    def describe(self) -> str:
        """One line per tool: its signature and description."""
        return "\n".join(f"- {tool.signature()}: {tool.description}" for tool in self.tools.values())

    def hints(self) -> list[str]:
        """The rules of ``tool_hints`` (``prompts/react.toml``) that apply to the tools present, in its
        order: a line ``a+b: text`` applies when tools a and b are both here, ``knowledge: text`` when
        the user attached knowledge, ``*: text`` always."""
        hints = []
        for line in load_prompt(PROMPTS, "tool_hints").splitlines():
            names, _, text = line.partition(":")
            wanted = [n.strip() for n in names.split("+") if n.strip() != "*"]
            present = [n in self.tools or (n == "knowledge" and bool(self.attached)) for n in wanted]
            if text.strip() and all(present):
                hints.append(text.strip())
        return hints

    def call(self, name: str, arguments: object) -> Observation:
        """Run a tool by name; a tool never raises (failures come back as error observations)."""
        tool = self.tools.get(name)
        if tool is None:
            text = prompt(PROMPTS, "no_such_tool").render(name=repr(name), tool_names=", ".join(self.tools))
            return Observation(text, is_error=True)
        return tool(arguments)  # type: ignore[arg-type]

    def parse(self, name: str, arguments: str | Mapping[str, Any]) -> dict[str, Any] | None:
        """A call's arguments as the tool types them, or None when they do not fit the tool."""
        tool = self.tools.get(name)
        if tool is None:
            return None
        try:
            return tool.parse_arguments(arguments)
        except Exception:  # noqa: BLE001 - any argument the tool cannot take is "does not fit"; the call says why
            return None

    def call_recorded(self, trace: Trace, usage: Usage, parent_id: int, name: str, arguments: str | Mapping[str, Any],
                      *, thought: str = "", model_output: str = "", automatic: bool = False,
                      cost: Mapping[str, Any] | None = None) -> tuple[ToolCallStep, ObservationStep]:
        """Run a tool and record it in the trace: a ``ToolCallStep`` (with the model cost of deciding
        on it, ``cost``) and an ``ObservationStep`` whose tokens are those of the model calls the
        tool made itself (read off ``usage``, the question's running total)."""
        raw = arguments if isinstance(arguments, str) else ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        call = trace.add(ToolCallStep(parent_id=parent_id, thought=thought, tool=name,
                                      arguments=self.parse(name, arguments) or {}, raw_arguments=raw,
                                      model_output=model_output, automatic=automatic, **dict(cost or {})))
        before = replace(usage)
        started = time.perf_counter()
        result = self.call(name, arguments)
        observation = trace.add(ObservationStep(
            parent_id=call.id, tool=name, text=clip(result.text, self.shapes.observation_chars), evidence=tuple(result.evidence),
            artifacts=dict(result.artifacts), is_error=result.is_error,
            prompt_tokens=usage.prompt_tokens - before.prompt_tokens,
            completion_tokens=usage.completion_tokens - before.completion_tokens,
            seconds=time.perf_counter() - started))
        return call, observation


def select_tools(tools: Mapping[str, Tool], names: Iterable[str], withheld: Iterable[str] = (),
                 attached: Iterable[str] = (), what: str = "tool") -> dict[str, Tool]:
    """The named ``tools`` in that order, less those ``withheld`` (a name withheld is left out, not an
    error), and the ``attached`` ones (the user's knowledge) after them; a name of none of them is a
    ``PlannerError`` listing the ``what``s there are (a planner's ``tools`` option, PEIL's ``modules``)."""
    withheld = set(withheld)
    chosen = [name for name in names if name not in withheld]
    chosen += [name for name in attached if name not in chosen]
    unknown = [name for name in chosen if name not in tools]
    if unknown:
        raise PlannerError(f"no {what} named {', '.join(unknown)}; the {what}s are: {', '.join(tools)}")
    return {name: tools[name] for name in chosen}


def clip(text: str, limit: int) -> str:
    """Long tool output cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f" ... [{len(text) - limit} more characters cut]"
