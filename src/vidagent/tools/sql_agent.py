"""SQL-writing sub-agents over the stored memory: VideoAgent's ``object_memory_querying`` and
DoraemonGPT's sub-task tools (When, Why, What, How, Count, Other).

They are one class, ``SQLSubAgent``, parameterised by kind: each kind has its own in-context
examples (``sql_examples_<kind>`` in ``prompts/sql.toml``); the schema, request, retry and answer prompts are
shared. A call writes SQL with the LLM, runs it read-only (one retry with the error message),
and answers the sub-question from the rows. SQL that reads the object tables builds the object
memory first when it is not built yet (DoraemonGPT's task-related memory: built when a sub-task
needs it), or fails saying there is none. A result with no rows, or rows the answer says do not
hold the answer, is a failed call ("the memory has no such information", DoraemonGPT's A.2),
so a search planner counts it as a failure; but a result that is one number (a count) is the answer itself,
whatever the model reading it says. ``object_memory_querying`` first retrieves the
objects the question's words describe and hands them to the SQL writer, each with its line (what it
looks like and does, stage ``descriptions``): ranked by text-embedding similarity to those lines and,
as VideoAgent does, by CLIP text-to-feature similarity against the objects' stored CLIP features when
the memory was built with a CLIP appearance model (``VIDAGENT_APPEARANCE=hf``) and the session has
the same one (the mean of the two ranks; a tie goes to CLIP's). The object memory is the stages ``OBJECT_STAGES``
(objects, their actions and lines), built together.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Callable, ClassVar, Sequence

import numpy as np

from vidagent.config import ToolShapes
from vidagent.errors import MemoryStoreError, QueryRefusedError
from vidagent.llm.base import ChatModel, Message
from vidagent.memory.builder import OBJECT_STAGES
from vidagent.memory.sql import QueryResult, ReadOnlyDatabase, ReadOnlyQueries
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.base import AppearanceModel, TextEmbedder, TextSearchableAppearance
from vidagent.prompts import load_prompt, prompt
from vidagent.tools.base import Evidence, Observation, Parameter, Tool
from vidagent.tools.declaration import Declaration, declaration_of, declare, declared, made
from vidagent.tools.observed import quote

PROMPTS = "vidagent.tools"
SUBTASK_KINDS = ("when", "why", "what", "how", "count", "other")
OBJECT_KIND = "object"
KNOWLEDGE_KIND = "knowledge"  # a user's tables (DoraemonGPT's symbolic knowledge), not a video's memory
# columns holding a detector's fixed words (class names, colours, motion); every other text cell may
# hold words read or heard in the video and is quoted as video text
LABEL_COLUMNS = frozenset({"category", "appearance", "motion", "verb", "source", "line"})
# Statements start with one of these; writing ones are extracted too so the read-only guard refuses
# them with a precise message for the retry.
_SQL_START = re.compile(r"\b(SELECT|WITH|INSERT|UPDATE|DELETE|REPLACE|DROP|CREATE|ALTER|ATTACH|PRAGMA)\b")
# the tables of the object memory (OBJECT_STAGES): SQL naming one needs the object memory built
OBJECT_TABLES = re.compile(r"\b(objects|object_segments|detections|tracks|actions|object_descriptions)\b",
                           re.IGNORECASE)
# how the answer prompt (sql_answer) says the rows do not hold the answer
NO_INFORMATION = re.compile(r"\W*no such information\b", re.IGNORECASE)


@cache
def _query_stopwords() -> frozenset[str]:
    text = load_prompt(PROMPTS, "object_query_stopwords")
    return frozenset(w for line in text.splitlines() if not line.startswith("#") for w in line.split())


def object_query(question: str) -> str:
    """The object descriptions a question names: its words without question words, articles and the
    like (the whole question when nothing is left)."""
    words = [w for w in re.findall(r"[a-z0-9][a-z0-9'-]*", question.lower()) if w not in _query_stopwords()]
    return " ".join(words) or question.strip()


@cache
def tool_descriptions() -> dict[str, str]:
    """Tool name -> description, from ``subtask_descriptions`` in ``prompts/sql.toml``."""
    lines = load_prompt(PROMPTS, "subtask_descriptions").splitlines()
    return {name.strip(): text.strip() for name, _, text in (line.partition(":") for line in lines if line.strip())}


def extract_sql(reply: str) -> str | None:
    """The first SQL statement in a model reply (code fences, 'SQL:' labels and prose removed)."""
    fenced = re.search(r"```(?:sql|sqlite)?\s*(.*?)```", reply, re.DOTALL | re.IGNORECASE)
    text = fenced.group(1) if fenced else reply
    match = _SQL_START.search(text) or re.search(r"\b(SELECT|WITH)\b", text, re.IGNORECASE)
    if not match:
        return None
    statement = text[match.start():].split(";")[0]
    lines = []
    for line in statement.splitlines():
        if lines and not line.strip():
            break  # a blank line ends the statement; prose may follow
        lines.append(line)
    return " ".join(" ".join(lines).split()) or None


@dataclass
class SQLSubAgent:
    """Answers a sub-question by writing SQL over one video's memory, or (kind ``knowledge``) over the
    tables of a user's file, described by ``schema``."""

    kind: str
    llm: ChatModel
    queries: ReadOnlyDatabase
    # makes the object memory ready when the SQL reads it: None when it is, else why it cannot be
    object_memory: Callable[[], str | None] | None = None
    shapes: ToolShapes = field(default_factory=ToolShapes)  # how many result rows the model is shown
    schema: str = ""  # kind ``knowledge``: the user's tables, one line each (a video memory's are ``sql_schema``)

    def __post_init__(self) -> None:
        if self.kind not in SUBTASK_KINDS + (OBJECT_KIND, KNOWLEDGE_KIND):
            raise ValueError(f"unknown sub-agent kind {self.kind!r}")
        if self.kind == KNOWLEDGE_KIND and not self.schema:
            raise ValueError("a knowledge sub-agent needs the schema of its tables")

    def answer(self, question: str, hints: str = "") -> Observation:
        contract = prompt(PROMPTS, "sql_request")  # the last prompt's: sql_retry's after a retry
        if self.kind == KNOWLEDGE_KIND:
            schema = prompt(PROMPTS, "sql_schema_knowledge").render(tables=self.schema)
        else:
            schema = load_prompt(PROMPTS, "sql_schema").strip()
        request = contract.render(schema=schema,
                                  examples=load_prompt(PROMPTS, f"sql_examples_{self.kind}").strip(),
                                  hints=f"{hints}\n" if hints else "", question=question)
        messages = [Message("user", request)]
        result: QueryResult | None = None
        failure = ""
        sql = None
        for _ in range(2):
            reply = self.llm.chat(messages, max_tokens=contract.budget, stop=contract.stop).text
            sql = extract_sql(reply)
            if sql is None:
                failure = "the reply held no SELECT statement"
            else:
                missing = self._objects_for(sql)
                if missing:
                    return Observation(f"SQL: {sql}\nNo object memory: {missing}. Try another tool.", is_error=True,
                                       artifacts={"sql": sql})
                try:
                    result = self.queries.run(sql)
                    break
                except (MemoryStoreError, QueryRefusedError, ValueError) as error:
                    failure = str(error)
            contract = prompt(PROMPTS, "sql_retry")
            messages += [Message("assistant", reply), Message("user", contract.render(error=failure))]
        if result is None:
            return Observation(f"Could not query {self._held}: {failure}. Try another tool or rephrase.", is_error=True)
        if not result.rows:
            return Observation(f"SQL: {result.sql}\nResult: no rows. {self._held.capitalize()} has no such "
                               f"information; ask another sub-question or use another tool.", is_error=True,
                               artifacts={"sql": result.sql})
        # a video's text cells are quoted as video text; a user's own tables are theirs, not the video's
        shown = result if self.kind == KNOWLEDGE_KIND else quoted_cells(result)
        rows = shown.to_text(max_rows=self.shapes.sql_rows)
        answering = prompt(PROMPTS, "sql_answer")
        request = answering.render(question=question, sql=result.sql, rows=rows)
        answer = self.llm.chat([Message("user", request)], max_tokens=answering.budget, stop=answering.stop).text.strip()
        said = answer if self.kind == KNOWLEDGE_KIND else quote(answer)  # a video's answer may repeat its text
        value = single_number(result)
        if value is not None and NO_INFORMATION.match(answer):  # the SQL's own answer (a count, a time) stands
            answer = said = value
        text = f"SQL: {result.sql}\nResult:\n{rows}\nAnswer: {said}"
        if NO_INFORMATION.match(answer):
            return Observation(text + f"\n{self._held.capitalize()} has no such information; ask another "
                               "sub-question or use another tool.", is_error=True, artifacts={"sql": result.sql})
        if self.kind == KNOWLEDGE_KIND:
            evidence: tuple[Evidence, ...] = (Evidence(0.0, 0.0, answer, self.queries.source,
                                                       where=f"SQL: {result.sql}", kind="model"),)
        else:
            evidence = _evidence(result, answer, self.queries.source)
        return Observation(text, evidence=evidence, artifacts={"sql": result.sql})

    @property
    def _held(self) -> str:
        """What the SQL reads, as the observations name it."""
        return "the tables" if self.kind == KNOWLEDGE_KIND else "the memory"

    def _objects_for(self, sql: str) -> str | None:
        """Why the object memory ``sql`` reads cannot be had (None: it is there, or is not read)."""
        if self.object_memory is None or not OBJECT_TABLES.search(sql):
            return None
        return self.object_memory()


