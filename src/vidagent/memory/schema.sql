-- vidagent library schema (version 1). One database holds the memory of many videos.
-- Every row belongs to a video (videos.video_id = BLAKE2b of the file's bytes) and was written
-- by one build stage; a stage's rows and its row in `stages` are committed in one transaction,
-- so rows exist only for stages that finished.

CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS videos (
    video_id    TEXT PRIMARY KEY,
    path        TEXT NOT NULL,          -- where it was last seen
    duration_s  REAL NOT NULL,
    fps         REAL NOT NULL,
    width       INTEGER NOT NULL,       -- as displayed (after rotation)
    height      INTEGER NOT NULL,
    rotation    INTEGER NOT NULL,
    has_audio   INTEGER NOT NULL,
    codec       TEXT NOT NULL,
    added_at    TEXT NOT NULL
);

-- Finished build stages: (video, stage, config) -> when and how long.
CREATE TABLE IF NOT EXISTS stages (
    video_id    TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    stage       TEXT NOT NULL,
    config_key  TEXT NOT NULL,          -- hash of `config`
    config      TEXT NOT NULL,          -- JSON: models and parameters used
    built_at    TEXT NOT NULL,
    seconds     REAL NOT NULL,
    PRIMARY KEY (video_id, stage)
);

-- Stage "frames": sampled frames described by the frame describer.
CREATE TABLE IF NOT EXISTS frames (
    video_id    TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    time_s      REAL NOT NULL,
    segment_id  INTEGER NOT NULL,
    description TEXT NOT NULL,
    objects     TEXT NOT NULL,          -- JSON list of object phrases
    PRIMARY KEY (video_id, time_s)
);

-- Stage "frames": on-screen text read in those frames (OCR).
CREATE TABLE IF NOT EXISTS text_in_frame (
    video_id    TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    time_s      REAL NOT NULL,
    segment_id  INTEGER NOT NULL,
    text        TEXT NOT NULL,
    x1 REAL, y1 REAL, x2 REAL, y2 REAL,
    score       REAL NOT NULL
);

-- Stage "speech": transcribed speech.
CREATE TABLE IF NOT EXISTS speech (
    video_id    TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    start_s     REAL NOT NULL,
    end_s       REAL NOT NULL,
    text        TEXT NOT NULL
);

-- Stage "segments": the temporal memory, one row per 2-second segment.
CREATE TABLE IF NOT EXISTS segments (
    video_id       TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    segment_id     INTEGER NOT NULL,
    start_s        REAL NOT NULL,
    end_s          REAL NOT NULL,
    description    TEXT NOT NULL,       -- what was seen (caption or detector description)
    speech         TEXT NOT NULL,       -- speech overlapping the segment
    on_screen_text TEXT NOT NULL,
    embedding      BLOB NOT NULL,       -- float32 text embedding of the three fields
    PRIMARY KEY (video_id, segment_id)
);

CREATE INDEX IF NOT EXISTS frames_by_segment ON frames(video_id, segment_id);
CREATE INDEX IF NOT EXISTS text_by_segment ON text_in_frame(video_id, segment_id);
CREATE INDEX IF NOT EXISTS speech_by_video ON speech(video_id, start_s);
