"""Which object of the object memory a referring expression means.

``ObjectFacts.load`` reads, with SQL over one video's memory, what an expression can be matched
against: each object's class, colour words (from ``objects.appearance``), its sampled positions and
sizes (``detections.cx, cy, area``), its actions (the ``actions`` table, where that stage is built;
``objects.motion`` otherwise) and its one-line description (``object_descriptions``, else
``objects.description``). ``resolve`` then narrows the objects down, step by step, without a model:

1. the head's class ("dog"; a group such as "animal" takes any of its classes; none named: every object);
2. its colours (the objects whose colour words hold the most of the colours named, at least one);
3. the verbs said ("the person who sits down": an object with that action);
4. an order: the ordinal counted from a side ("the second cup from the left"), in each sampled frame
   where that many candidates are seen together, the object ranked there most often winning (their
   median positions when they are never seen together); a size ("the biggest") by median area; an
   ordinal alone ("the second dog") by when they first appear.

A chat model is asked only where this cannot decide: the parser understood nothing ("the kangaroo"),
a colour or verb named matches no candidate, or several candidates remain and the expression has
words the steps did not use ("the man holding a cup"). Without a model, several remaining candidates
give the most seen one, marked ambiguous. A class the memory has no object of, or a model that names
none, is a ``ReferenceError`` that lists the objects there are.

Step 2 of ``refer_object`` (``vidagent.tools.refer``): the object meant, after ``vidagent.tools.referring``.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from vidagent.errors import ToolInputError
from vidagent.llm.base import ChatModel, Message
from vidagent.memory.video_memory import VideoMemory
from vidagent.prompts import prompt
from vidagent.tools.referring import ParsedExpression, colour_words, parse_expression, stem, verb_matches, words_of

PROMPTS = "vidagent.tools"
LISTED_OBJECTS = 12  # objects named in an error
_log = logging.getLogger(__name__)


class ReferenceError(ToolInputError):
    """An expression that names no object of the memory (the message lists the objects there are), or
    that is no expression: the caller's input, exit status 2 on the command line."""

    exit_code = 2


@dataclass(frozen=True)
class ObjectFact:
    """What the memory knows of one object, as a referring expression may name it."""

    object_id: int
    category: str
    first_s: float
    last_s: float
    frame_count: int
    colours: tuple[str, ...]
    line: str  # its description, one line
    actions: tuple[tuple[str, float, float, str], ...]  # (verb, start_s, end_s, the other object's class or "")
    motion: str
    positions: tuple[tuple[float, float, float, float], ...]  # (time_s, cx, cy, area) of each sampled detection

    def summary(self) -> str:
        """``object 3: dog, white and brown dog, large; sits down 2.0-3.0 s (seen 0.5-9.0 s)``."""
        acts = "; ".join(f"{verb}{' ' + other if other else ''} {start:.1f}-{end:.1f} s"
                         for verb, start, end, other in self.actions[:6])
        return (f"object {self.object_id}: {self.category}, {self.line}{'; ' + acts if acts else ''} "
                f"(seen {self.first_s:.1f}-{self.last_s:.1f} s)")


