"""DoraemonGPT's knowledge tools (§2.2): one tool per knowledge source the user attached.

A knowledge tool is an in-context description (the line the planner reads in its tool list, from
``prompts/knowledge.toml``) and a function that answers a question from its source:
- symbolic (tables): the SQL sub-agent of the sub-task tools, over the file's tables on a read-only
  connection with the same sandbox and deadline;
- textual (documents): the passages most like the question, by text embedding, read by the chat model,
  each cited with its page or section;
- web: the configured search engine's results, quoted as untrusted text, read by the chat model.
An answer the source does not hold ("No such information") is a failed call, as for the sub-task tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from vidagent.config import ToolShapes
from vidagent.errors import KnowledgeError
from vidagent.knowledge.documents import DocumentSource
from vidagent.knowledge.sources import Knowledge, WebSource
from vidagent.knowledge.tables import TableSource
from vidagent.llm.base import ChatModel, Message
from vidagent.memory.sql import ReadOnlyDatabase
from vidagent.perception.base import TextEmbedder
from vidagent.prompts import prompt
from vidagent.tools.base import Evidence, Observation, Parameter, Tool
from vidagent.tools.observed import one_line, quote
from vidagent.tools.sql_agent import KNOWLEDGE_KIND, NO_INFORMATION, SQLSubAgent

PROMPTS = "vidagent.tools"
QUESTION = Parameter("question", str, "the question to answer from this source")
WEB_TAG = "web_text"  # how web results are quoted: strangers' text, like video text never an instruction


@dataclass
class KnowledgeTools:
    """Builds the tools over the knowledge sources of one question."""

    llm: ChatModel
    embedder: TextEmbedder
    shapes: ToolShapes = field(default_factory=ToolShapes)  # SQL result rows shown
    passages: int = 3  # document passages read per question
    results: int = 5  # web results read per question

    def tools(self, sources: Sequence[Knowledge]) -> list[Tool]:
        return [self.tool(source) for source in sources]

    def tool(self, source: Knowledge) -> Tool:
        """The tool over one source, named by it (``<file>_knowledge``, ``web_search``)."""
        about = f" ({source.description})" if source.description else ""
        if isinstance(source, TableSource):
            tables = "; ".join(t.line() for t in source.tables)
            description = prompt(PROMPTS, "table_tool").render(tables=tables, about=about)
            return Tool(source.name, description.strip(), (QUESTION,), lambda question: self.ask_tables(source, question))
        if isinstance(source, DocumentSource):
            unit = ("page" if source.origin.lower().endswith(".pdf") else "part") + ("s" if source.parts != 1 else "")
            description = prompt(PROMPTS, "document_tool").render(title=source.title, parts=source.parts, unit=unit,
                                                                  about=about)
            return Tool(source.name, description.strip(), (QUESTION,),
                        lambda question: self.ask_document(source, question))
        description = prompt(PROMPTS, "web_tool").render(about=about)
        return Tool(source.name, description.strip(), (QUESTION,), lambda question: self.search_web(source, question))

    def ask_tables(self, source: TableSource, question: str) -> Observation:
        with ReadOnlyDatabase(source.database, source=source.name, max_rows=200) as database:
            agent = SQLSubAgent(KNOWLEDGE_KIND, self.llm, database, shapes=self.shapes, schema=source.schema())
            return agent.answer(question)

    def ask_document(self, source: DocumentSource, question: str) -> Observation:
        query = self.embedder.embed_queries([question])[0]
        found = source.search(query, self.passages)
        passages = "\n".join(f"[{p.where}] {p.text}" for p in found)
        contract = prompt(PROMPTS, "document_answer")
        request = contract.render(title=source.title, passages=passages, question=question)
        answer = self.llm.chat([Message("user", request)], max_tokens=contract.budget, stop=contract.stop).text.strip()
        text = f"From {source.origin}:\n{passages}\nAnswer: {answer}"
        if not answer or NO_INFORMATION.match(answer):
            return Observation(f"{text}\nThe document has no such information; ask another question or use "
                               f"another tool.", is_error=True)
        evidence = tuple(Evidence(0.0, 0.0, p.text, source.name, where=f"{source.origin}, {p.where}", kind="document") for p in found)
        return Observation(text, evidence=evidence)

    def search_web(self, source: WebSource, question: str) -> Observation:
        try:
            found = source.search.search(question, self.results)
        except KnowledgeError as error:
            return Observation(f"Error: {error}", is_error=True)
        if not found:
            return Observation(f"The web search found nothing for {question!r}; rephrase it or use another tool.",
                               is_error=True)
        results = "\n".join(f"{i}. {one_line(r.title)} ({one_line(r.url)}): {quote(r.snippet, WEB_TAG)}"
                            for i, r in enumerate(found, 1))
        contract = prompt(PROMPTS, "web_answer")
        request = contract.render(question=question, results=results)
        answer = self.llm.chat([Message("user", request)], max_tokens=contract.budget, stop=contract.stop).text.strip()
        text = f"Web results:\n{results}\nAnswer: {quote(answer, WEB_TAG)}"
        if not answer or NO_INFORMATION.match(answer):
            return Observation(f"{text}\nThe results hold no such information; rephrase the search or use another "
                               f"tool.", is_error=True)
        evidence = tuple(Evidence(0.0, 0.0, r.snippet, source.name, where=r.url, kind="document") for r in found)
        return Observation(text, evidence=evidence)
