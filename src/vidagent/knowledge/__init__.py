"""Knowledge a user attaches to a question (DoraemonGPT §2.2): tables, documents and a web search.

A knowledge source is read once, before the question starts, so that a missing file, a table without
a header or a protected PDF stops the question with a clear error instead of failing a tool later.
``open_knowledge`` turns what the user named (``KnowledgeSpec``) into sources the tools layer can
query: ``TableSource`` (a read-only SQLite database the SQL sub-agent queries), ``DocumentSource``
(passages with their page or section and their text embeddings, cached by the file's content) and
``WebSource`` (a SearxNG-style JSON search endpoint, off unless configured). This layer reads files
and computes embeddings; it knows no chat model: answering from a source is the tools' job.
"""