@dataclass(frozen=True)
class ObjectFacts:
    """Every object of one video's object memory as ``ObjectFact``s, and whether actions were read
    from the ``actions`` table (else from the objects' motion words)."""

    objects: tuple[ObjectFact, ...]
    has_actions: bool

    @classmethod
    def load(cls, memory: VideoMemory) -> "ObjectFacts":
        library, video = memory.library, memory.video_id
        objects = library.objects(video)
        positions: dict[int, list[tuple[float, float, float, float]]] = {}
        for object_id, time_s, cx, cy, area in library.rows(
                "SELECT object_id, time_s, cx, cy, area FROM detections WHERE video_id=? AND object_id IS NOT NULL "
                "ORDER BY time_s, detection_id", (video,)):
            positions.setdefault(int(object_id), []).append((float(time_s), float(cx), float(cy), float(area)))
        has_actions = "actions" in memory.stages
        actions: dict[int, list[tuple[str, float, float, str]]] = {}
        if has_actions:
            for object_id, verb, start_s, end_s, other in library.rows(
                    "SELECT a.object_id, a.verb, a.start_s, a.end_s, o.category FROM actions a LEFT JOIN objects o "
                    "ON o.video_id = a.video_id AND o.object_id = a.other_id WHERE a.video_id=? ORDER BY a.start_s",
                    (video,)):
                actions.setdefault(int(object_id), []).append((str(verb), float(start_s), float(end_s), other or ""))
        lines = dict(library.rows("SELECT object_id, line FROM object_descriptions WHERE video_id=?", (video,)))
        facts = tuple(ObjectFact(o.object_id, o.category, o.first_s, o.last_s, o.frame_count,
                                 colour_words(o.appearance.split(",")[0]), str(lines.get(o.object_id) or o.description),
                                 tuple(actions.get(o.object_id, ())), o.motion, tuple(positions.get(o.object_id, ())))
                      for o in objects)
        return cls(facts, has_actions)


@dataclass(frozen=True)
class Referent:
    """The object an expression was resolved to, how (``parser`` or ``model``), why, and the others
    that were still candidates when it was chosen (``ambiguous``: chosen as the most seen of them)."""

    fact: ObjectFact
    expression: ParsedExpression
    how: str
    reason: str
    candidates: tuple[int, ...] = ()
    ambiguous: bool = False

    @property
    def object_id(self) -> int:
        return self.fact.object_id


@dataclass
class _Narrowing:
    expression: ParsedExpression
    candidates: list[ObjectFact]
    steps: list[str] = field(default_factory=list)
    used_words: set[str] = field(default_factory=set)  # stems the verbs matched explained


def resolve(expression: str | ParsedExpression, facts: ObjectFacts, llm: ChatModel | None = None) -> Referent:
    """The object ``expression`` refers to (see the module's description)."""
    parsed = expression if isinstance(expression, ParsedExpression) else parse_expression(expression)
    if not facts.objects:
        raise ReferenceError("the object memory holds no objects (nothing was detected in this video)")
    if not parsed.understood and not _verbs_said(parsed, facts.objects, facts.has_actions):
        return _ask_model(parsed, list(facts.objects), facts, llm, "the expression names no class, colour or place")
    state = _Narrowing(parsed, list(facts.objects))
    if parsed.head:
        state.candidates = [f for f in facts.objects if f.category in parsed.head]
        if not state.candidates:
            raise ReferenceError(f"no {parsed.head_word} in this video's object memory (looked for "
                                 f"{' or '.join(parsed.head)}); {_listing(facts.objects)}")
        state.steps.append(f"{len(state.candidates)} {parsed.head_word}")
    for keep in (_colour_filter, _verb_filter):
        before = list(state.candidates)
        said = keep(state, facts)
        if said and not state.candidates:
            return _ask_model(parsed, before, facts, llm, f"no {said}")
    if len(state.candidates) > 1 or abs(parsed.ordinal or 0) > 1:  # "the second dog" of one: refused
        chosen = _ordered(state)
        if chosen is not None:
            return Referent(chosen, parsed, "parser", "; ".join(state.steps), tuple(f.object_id for f in state.candidates))
    left_over = [w for w in (*parsed.unknown, *(w for c in parsed.context for w in words_of(c)))
                 if stem(w) not in state.used_words]  # words (and other objects named) no step used
    if len(state.candidates) == 1:
        return Referent(state.candidates[0], parsed, "parser", "; ".join(state.steps) or "the only object",
                        (state.candidates[0].object_id,))
    if left_over and llm is not None:
        return _ask_model(parsed, state.candidates, facts, llm, f"{len(state.candidates)} candidates")
    chosen = max(state.candidates, key=lambda f: (f.frame_count, -f.object_id))
    state.steps.append(f"{len(state.candidates)} candidates left: the most seen taken")
    return Referent(chosen, parsed, "parser", "; ".join(state.steps), tuple(f.object_id for f in state.candidates),
                    ambiguous=True)