@dataclass
class SQLTools:
    """``object_memory_querying`` and the sub-task tools for one video."""

    memory: VideoMemory
    embedder: TextEmbedder
    llm: ChatModel
    queries: ReadOnlyQueries
    build_objects: Callable[[], object] | None = None  # builds the object memory when a tool needs it
    appearance: AppearanceModel | None = None  # the session's appearance model: CLIP text search when it can
    shapes: ToolShapes = field(default_factory=ToolShapes)  # result rows and candidate objects shown

    @declared("segments", "objects model", needs="pixels", sets="videoagent")
    def object_memory_querying(self, question: str) -> Observation:
        missing = self.ensure_objects()
        if missing:
            return Observation(f"No object memory: {missing}.", is_error=True)
        return SQLSubAgent(OBJECT_KIND, self.llm, self.queries, self.ensure_objects, self.shapes).answer(
            question, self._candidate_objects(question))

    # DoraemonGPT's sub-task tools, one per kind (SQL over the memory, objects included)
    subtasks: ClassVar[dict[str, Declaration]] = {
        kind: declare(kind, "segments", "descriptions speech text objects model", sets="doraemongpt")
        for kind in SUBTASK_KINDS}

    def ensure_objects(self) -> str | None:
        """Build the object memory if it is not built yet; None when it is there, else why it cannot be."""
        if set(OBJECT_STAGES) <= set(self.memory.stages):
            return None
        if self.build_objects is None:
            return "this video's object memory is not built"
        try:
            self.build_objects()
        except MemoryStoreError as error:
            return str(error)
        return None

    def subtask(self, kind: str) -> Tool:
        agent = SQLSubAgent(kind, self.llm, self.queries, self.ensure_objects, self.shapes)
        return Tool(self.subtasks[kind].name, tool_descriptions()[kind],
                    (Parameter("question", str, "the sub-question"),), lambda question: agent.answer(question))

    def tools(self, kinds: tuple[str, ...] = (OBJECT_KIND,)) -> list[Tool]:
        out = []
        for kind in kinds:
            if kind == OBJECT_KIND:
                described = tool_descriptions()[declaration_of(self.object_memory_querying).name]
                out.append(made(self.object_memory_querying, described,
                                (Parameter("question", str, "an object-related question"),)))
            else:
                out.append(self.subtask(kind))
        return out

    def _candidate_objects(self, question: str) -> str:
        """Open-vocabulary retrieval: the objects most like the descriptions the question names, by
        CLIP text-to-feature similarity where the stored features allow it, else by their descriptions."""
        objects = self.memory.library.objects(self.memory.video_id)
        if not objects:
            return "The object memory holds no objects (nothing was detected).\n"
        words = object_query(question)
        described = {row[0]: (row[1], np.frombuffer(row[2], np.float32)) for row in self.queries.run(
            "SELECT object_id, line, embedding FROM object_descriptions").rows}
        texts = [described.get(o.object_id, (o.description, o.embedding)) for o in objects]
        query = np.asarray(self.embedder.embed_queries([words])[0], np.float32)
        rank = _ranks(np.stack([vector for _, vector in texts]) @ query)
        clip = self._feature_scores(words, [o.object_id for o in objects])
        seen = _ranks(clip) if clip is not None else np.zeros(len(objects))
        if clip is not None:
            rank = (rank + seen) / 2
        named = {o.object_id for o in objects if re.search(rf"\b{re.escape(o.category)}s?\b", question, re.I)}
        # a tie of the mean ranks goes to what the pixels say (CLIP) rather than to the lines' hashed words
        ranked = sorted(range(len(objects)), key=lambda i: (objects[i].object_id not in named, rank[i], seen[i]))
        lines = [f"object {objects[i].object_id}: {texts[i][0]} ({objects[i].first_s:.1f}-{objects[i].last_s:.1f} s)"
                 for i in ranked[:self.shapes.candidate_objects]]
        return "Objects most related to the question:\n" + "\n".join(lines) + "\n"

    def _feature_scores(self, words: str, object_ids: Sequence[int]) -> np.ndarray | None:
        """CLIP similarity of ``words`` to each object's stored features, or None when the objects'
        features were not made by the session's CLIP appearance model (not comparable, or not CLIP)."""
        model = self.appearance
        if not isinstance(model, TextSearchableAppearance):
            return None
        stage = self.queries.run("SELECT config FROM stages WHERE stage = 'objects'").rows
        if not stage or json.loads(stage[0][0]).get("appearance") != model.name:
            return None
        stored = dict(self.queries.run("SELECT object_id, feature FROM objects").rows)
        text = np.asarray(model.text_features([words])[0], np.float32)
        scores = []
        for object_id in object_ids:
            feature = np.frombuffer(stored[object_id], np.float32)[: model.text_dim]
            norm = float(np.linalg.norm(feature))
            scores.append(float(feature @ text) / norm if norm else -1.0)
        return np.asarray(scores, np.float32)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Each score's rank, 0 for the highest (ties keep their order)."""
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    ranks = np.empty(len(order), np.float64)
    ranks[order] = np.arange(len(order))
    return ranks


