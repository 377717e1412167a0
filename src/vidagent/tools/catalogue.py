"""The catalogue: every tool's and AssistGPT module's declaration, gathered from the builders that make them.

A tool states what it reads, needs and is (``tools.declaration``) on the method that is its function;
this module only gathers those declarations from the builders (``BUILDERS``, in order) and answers
questions over them: the tools matching some facts (``names``), the one doing a planner's job (``doing``),
what sources without frames or speech cannot serve (``unservable``). The workspace derives from it what a
question's sources can serve and which tools read the object memory (so the session can build it ahead);
the planners derive their default tool sets from it, and the toolbox what a planner that takes every tool
is offered (``offered``).

Every tool the workspace builds must be declared (``check_declared``, run when the workspace is built, and a
contract test builds them all): a tool added without a declaration fails loudly, not silently outside the
rules.
"""

from __future__ import annotations

from typing import Iterable

from vidagent.errors import PlannerError
from vidagent.tools.assist import AssistModules
from vidagent.tools.base import Tool
from vidagent.tools.declaration import Declaration, Form, declarations
from vidagent.tools.frames import FrameTools
from vidagent.tools.refer import ReferTools
from vidagent.tools.sql_agent import SQLTools
from vidagent.tools.temporal import TemporalTools
from vidagent.tools.utility import UtilityTools

BUILDERS: tuple[type, ...] = (TemporalTools, SQLTools, FrameTools, UtilityTools, ReferTools, AssistModules)
CATALOGUE: dict[str, Declaration] = {d.name: d for builder in BUILDERS for d in declarations(builder)}


def names(*, form: Form | None = None, reads: str | None = None, needs: str | None = None,
          offered: bool | None = None, in_set: str | None = None, does: str | None = None) -> tuple[str, ...]:
    """The tools matching every filter given, in the catalogue's order (``in_set``: a named tool set's)."""
    return tuple(c.name for c in CATALOGUE.values()
                 if (form is None or c.form == form) and (reads is None or reads in c.reads)
                 and (needs is None or needs in c.needs) and (offered is None or c.offered == offered)
                 and (in_set is None or in_set in c.sets) and (does is None or does in c.does))


def tool_sets() -> dict[str, tuple[str, ...]]:
    """Every named tool set (``videoagent``, ``doraemongpt``) and its tools, in the catalogue's order."""
    found = sorted({name for c in CATALOGUE.values() for name in c.sets})
    return {name: names(in_set=name) for name in found}


def doing(job: str, *, accepts: str | None = None) -> str:
    """The one tool that does ``job`` (``Declaration.does``; with ``accepts``: of those, the one taking that
    kind of source). A job no tool, or more than one, does is a ``PlannerError`` (a declaration out of step)."""
    found = [c.name for c in CATALOGUE.values() if job in c.does and (accepts is None or accepts in c.accepts)]
    if len(found) != 1:
        raise PlannerError(f"{len(found)} tools declare the job {job!r}"
                           f"{f' for a {accepts}' if accepts else ''} (vidagent.tools.declaration); one must")
    return found[0]


def unservable(form: Form, *, pixels: bool, speech: bool) -> tuple[str, ...]:
    """The tools of ``form`` that sources without frames (``pixels`` false) or without speech
    (``speech`` false) cannot serve, in the catalogue's order."""
    missing = {need for need, present in (("pixels", pixels), ("speech", speech)) if not present}
    return tuple(c.name for c in CATALOGUE.values() if c.form == form and c.needs & missing)


def check_declared(tools: Iterable[Tool], form: Form) -> None:
    """Refuse a tool the catalogue does not hold in ``form`` (a tool made without a declaration, or by a builder
    missing from ``BUILDERS``)."""
    stray = [tool.name for tool in tools if tool.name not in CATALOGUE or CATALOGUE[tool.name].form != form]
    if stray:
        raise PlannerError(f"tools not declared (vidagent.tools.declaration) by a builder of the catalogue as {form} "
                           f"tools: {', '.join(stray)}")