def _colour_filter(state: _Narrowing, facts: ObjectFacts) -> str:
    colours = state.expression.colours
    if not colours:
        return ""
    matched = {f.object_id: sum(c in f.colours for c in colours) for f in state.candidates}
    most = max(matched.values(), default=0)  # "black and white": both where some have both, else either
    state.candidates = [f for f in state.candidates if most and matched[f.object_id] == most]
    state.steps.append(f"{len(state.candidates)} {' and '.join(colours) if most == len(colours) else 'partly ' + ' and '.join(colours)}")
    return f"{' and '.join(colours)} {state.expression.head_word or 'object'}"


def _verb_filter(state: _Narrowing, facts: ObjectFacts) -> str:
    said = _verbs_said(state.expression, state.candidates, facts.has_actions)
    if not said:
        return ""
    for verb in said:
        state.used_words.update(stem(w) for w in words_of(verb))
    state.candidates = [f for f in state.candidates if any(verb in said for verb in _verbs(f, facts.has_actions))]
    context = set(state.expression.context)
    with_other = [f for f in state.candidates if any(verb in said and other in context for verb, _, _, other in f.actions)]
    if context and with_other:  # "the person who carries the bag": the action's other object is a bag
        state.candidates = with_other
        state.used_words.update(stem(w) for c in context for w in words_of(c))
    state.steps.append(f"{len(state.candidates)} that {' or '.join(sorted(said))}")
    return f"{state.expression.head_word or 'object'} that {' or '.join(sorted(said))}"


def _verbs(fact: ObjectFact, from_table: bool) -> set[str]:
    """The object's verbs: its actions, or (no actions stage) the verbs of its motion words."""
    if from_table:
        return {verb for verb, _, _, _ in fact.actions}
    return {m.group(1) for m in re.finditer(r"\b(appears|leaves|moves|stays|approaches)\b", fact.motion)}


def _verbs_said(parsed: ParsedExpression, objects: Sequence[ObjectFact], from_table: bool) -> set[str]:
    """The verbs of ``objects`` (their actions, or their motion words where no actions stage is built) that the
    expression says."""
    known = {verb for f in objects for verb in _verbs(f, from_table)}
    return {verb for verb in known if verb_matches(verb, parsed)}


def _ordered(state: _Narrowing) -> ObjectFact | None:
    """The candidate the expression's ordinal, side or size picks; None when it names no order."""
    parsed, candidates = state.expression, state.candidates
    if parsed.size is not None and parsed.side is None:
        areas = {f.object_id: _median(f, 3) for f in candidates}
        chosen = (max if parsed.size == "large" else min)(candidates, key=lambda f: areas[f.object_id])
        state.steps.append(f"the {'largest' if parsed.size == 'large' else 'smallest'} of {len(candidates)}")
        return chosen
    if parsed.ordinal is None:
        return None
    rank = parsed.ordinal
    if abs(rank) > len(candidates):
        raise ReferenceError(f"the expression asks for the {_nth(rank)} {parsed.head_word or 'object'} but the "
                             f"object memory has {len(candidates)} that fit: "
                             + ", ".join(f.summary() for f in candidates[:LISTED_OBJECTS]))
    if parsed.side is None:
        chosen = sorted(candidates, key=lambda f: (f.first_s, f.object_id))[rank - 1 if rank > 0 else rank]
        state.steps.append(f"the {_nth(rank)} of {len(candidates)} to appear")
        return chosen
    chosen = _by_votes(candidates, parsed.side, rank) or _by_medians(candidates, parsed.side, rank)
    state.steps.append(f"the {_nth(rank)} from the {parsed.side} of {len(candidates)}"
                       if "middle" not in parsed.side else f"the one nearest the {parsed.side} of {len(candidates)}")
    return chosen


