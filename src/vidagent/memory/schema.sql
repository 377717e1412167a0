-- vidagent library schema (version 5). One database holds the memory of many videos.
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

-- Stage "frames": what was seen in each sampled frame, as facts (schema 4; schema 3 kept a sentence).
-- A frame is known by a captioning model's caption, or (offline) by the objects a detector found and
-- the frame's image-classifier guesses. Its on-screen text is in text_in_frame, how the picture moves in
-- motion. `description` is those facts in words (vidagent.perception.frame_words), for SQL readers only.
CREATE TABLE IF NOT EXISTS frames (
    video_id    TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    time_s      REAL NOT NULL,
    segment_id  INTEGER NOT NULL,
    description TEXT NOT NULL,          -- what was seen, in words (derived from the columns below)
    caption     TEXT,                   -- a captioning model's sentence; NULL where no captioner ran
    objects     TEXT NOT NULL,          -- JSON list, one per detection in the detector's order:
                                        -- {"label", "score", "box": [x1, y1, x2, y2] (pixels of the frame
                                        -- described), "colour", "kind" (a confident ImageNet guess), "pose"}
    labels      TEXT NOT NULL,          -- JSON list of [name, score]: confident whole-frame ImageNet guesses
    width       INTEGER NOT NULL,       -- of the frame described (its boxes are in its pixels)
    height      INTEGER NOT NULL,
    PRIMARY KEY (video_id, time_s)
);

-- Stage "frames": what described them, said once per memory rather than in every frame.
CREATE TABLE IF NOT EXISTS describers (
    video_id    TEXT PRIMARY KEY REFERENCES videos(video_id) ON DELETE CASCADE,
    describer   TEXT NOT NULL,          -- the describer's name (models and options)
    label       TEXT NOT NULL,          -- its mark, e.g. "[detector description, not a caption]"; "" for captions
    note        TEXT NOT NULL           -- what an LLM reading the descriptions should know (the memory note)
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
    description    TEXT NOT NULL,       -- what was seen, in words: its frames' (and motion's), or an imported caption
    speech         TEXT NOT NULL,       -- speech overlapping the segment
    on_screen_text TEXT NOT NULL,
    embedding      BLOB NOT NULL,       -- float32 text embedding of the describer's sentences, speech and text
    PRIMARY KEY (video_id, segment_id)
);

-- Stage "segments": clip-level descriptions, runs of consecutive segments that look alike merged.
CREATE TABLE IF NOT EXISTS clips (
    video_id       TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    clip_id        INTEGER NOT NULL,
    start_s        REAL NOT NULL,
    end_s          REAL NOT NULL,
    first_segment  INTEGER NOT NULL,
    last_segment   INTEGER NOT NULL,
    description    TEXT NOT NULL,
    PRIMARY KEY (video_id, clip_id)
);

-- Stage "objects" (space-dominant memory): every detection in the frames sampled for tracking.
-- Boxes are in pixels of the displayed video (after rotation); cx, cy, area are fractions of the
-- frame (cx = 0 left edge, cy = 0 top edge), handy for "on the left" or "large" in SQL.
CREATE TABLE IF NOT EXISTS detections (
    video_id     TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    detection_id INTEGER NOT NULL,
    time_s       REAL NOT NULL,
    segment_id   INTEGER NOT NULL,
    category     TEXT NOT NULL,
    score        REAL NOT NULL,
    x1 REAL NOT NULL, y1 REAL NOT NULL, x2 REAL NOT NULL, y2 REAL NOT NULL,
    cx REAL NOT NULL, cy REAL NOT NULL, area REAL NOT NULL,
    track_id     INTEGER,              -- NULL: the tracker did not confirm it
    object_id    INTEGER,              -- NULL when track_id is NULL
    mask         TEXT,                 -- where a segmentation backend ran: COCO run-length mask over the displayed
                                       -- frame (pycocotools' compressed string, or a JSON list of counts); else NULL
    PRIMARY KEY (video_id, detection_id)
);

-- Stage "objects": tracks (one tracker id each) and the object each was re-identified as.
CREATE TABLE IF NOT EXISTS tracks (
    video_id     TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    track_id     INTEGER NOT NULL,
    object_id    INTEGER NOT NULL,
    category     TEXT NOT NULL,
    first_s      REAL NOT NULL,
    last_s       REAL NOT NULL,
    frame_count  INTEGER NOT NULL,
    PRIMARY KEY (video_id, track_id)
);

-- Stage "objects": unique objects (re-ID groups of tracks) with what they look like and do.
CREATE TABLE IF NOT EXISTS objects (
    video_id     TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    object_id    INTEGER NOT NULL,
    category     TEXT NOT NULL,
    first_s      REAL NOT NULL,
    last_s       REAL NOT NULL,
    frame_count  INTEGER NOT NULL,      -- sampled frames it was seen in
    appearance   TEXT NOT NULL,         -- e.g. "white and brown dog, large"
    motion       TEXT NOT NULL,         -- e.g. "moves from the left to the right"
    description  TEXT NOT NULL,         -- appearance and motion in one sentence
    embedding    BLOB NOT NULL,         -- float32 text embedding of the description
    feature      BLOB NOT NULL,         -- float32 appearance feature (re-ID model)
    PRIMARY KEY (video_id, object_id)
);

-- Stage "objects": which segments each object appears in.
CREATE TABLE IF NOT EXISTS object_segments (
    video_id     TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    object_id    INTEGER NOT NULL,
    segment_id   INTEGER NOT NULL,
    first_s      REAL NOT NULL,
    last_s       REAL NOT NULL,
    frame_count  INTEGER NOT NULL,
    PRIMARY KEY (video_id, object_id, segment_id)
);

-- Stage "actions" (schema 5): what each object does over time, as short verbs with their time spans.
-- People's come from their pose words over consecutive frames (sits down, stands up, bends over,
-- raises an arm, lies down) and their trajectory (walks, runs, enters, leaves); things' from their
-- trajectory (moves, stops, is carried, appears, disappears); a video classifier's when one is
-- configured. A verb at one moment (enters, leaves, appears, disappears, stops) has start_s = end_s.
CREATE TABLE IF NOT EXISTS actions (
    video_id     TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    action_id    INTEGER NOT NULL,      -- in time order of start_s within the video
    object_id    INTEGER NOT NULL,      -- objects.object_id of who or what does it
    verb         TEXT NOT NULL,         -- e.g. "walks", "sits down", "stops", "is carried"
    start_s      REAL NOT NULL,
    end_s        REAL NOT NULL,
    source       TEXT NOT NULL,         -- "pose", "trajectory" or "classifier"
    confidence   REAL NOT NULL,         -- 0-1: how sure the source is
    other_id     INTEGER,               -- the other object of a two-object action ("is carried" by, "carries"
                                        -- what); NULL for an action of one object
    PRIMARY KEY (video_id, action_id)
);

