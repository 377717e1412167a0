-- Experience kept across questions, in the library database beside the video memory.
-- kind: what the example is ('trace': a successful PEIL reasoning trace kept by the Learner;
-- later kinds: DigimonGPT's semantic QA memory and procedural workflows).
CREATE TABLE IF NOT EXISTS experience_examples (
    example_id   INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL,
    planner      TEXT NOT NULL,
    question     TEXT NOT NULL,
    embedding    BLOB NOT NULL,          -- float32 query embedding of the question
    text         TEXT NOT NULL,          -- the example as a prompt shows it
    answer       TEXT NOT NULL,
    checked_by   TEXT NOT NULL,          -- 'reference' (a known answer) or 'self_check'
    attempts     INTEGER NOT NULL,       -- the try that succeeded (1 = first)
    created_at   REAL NOT NULL,
    UNIQUE (kind, planner, question, text)
);
CREATE INDEX IF NOT EXISTS experience_examples_kind ON experience_examples (kind, planner);