def _side_key(side: str, cx: float, cy: float) -> float:
    """How far a centre lies from ``side`` ("left", "top left", "middle", "top middle": the parts added; "middle"
    is the middle of the axis no other part names, of both alone)."""
    parts = side.split()
    key = sum({"left": cx, "right": 1 - cx, "top": cy, "bottom": 1 - cy}.get(part, 0.0) for part in parts)
    if "middle" in parts:
        horizontal, vertical = {"left", "right"} & set(parts), {"top", "bottom"} & set(parts)
        key += (0.0 if horizontal else abs(cx - 0.5)) + (0.0 if vertical else abs(cy - 0.5))
    return key


def _by_votes(candidates: Sequence[ObjectFact], side: str, rank: int) -> ObjectFact | None:
    """In each sampled frame where at least ``|rank|`` candidates are seen, the one at that rank from the
    side gets a vote; the most voted wins (None: never that many together)."""
    by_time: dict[float, list[tuple[float, int]]] = {}
    for fact in candidates:
        seen: dict[float, list[tuple[float, float]]] = {}
        for time_s, cx, cy, _ in fact.positions:
            seen.setdefault(round(time_s, 3), []).append((cx, cy))
        for time_s, points in seen.items():  # two tracks of one object at one time: their mean
            cx, cy = np.mean(points, axis=0)
            by_time.setdefault(time_s, []).append((_side_key(side, float(cx), float(cy)), fact.object_id))
    votes: Counter[int] = Counter()
    for entries in by_time.values():
        if len(entries) >= abs(rank):
            ordered = sorted(entries)
            votes[ordered[rank - 1 if rank > 0 else rank][1]] += 1
    if not votes:
        return None
    best = max(votes.values())
    winner = min(object_id for object_id, count in votes.items() if count == best)
    return next(f for f in candidates if f.object_id == winner)


def _by_medians(candidates: Sequence[ObjectFact], side: str, rank: int) -> ObjectFact:
    ordered = sorted(candidates, key=lambda f: (_side_key(side, _median(f, 1), _median(f, 2)), f.object_id))
    return ordered[rank - 1 if rank > 0 else rank]


def _median(fact: ObjectFact, column: int) -> float:
    values = [p[column] for p in fact.positions]
    return float(np.median(values)) if values else 0.0


def _ask_model(parsed: ParsedExpression, candidates: Sequence[ObjectFact], facts: ObjectFacts,
               llm: ChatModel | None, why: str) -> Referent:
    """The chat model picks among ``candidates``; without one, or when it names none, a ``ReferenceError``."""
    if llm is None:
        raise ReferenceError(f"cannot tell which object \"{parsed.text}\" means ({why}; read: {parsed.describe()}) "
                             f"and no chat model was given to read it; {_listing(facts.objects)}")
    contract = prompt(PROMPTS, "refer_object_choice")
    request = contract.render(expression=parsed.text,
                              objects="\n".join(f.summary() for f in candidates[:LISTED_OBJECTS * 3]))
    reply = llm.chat([Message("user", request)], max_tokens=contract.budget, stop=contract.stop).text
    _log.info("refer_object: the model read %r as %r (%s)", parsed.text, reply.strip(), why)
    match = re.search(r"\bobject\s*(\d+)|^\s*(\d+)\b", reply, re.IGNORECASE)
    by_id = {f.object_id: f for f in candidates}
    if match is None or int(match.group(1) or match.group(2)) not in by_id:
        raise ReferenceError(f"no object of this video's object memory fits \"{parsed.text}\" ({why}; the model "
                             f"found none either); {_listing(facts.objects)}")
    chosen = by_id[int(match.group(1) or match.group(2))]
    return Referent(chosen, parsed, "model", f"{why}: the chat model chose among {len(candidates)}",
                    tuple(by_id))


def _listing(objects: Sequence[ObjectFact]) -> str:
    shown = ", ".join(f"{f.object_id} ({f.line}, {f.first_s:.1f}-{f.last_s:.1f} s)" for f in objects[:LISTED_OBJECTS])
    more = f" and {len(objects) - LISTED_OBJECTS} more" if len(objects) > LISTED_OBJECTS else ""
    return f"its objects are {shown}{more}"


def _nth(rank: int) -> str:
    return "last" if rank == -1 else {1: "first", 2: "second", 3: "third"}.get(rank, f"{rank}th")