-- Stage "descriptions" (schema 5): one line per object from everything the memory knows of it
-- (category, ImageNet kind, colour, size, mask shape, actions), and a captioning model's caption
-- of its best crop where one is configured. Object retrieval ranks by its embedding.
CREATE TABLE IF NOT EXISTS object_descriptions (
    video_id     TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    object_id    INTEGER NOT NULL,
    line         TEXT NOT NULL,         -- e.g. "red car, medium; moves from the left to the centre, stops at 4.0 s"
    caption      TEXT,                  -- a captioner's sentence about its best crop; NULL where none ran
    best_s       REAL NOT NULL,         -- when the sighting its best crop comes from was seen
    embedding    BLOB NOT NULL,         -- float32 text embedding of the line (and caption)
    PRIMARY KEY (video_id, object_id)
);

CREATE INDEX IF NOT EXISTS actions_by_object ON actions(video_id, object_id, start_s);

-- Progress of a stage that has not finished: results per chunk of sampled frames, so a killed
-- build resumes where it stopped. Deleted in the transaction that writes the finished stage.
CREATE TABLE IF NOT EXISTS stage_checkpoints (
    video_id      TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    stage         TEXT NOT NULL,
    config_key    TEXT NOT NULL,
    chunk_start_s REAL NOT NULL,
    payload       TEXT NOT NULL,        -- JSON, stage-specific
    PRIMARY KEY (video_id, stage, config_key, chunk_start_s)
);

CREATE INDEX IF NOT EXISTS detections_by_time ON detections(video_id, time_s);
CREATE INDEX IF NOT EXISTS detections_by_object ON detections(video_id, object_id);
CREATE INDEX IF NOT EXISTS frames_by_segment ON frames(video_id, segment_id);
CREATE INDEX IF NOT EXISTS text_by_segment ON text_in_frame(video_id, segment_id);
CREATE INDEX IF NOT EXISTS speech_by_video ON speech(video_id, start_s);

-- Stage "motion" (built when Settings.perception has "motion"): how the picture moves in each
-- segment, from the frames alone (vidagent.video.motion): camera motion, scene cuts, movement.
CREATE TABLE IF NOT EXISTS motion (
    video_id     TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    segment_id   INTEGER NOT NULL,
    start_s      REAL NOT NULL,
    end_s        REAL NOT NULL,
    camera       TEXT NOT NULL,         -- e.g. "camera pans right, shaky (handheld)"; "" when unknown
    cut_times    TEXT NOT NULL,         -- JSON list of seconds where scene cuts happened
    moving       TEXT NOT NULL,         -- e.g. "much movement in the centre"; "" when little moved
    phrase       TEXT NOT NULL,         -- the three in one line
    PRIMARY KEY (video_id, segment_id)
);

-- Stage "camera" (built with the object memory, in the objects stage's decoding pass): the camera's own
-- motion between consecutive object sample times (vidagent.video.motion), which the actions stage measures
-- speeds against (vidagent.memory.camera_motion).
CREATE TABLE IF NOT EXISTS camera_path (
    video_id     TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    start_s      REAL NOT NULL,
    end_s        REAL NOT NULL,
    shift_x      REAL NOT NULL,         -- how fast the picture's content moves, frame widths a second (right +)
    shift_y      REAL NOT NULL,         -- the same downwards, in frame widths a second
    zoom         REAL NOT NULL,         -- log scale change a second (the content grows: +)
    followed     INTEGER NOT NULL,      -- 1: measured on followed corners, no cut; 0: boxes are not carried
    PRIMARY KEY (video_id, start_s)
);

-- Stage "segments" of a memory imported from a released caption set (`vidagent import`; schema 3):
-- where its captions came from. Such a memory has no file: videos.path names the caption file,
-- its segments are the captions (one per caption, with their own start and end), and it has no
-- frames, speech or objects.
CREATE TABLE IF NOT EXISTS caption_sources (
    video_id     TEXT NOT NULL REFERENCES videos(video_id) ON DELETE CASCADE,
    captioner    TEXT NOT NULL,         -- e.g. "LaViLa (LLoVi's release)"
    file         TEXT NOT NULL,         -- the caption file as given to the import (a zip's member after '!')
    sha256       TEXT NOT NULL,         -- of the whole caption file
    format       TEXT NOT NULL,         -- llovi | videoagent | jsonl | csv
    note         TEXT NOT NULL,         -- what the captions are, said once to planners
    PRIMARY KEY (video_id)
);