def single_number(result: QueryResult) -> str | None:
    """The one number a result holds (one row of one numeric cell: a ``COUNT``, ``MAX(end_s)``...), as text; None for
    any other result. Such a result is the SQL's answer as it stands, whatever the model reading it says: asked to
    read "dogs / 2" for "How many dogs appear?", the 1.5B model replied "No such information" (3 of 4 such shapes),
    which threw the count away as a failed call."""
    if len(result.rows) != 1 or len(result.rows[0]) != 1:
        return None
    value = result.rows[0][0]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return result.to_text().splitlines()[-1]


def quoted_cells(result: QueryResult) -> QueryResult:
    """The result with every text cell but the detector's labels quoted as video text."""
    labels = [column.lower() in LABEL_COLUMNS for column in result.columns]
    rows = [tuple(quote(value) if isinstance(value, str) and not label else value
                  for value, label in zip(row, labels)) for row in result.rows]
    return replace(result, rows=rows)


def _evidence(result: QueryResult, answer: str, video_id: str) -> tuple[Evidence, ...]:
    """Time spans named by the result's rows (columns start_s/end_s, first_s/last_s or time_s)."""
    columns = [c.lower() for c in result.columns]
    pairs = [("start_s", "end_s"), ("first_s", "last_s"), ("time_s", "time_s")]
    for start_name, end_name in pairs:
        if start_name in columns and end_name in columns:
            start_i, end_i = columns.index(start_name), columns.index(end_name)
            spans = []
            for row in result.rows[:10]:
                start, end = row[start_i], row[end_i]
                if isinstance(start, (int, float)) and isinstance(end, (int, float)):
                    spans.append(Evidence(float(start), float(end), answer, video_id, kind="model"))
            return tuple(spans)
    return ()
