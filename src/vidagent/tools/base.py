"""The one ``Tool`` type: a name, a description, typed parameters and a function.

A parameter may be a source reference (``accepts`` names the kinds of source it takes: AssistGPT's
modules are called ``name("query", visual[i])``); the caller that holds the question's sources
resolves it and refuses a source of the wrong kind before the tool runs (``source_refusal``).

Planners speak to tools in text (ReAct ``Action Input: ...``) or JSON; ``Tool.parse_arguments``
accepts both leniently and turns anything it cannot use into a ``ToolInputError`` whose message
tells the model how to call the tool. ``Tool.__call__`` never raises, neither for bad input nor
for a tool that fails (a model error, a bug): it returns a one-line error ``Observation`` instead,
so a planner can always continue; an unexpected failure's traceback goes to the ``logging`` module.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from vidagent.errors import ToolInputError, VidagentError

if TYPE_CHECKING:
    from vidagent.tools.media import Media

_log = logging.getLogger(__name__)
_MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class Parameter:
    """One argument of a tool. An ``optional`` one may be given as ``None`` (the tool gets None).
    A ``str`` argument must hold a word (a number there is mostly a misplaced argument) unless
    ``words`` is False, for free text such as a time ("2.5")."""

    name: str
    type: type  # int, float or str
    description: str
    optional: bool = False
    words: bool = True
    source: bool = False  # a source reference: an index into the question's sources (``visual[i]``)
    accepts: tuple[str, ...] = ()  # a source reference's kinds of source (none: the tool takes no source)
    needed: bool = False  # ``None`` parses, but the tool needs a value: the call is refused with how to write it


# What an evidence item's text is, and how the faces say it: what the memory holds about the video (its
# descriptions, speech, on-screen text, object rows), a passage of an attached document, a file a tool made, or
# what a model said about frames it was shown (a visual-QA reply: the model's words, never the video's own).
EVIDENCE_KINDS: dict[str, str] = {
    "description": "description", "speech": "speech", "text": "on-screen text", "objects": "object memory",
    "document": "document", "file": "file made", "model": "a model's answer",
}


@dataclass(frozen=True)
class Evidence:
    """What supports an observation: a stretch of a video (``source`` names the video, by its id), or a
    place in a knowledge source that is no time span (``where``: a document's page or section, a web
    address, the SQL that read a table; its ``source`` is the tool's name, ``<file>_knowledge`` or ``web_search``)."""

    start_s: float
    end_s: float
    text: str
    source: str = ""
    where: str = ""
    supports: bool | None = None  # the answer's check: this span shows the answer right (None: not checked)
    kind: str = "description"  # what the text is (EVIDENCE_KINDS): read from the memory, or said by a model

    def to_dict(self) -> dict[str, Any]:
        spans = {"start_s": self.start_s, "end_s": self.end_s, "text": self.text, "source": self.source,
                 "kind": self.kind}
        if self.where:
            spans["where"] = self.where
        if self.supports is not None:
            spans["supports"] = self.supports
        return spans


@dataclass(frozen=True)
class Observation:
    """What a tool returns: text for the model, evidence spans for the user, and the clips or
    crops it cut (``media``), which become new sources of the question."""

    text: str
    evidence: tuple[Evidence, ...] = ()
    is_error: bool = False
    artifacts: Mapping[str, Any] = field(default_factory=dict)
    media: tuple["Media", ...] = ()


@dataclass(frozen=True)
class Tool:
    """``given``: keyword arguments the caller supplies, never the model (``knowledge_reason`` is
    given the question and the results so far as ``history``)."""

    name: str
    description: str
    parameters: tuple[Parameter, ...]
    function: Callable[..., Observation]
    given: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_parameters(self)

    @property
    def source_parameter(self) -> Parameter | None:
        """The parameter that names a source (``visual[i]``), if the tool has one."""
        return next((p for p in self.parameters if p.source), None)

    def signature(self) -> str:
        """``name(a: int, b: str)`` for prompts and error messages."""
        args = ", ".join(f"{p.name}: {p.type.__name__}" for p in self.parameters)
        return f"{self.name}({args})"

    def parse_arguments(self, raw: str | Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
        """Turn a model's argument text (or a JSON object/array) into typed keyword arguments."""
        if isinstance(raw, Mapping):
            values: Mapping[str, Any] | Sequence[Any] = raw
        elif isinstance(raw, (list, tuple)):
            values = raw
        else:
            values = self._parse_text(str(raw))
        if isinstance(values, Mapping):
            by_name = {str(k).strip().lower(): v for k, v in values.items()}
            missing = [p.name for p in self.parameters if p.name.lower() not in by_name]
            if missing and len(by_name) == len(self.parameters):  # right count, wrong names: take them in order
                ordered: Sequence[Any] = list(values.values())
            elif missing:
                raise ToolInputError(f"{self.signature()} is missing {', '.join(missing)}")
            else:
                ordered = [by_name[p.name.lower()] for p in self.parameters]
        else:
            ordered = list(values)
        if len(ordered) != len(self.parameters):
            raise ToolInputError(
                f"{self.signature()} takes {len(self.parameters)} argument(s), got {len(ordered)}: {raw!r}"
            )
        return {p.name: _coerce(value, p, self) for p, value in zip(self.parameters, ordered)}

    def _parse_text(self, text: str) -> Mapping[str, Any] | Sequence[Any]:
        text = text.strip().strip("`").strip()
        if text.startswith(self.name):  # e.g. "caption_retrieval(0, 4)"
            text = text[len(self.name):].strip()
        if not text:
            return []
        for loader in (json.loads, ast.literal_eval):
            try:
                value = loader(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, Mapping):
                return value
            if isinstance(value, (list, tuple)):
                if len(self.parameters) == 1 and len(value) != 1:
                    return [" ".join(str(v) for v in value)] if value else []
                return list(value)
            return [value]
        pairs = re.findall(r"(\w+)\s*[=:]\s*(\"[^\"]*\"|'[^']*'|[^,]+)", text)
        names = {p.name.lower() for p in self.parameters}
        if pairs and all(key.lower() in names for key, _ in pairs):
            return {key: value.strip().strip("\"'") for key, value in pairs}
        if len(self.parameters) == 1:
            return [_strip_wrapping(text)]
        return _split_positional(_strip_wrapping(text), self.parameters)

    def __call__(self, raw: str | Mapping[str, Any] | Sequence[Any] = "") -> Observation:
        try:
            arguments = self.parse_arguments(raw)
            return self.function(**arguments)
        except ToolInputError as error:
            return Observation(f"Error: {_one_line(str(error))}", is_error=True)
        except VidagentError as error:
            return Observation(f"Error: {self.name} failed: {_one_line(str(error))}", is_error=True)
        except Exception as error:  # a failure nobody planned for still ends only this call, not the question
            kind = type(error).__name__
            detail = _one_line(f"{kind}: {error}" if str(error).strip() else kind)
            _log.warning("tool %s failed: %s", self.name, detail)
            _log.debug("tool %s failed; traceback:", self.name, exc_info=True)
            return Observation(f"Error: {self.name} failed: {detail}", is_error=True)


def _one_line(text: str) -> str:
    """Collapse newlines and runs of spaces; cut very long messages."""
    line = " ".join(text.split())
    return line if len(line) <= _MAX_ERROR_CHARS else line[: _MAX_ERROR_CHARS - 3] + "..."


def _strip_wrapping(text: str) -> str:
    text = text.strip()
    while len(text) >= 2 and text[0] + text[-1] in ("()", "[]", '""', "''", "{}"):
        text = text[1:-1].strip()
    return text


def _split_positional(text: str, parameters: Sequence[Parameter]) -> list[str]:
    """Split ``a, b`` into parameters; a free-text (str) parameter absorbs stray commas."""
    count = len(parameters)
    text_params = [i for i, p in enumerate(parameters) if p.type is str]
    if not text_params or text_params[0] == count - 1:
        parts = text.split(",", count - 1)
    else:
        parts = text.rsplit(",", count - 1)
    if len(parts) < count and all(p.type is not str for p in parameters):
        parts = text.split()
    if len(parts) < count and count == 2 and {p.type for p in parameters} == {str, int}:
        # "What is the boy wearing? 0": the number sits at the far end from the text, no comma
        number_last = parameters[1].type is int
        match = re.fullmatch(r"(.*\D)\s+(-?\d+)" if number_last else r"(-?\d+)\s+(\D.*)", text.strip(), re.DOTALL)
        if match:
            parts = [match.group(1), match.group(2)]
    return [part.strip().strip("\"'") for part in parts]


def _coerce(value: Any, parameter: Parameter, tool: Tool) -> Any:
    if parameter.optional and (value is None or str(value).strip().lower() in ("", "none", "null")):
        return None
    if parameter.type is str:
        if isinstance(value, (list, tuple)):
            value = " ".join(str(v) for v in value)
        text = str(value).strip()
        if not text:
            raise ToolInputError(f"{tool.signature()}: {parameter.name} is empty")
        if parameter.words and not re.search(r"[^\W\d_]", text):
            raise ToolInputError(f"{tool.signature()}: {parameter.name} must be text in words, got {text!r}")
        return text
    if isinstance(value, bool):
        raise ToolInputError(f"{tool.signature()}: {parameter.name} must be a number, got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ToolInputError(f"{tool.signature()}: {parameter.name} must be a finite number, got {value!r}")
        return parameter.type(value)
    match = re.search(r"-?\d+(?:\.\d+)?", str(value))
    if match is None:
        raise ToolInputError(f"{tool.signature()}: {parameter.name} must be a number, got {value!r}")
    number = float(match.group())
    return int(round(number)) if parameter.type is int else number


def _check_parameters(tool: Tool) -> None:
    """Refuse a tool whose declared parameters (and ``given`` ones) its function does not take, or whose
    function needs one it does not declare: a mismatch fails when the tool is made, not when a model
    first calls it."""
    try:
        signature = inspect.signature(tool.function)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check against
        return
    accepted = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted):
        return
    # a source parameter (``visual[i]``) reaches the function as the source's media, under the function's
    # own name for it (the caller binds it), so it is matched by count, not by name
    declared = [p.name for p in tool.parameters if not p.source] + list(tool.given)
    sources = sum(1 for p in tool.parameters if p.source)
    names = {p.name for p in accepted if p.kind is not inspect.Parameter.VAR_POSITIONAL}
    unknown = [name for name in declared if name not in names]
    required = [p.name for p in accepted if p.default is inspect.Parameter.empty
                and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
                and p.name not in declared][sources:]
    if unknown or required:
        problems = ([f"declares {', '.join(unknown)} its function does not take"] if unknown else []) + \
                   ([f"does not declare {', '.join(required)} its function needs"] if required else [])
        raise TypeError(f"tool {tool.name}: {'; '.join(problems)}")
