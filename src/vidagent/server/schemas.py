"""The JSON bodies the API accepts (validated by FastAPI; anything else is a 4xx error)."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from vidagent.agent.planner import EMBEDDED_DEFAULT_OPTIONS, default_description, planner_names
from vidagent.server.asks import MAX_CHOICES, MAX_KNOWLEDGE, MAX_QUESTION_CHARS, MAX_SOURCES, AskSpec

Stage = Literal["frames", "speech", "segments", "objects"]
OptionValue = Union[bool, int, float, str]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RegisterBody(_Body):
    path: str = Field(min_length=1, max_length=4096, description="a video file inside the server's --videos folders")


class IndexBody(_Body):
    stages: list[Stage] | None = Field(None, description="stages to build (default: all)")


class AskBody(_Body):
    videos: list[str] = Field(min_length=1, max_length=MAX_SOURCES, description="video ids, or paths inside the --videos folders (several: planner peil)")
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    choices: list[str] | None = Field(None, max_length=MAX_CHOICES, description="answer options, or none")
    planner: str | None = Field(None, description=f"the default ({default_description()}), or one of "
                                                  + ", ".join(planner_names()))
    options: dict[str, OptionValue] = Field(default_factory=dict, description="the planner's options, e.g. {'n': 2}")
    knowledge: list[str] = Field(default_factory=list, max_length=MAX_KNOWLEDGE,
                                 description="knowledge the planner may consult: tables or documents inside the "
                                             "--videos folders (PATH#description to describe one), or 'web'")
    budget: str | None = Field(None, max_length=200, description="bounds the question's model work, e.g. "
                                                                  "'calls=4,tokens=6000,seconds=60,frames=16' (frames: those shown to the vision model); "
                                                                  "the server holds it to its own most seconds and "
                                                                  "calls per question (--max-question-seconds, "
                                                                  "--max-question-calls)")
    check: bool | None = Field(None, description="check the answer against the evidence it cites and abstain "
                                                 "when it does not support it, for options when another is likelier on it "
                                                 "(default: the server's setting, off)")
    glance: float | None = Field(None, description="seconds: a video not indexed yet is answered at once from a "
                                                   "frame described every this many seconds, what the planner reads "
                                                   "described in full first; the answer's coverage says what it saw "
                                                   "and the index job that completes the memory in the background. "
                                                   "Default: every 20 s for a video of 2 minutes or more (no "
                                                   "denser than the lines a planner reading a few evenly reads: the "
                                                   f"default's {EMBEDDED_DEFAULT_OPTIONS['lines']}); 0: index the "
                                                   "video whole first")

    def spec(self) -> AskSpec:
        return AskSpec(tuple(self.videos), self.question, tuple(self.choices) if self.choices is not None else None,
                       self.planner or None, dict(self.options), tuple(self.knowledge), self.budget or None,
                       self.check, self.glance)


class SqlBody(_Body):
    query: str = Field(min_length=1, max_length=20000, description="one read-only SELECT over this video's memory")
    max_rows: int = Field(200, ge=1, le=1000)


class ImportBody(_Body):
    path: str = Field(min_length=1, max_length=4096,
                      description="a released caption set inside the server's --videos folders: a file, a folder or a zip")
    format: str | None = Field(None, description="llovi, videoagent, jsonl or csv (default: told from the file)")
    namespace: str | None = Field(None, max_length=32,
                                  description="memory ids become NAMESPACE:<video id> (default: egoschema or nextqa, "
                                              "from the file's name)")
    captioner: str | None = Field(None, max_length=200, description="who wrote the captions (default: the release's)")
    only: list[str] | None = Field(None, min_length=1, max_length=100_000,
                                   description="import only these videos (the caption set's own ids)")
    wait: bool = Field(False, description="answer when the import is done (200, with its report) instead of at once "
                                          "(202, a job to follow)")
