-- Experience kept across questions, in the library database beside the video memory. Append-only:
-- an entry is never changed; `vidagent experience clear` deletes what it names.
--   kind 'semantic': a validated question and answer about one video, summarised (DigimonGPT);
--   kind 'workflow': the tool workflow of an episode whose answer passed validation (DigimonGPT);
--   kind 'pattern':  decision patterns an LLM abstracted from a task type's workflows (DigimonGPT);
--   kind 'trace':    a reasoning trace that succeeded after a failed try (AssistGPT's Learner).
-- status 'rejected' keeps an answer that failed validation for inspection; it is never replayed.
-- scope '' is the user's experience; an evaluation run keeps its own ('eval:<run>') so runs stay comparable.
CREATE TABLE IF NOT EXISTS experience (
    entry_id     INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL,
    scope        TEXT NOT NULL DEFAULT '',
    planner      TEXT NOT NULL,
    video_id     TEXT NOT NULL DEFAULT '',    -- the video(s) a semantic entry is about; '' across videos
    task_type    TEXT NOT NULL DEFAULT '',    -- causal, temporal, descriptive
    question     TEXT NOT NULL,
    embedding    BLOB NOT NULL,               -- float32 query embedding of the question
    text         TEXT NOT NULL,               -- what a prompt shows (always quoted as data when replayed)
    answer       TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'valid',
    checked_by   TEXT NOT NULL,               -- 'reference', 'self_check' or 'patterns' (abstracted)
    attempts     INTEGER NOT NULL DEFAULT 1,  -- the try that succeeded (1 = first)
    model        TEXT NOT NULL DEFAULT '',    -- the chat model that answered (and validated)
    provenance   TEXT NOT NULL DEFAULT '{}',  -- JSON: task id, verdict, the trace it came from, entries abstracted
    created_at   REAL NOT NULL,
    UNIQUE (kind, scope, planner, video_id, question, text)
);
CREATE INDEX IF NOT EXISTS experience_lookup ON experience (scope, kind, planner, video_id);
