"""Referring expressions read without a model: "the black dog", "the second cup from the left",
"the person who sits down" as the facts an object memory can be searched by.

``parse_expression`` finds, in the words of ``data/referring_words.json`` and the detector's COCO class
names: the **head** (the first class named, by its name, another name for it such as "man" for person,
or a group such as "animal"; later classes are the **context**, as in "the man holding a cup"; none when the
first class follows a relation after words the parser does not know, "the drinking vessel next to the man"), the
head's **colours** (a colour right before a class belongs to that class, any other to the head),
an **ordinal** with a **side** ("second from the left", "the rightmost", "the one in the middle"; a side
after a verb of motion, "running to the left", is where it goes, not where it is, and is left to the verbs), a
**size** ("the biggest"), and the **words** left over, stemmed, for the caller to match against the
verbs of the actions table ("sits down" matches "sitting down"). ``unknown`` holds the content words
that none of this explains ("the dog chasing the ball" explains all but "chasing"): what a model may
have to read.

Step 1 of ``refer_object`` (``vidagent.tools.refer``): the words read, for ``vidagent.tools.referent``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Sequence

from vidagent.perception.coco import COCO_LABELS

_WORD = re.compile(r"[a-z0-9]+")
SIDE_ORDER = ("top", "bottom", "middle", "left", "right")  # how two sides named together are written: "top left"


@dataclass(frozen=True)
class ParsedExpression:
    """What ``parse_expression`` read in an expression (see the module's description)."""

    text: str
    head: tuple[str, ...] = ()  # the classes the referred object may be (several for a group such as "animal")
    head_word: str = ""  # the word that named it
    colours: tuple[str, ...] = ()
    context: tuple[str, ...] = ()  # other classes named ("the man holding a cup": cup)
    ordinal: int | None = None  # 1 first, 2 second, ... -1 last
    side: str | None = None  # left, right, top, bottom, middle or two ("top left"): the order the ordinal counts in
    size: str | None = None  # large or small: the biggest or the smallest
    stems: tuple[str, ...] = ()  # every word's stem, in order (for matching verbs)
    unknown: tuple[str, ...] = ()  # content words nothing above explains

    @property
    def understood(self) -> bool:
        """Whether the parser found anything to search by."""
        return bool(self.head or self.colours or self.side or self.size or self.ordinal)

    def describe(self) -> str:
        """What was read, for a log line or an error: ``head=dog colours=black side=left ordinal=2``."""
        parts = [f"head={'/'.join(self.head)}" if self.head else "",
                 f"colours={'+'.join(self.colours)}" if self.colours else "",
                 f"context={'+'.join(self.context)}" if self.context else "",
                 f"ordinal={self.ordinal}" if self.ordinal is not None else "",
                 f"side={self.side}" if self.side else "", f"size={self.size}" if self.size else "",
                 f"unknown={'+'.join(self.unknown)}" if self.unknown else ""]
        return " ".join(p for p in parts if p) or "nothing"


@dataclass(frozen=True)
class _Vocabulary:
    names: dict[tuple[str, ...], tuple[str, ...]]  # word sequence -> the classes it names
    longest: int
    colours: dict[str, str]
    ordinals: dict[str, int]
    sides: dict[str, str]
    sizes: dict[str, str]
    verb_forms: dict[str, str]
    no_meaning: frozenset[str]
    motion_words: frozenset[str]
    relations: frozenset[str]


@cache
def _vocabulary() -> _Vocabulary:
    data: dict[str, Any] = json.loads(
        resources.files("vidagent.tools").joinpath("data/referring_words.json").read_text(encoding="utf-8"))
    names: dict[tuple[str, ...], tuple[str, ...]] = {}

    def add(phrase: str, classes: tuple[str, ...]) -> None:
        words = tuple(_WORD.findall(phrase.lower()))
        names[words] = classes
        if not words[-1].endswith("s"):  # the plural: "dogs", "cups"
            names[words[:-1] + (words[-1] + ("es" if words[-1].endswith(("sh", "ch", "x")) else "s"),)] = classes

    for label in COCO_LABELS:
        add(label, (label,))
    for label, others in data["category_names"].items():
        for other in others:
            add(other, (label,))
    for group, members in data["group_names"].items():
        add(group, tuple(members))  # an empty group ("thing", "one") names any class
    colours = {word: colour for colour, words in data["colours"].items() for word in words}
    return _Vocabulary(names, max(len(k) for k in names), colours, dict(data["ordinals"]), dict(data["sides"]),
                       dict(data["sizes"]), dict(data["verb_forms"]), frozenset(data["no_meaning"]),
                       frozenset(data["motion_words"]), frozenset(data["relations"]))


def stem(word: str) -> str:
    """A word's stem for matching verbs: "sitting", "sat" and "sits" are all "sit"."""
    vocabulary = _vocabulary()
    if word in vocabulary.verb_forms:
        return vocabulary.verb_forms[word]
    for ending, keep in (("ing", 4), ("ies", 3), ("es", 4), ("ed", 4), ("s", 3)):
        if word.endswith(ending) and len(word) - len(ending) >= keep - 1 and not word.endswith("ss"):
            base = word[: -len(ending)]
            if ending == "ies":
                return base + "y"
            if ending in ("ing", "ed") and len(base) > 2 and base[-1] == base[-2] and base[-1] in "bdgmnprt":
                return base[:-1]  # "stopped" -> "stop" ("rolling" stays "roll")
            return base
    return word


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def colour_words(text: str) -> tuple[str, ...]:
    """The colours ``text`` names, in the parser's words ("gray" is "grey"), in order, once each."""
    colours = _vocabulary().colours
    return tuple(dict.fromkeys(colours[w] for w in words_of(text) if w in colours))


def parse_expression(text: str) -> ParsedExpression:
    """Read ``text`` (see the module's description); a ``ValueError`` when it holds no word."""
    words = words_of(text)
    if not words:
        raise ValueError("a referring expression is words naming an object, e.g. \"the black dog on the left\"")
    vocabulary = _vocabulary()
    found: list[tuple[int, int, tuple[str, ...]]] = []  # (first word, word count, classes) of each class named
    used = [False] * len(words)
    i = 0
    while i < len(words):
        for length in range(min(vocabulary.longest, len(words) - i), 0, -1):
            phrase = tuple(words[i:i + length])
            if phrase in vocabulary.names and not _is_colour_before_a_class(words, i, length, vocabulary):
                found.append((i, length, vocabulary.names[phrase]))
                for j in range(i, i + length):
                    used[j] = True
                i += length
                break
        else:
            i += 1
    if len(found) > 1 and not found[0][2] and "of" in words[found[0][0] + found[0][1]:found[1][0]]:
        found.pop(0)  # "the left one of the dogs": the dogs are the head
    if found and _named_after_a_relation(words, found[0][0], vocabulary):
        found.insert(0, (-1, 0, ()))  # "the vessel next to the man": the head is no class named; the man is context
    head_at = found[0][0] if found else None
    head = found[0][2] if found else ()
    colours: list[str] = []
    ordinal: int | None = None
    sides: list[str] = []
    size: str | None = None
    class_starts = {start for start, _, _ in found}
    for index, word in enumerate(words):
        if used[index]:
            continue
        if word in vocabulary.colours:
            used[index] = True
            belongs_to_context = index + 1 in class_starts and index + 1 != head_at
            if not belongs_to_context:
                colours.append(vocabulary.colours[word])
        elif word in vocabulary.ordinals:
            used[index] = True
            ordinal = vocabulary.ordinals[word]
        elif word in vocabulary.sides and _is_direction(words, index):
            continue  # "running to the left": where it goes, not where it is (a verb to match, left unknown)
        elif word in vocabulary.sides:
            used[index] = True
            sides.append(vocabulary.sides[word])
            if word.endswith("most") or word == "lowest":
                ordinal = ordinal or 1
        elif word in vocabulary.sizes:
            used[index] = True
            size = vocabulary.sizes[word]
        elif word in vocabulary.no_meaning:
            used[index] = True
    side = " ".join(s for s in SIDE_ORDER if s in sides) or None  # "top left": both count
    if side is not None and ordinal is None:
        ordinal = 1  # "the dog on the left": the first from the left
    unknown = tuple(word for word, known in zip(words, used) if not known)
    return ParsedExpression(
        text=text.strip(), head=tuple(head) if head else (),
        head_word=" ".join(words[found[0][0]:found[0][0] + found[0][1]]) if found and found[0][1] else "",
        colours=tuple(dict.fromkeys(colours)), context=tuple(dict.fromkeys(c for _, _, cs in found[1:] for c in cs)),
        ordinal=ordinal, side=side, size=size, stems=tuple(stem(w) for w in words), unknown=unknown)


def _named_after_a_relation(words: Sequence[str], start: int, vocabulary: _Vocabulary) -> bool:
    """Whether the first class, at ``start``, follows a relation word ("next to", "holding") that follows words
    the parser does not know: "the drinking vessel next to the person" names something else first."""
    relation = next((i for i in range(start - 1, -1, -1) if words[i] in vocabulary.relations), None)
    if relation is None:
        return False
    return any(_unknown(word, vocabulary) for word in words[:relation])


def _unknown(word: str, vocabulary: _Vocabulary) -> bool:
    return not (word in vocabulary.no_meaning or word in vocabulary.colours or word in vocabulary.sides
                or word in vocabulary.sizes or word in vocabulary.ordinals or (word,) in vocabulary.names)


def _is_direction(words: Sequence[str], index: int) -> bool:
    """Whether the side at ``index`` follows a verb of motion ("runs to the left", "facing right")."""
    before = [w for w in words[max(0, index - 6):index] if w not in _DIRECTION_LINKS]
    return bool(before) and stem(before[-1]) in _vocabulary().motion_words


_DIRECTION_LINKS = frozenset({"to", "towards", "toward", "the", "its", "his", "her", "their", "from", "left", "right"})


def _is_colour_before_a_class(words: Sequence[str], index: int, length: int, vocabulary: _Vocabulary) -> bool:
    """"orange" is a class (the fruit) and a colour: a colour when a class follows it ("the orange cat")."""
    if length != 1 or words[index] not in vocabulary.colours or index + 1 >= len(words):
        return False
    return any(tuple(words[index + 1:index + 1 + n]) in vocabulary.names for n in range(1, vocabulary.longest + 1))


def verb_matches(verb: str, expression: ParsedExpression) -> bool:
    """Whether ``verb`` (an actions-table verb such as "sits down" or "raises an arm") is said in the
    expression: each of its content words' stems appears there, in order."""
    vocabulary = _vocabulary()
    wanted = [stem(w) for w in words_of(verb) if w not in vocabulary.no_meaning]
    if not wanted:
        return False
    position = 0
    for word in wanted:
        try:
            position = expression.stems.index(word, position) + 1
        except ValueError:
            return False
    return True
