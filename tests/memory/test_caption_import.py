"""Memories without pixels: importing the caption sets that LLoVi and VideoAgent released (small real
slices of the files in ../shared/data/benchmarks), every bad input refused with nothing written, and
asking such a memory (tools that need frames or objects say there are none)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.config import Settings
from vidagent.errors import MemoryStoreError
from vidagent.memory.caption_formats import CaptionFormatError, read_caption_set
from vidagent.memory.caption_import import MAX_EMBEDDED_BYTES, ImportOptions, import_captions
from vidagent.memory.store import Library
from vidagent.memory.stored_video import NoPixelsError
from vidagent.memory.video_memory import VideoMemory
from vidagent.perception.suite import text_embedder
from vidagent.tools.frames import FrameTools
from vidagent.tools.temporal import TemporalTools

from conftest import DATA
from fakes import HashingEmbedder, ScriptedLLM

BENCHMARKS = DATA / "benchmarks"
LAVILA = BENCHMARKS / "egoschema" / "lavila_subset.json"
EGO_QUESTIONS = BENCHMARKS / "egoschema" / "questions_dev.json"
COGAGENT = BENCHMARKS / "nextqa" / "nextqa_allcaps_1fps.zip"
NEXTQA_QUESTIONS = BENCHMARKS / "nextqa" / "val_dev.csv"


def _needs(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"benchmark data {path} is not available")
    return path


@pytest.fixture(scope="module")
def embedder():
    return text_embedder(Settings.from_env())


@pytest.fixture(scope="module")
def ego_slice(tmp_path_factory) -> tuple[Path, list[str]]:
    """Two EgoSchema videos of the development split, as LLoVi released their captions (180 each)."""
    questions = json.loads(_needs(EGO_QUESTIONS).read_text())
    captions = json.loads(_needs(LAVILA).read_text())
    ids = [q["q_uid"] for q in questions[:2]]
    path = tmp_path_factory.mktemp("ego") / "egoschema_lavila_slice.json"
    path.write_text(json.dumps({i: captions[i] for i in ids}))
    return path, ids


@pytest.fixture(scope="module")
def nextqa_slice(tmp_path_factory) -> tuple[Path, list[str]]:
    """Two NExT-QA videos of the development split, as VideoAgent released their captions (a zip of *_cap.json)."""
    videos: list[str] = []
    for line in _needs(NEXTQA_QUESTIONS).read_text().splitlines()[1:]:
        video = line.split(",", 1)[0]
        if video not in videos:
            videos.append(video)
        if len(videos) == 2:
            break
    path = tmp_path_factory.mktemp("nextqa") / "nextqa_caps_slice.zip"
    with zipfile.ZipFile(_needs(COGAGENT)) as released, zipfile.ZipFile(path, "w") as sliced:
        for video in videos:
            name = f"nextqa_allcaps_1fps/{video}_cap.json"
            sliced.writestr(name, released.read(name))
    return path, videos


def _videos(library_path: Path) -> list[str]:
    with Library(library_path) as library:
        return [row["video_id"] for row in library.video_rows()]


@pytest.mark.models
def test_llovi_captions_become_one_memory_per_video_with_their_seconds(tmp_path, embedder, ego_slice):
    path, ids = ego_slice
    with Library(tmp_path / "lib.sqlite") as library:
        report = import_captions(library, embedder, path)
        assert (report.format, report.namespace) == ("llovi", "egoschema")
        assert report.imported == [f"egoschema:{i}" for i in ids] and report.captions == 360
        stored = library.stored_video(f"egoschema:{ids[0]}")
        assert stored is not None and stored.duration_s == 180.0 and stored.provenance.captioner.startswith("LaViLa")
        memory = VideoMemory(stored, library)
        released = json.loads(path.read_text())[ids[0]]
        assert memory.stages == ["segments"] and memory.segment_count == 180 and not memory.has_pixels
        assert [(s.start_s, s.end_s) for s in memory.segments[:2]] == [(0.0, 1.0), (1.0, 2.0)]
        assert memory.segments[0].description == " ".join(released[0].split())
        assert memory.segments[0].embedding.shape == (384,) and memory.segment_seconds == 1.0
        assert library.count_rows("clips", stored.content_hash) >= 1
        assert "camera wearer" in stored.provenance.note
        with pytest.raises(NoPixelsError, match="no frames"):
            list(stored.frames_at([1.0]))
        rows = {row["video_id"]: row for row in library.video_rows()}
        assert rows[f"egoschema:{ids[0]}"]["captioner"].startswith("LaViLa")


@pytest.mark.models
def test_videoagents_zip_becomes_memories_keyed_by_second(tmp_path, embedder, nextqa_slice):
    path, videos = nextqa_slice
    with Library(tmp_path / "lib.sqlite") as library:
        report = import_captions(library, embedder, path)
        assert (report.format, report.namespace) == ("videoagent", "nextqa")
        with zipfile.ZipFile(path) as archive:
            released = json.loads(archive.read(f"nextqa_allcaps_1fps/{videos[0]}_cap.json"))
        memory = VideoMemory(library.stored_video(f"nextqa:{videos[0]}"), library)
        assert memory.segment_count == len(released) and memory.video.duration_s == float(len(released))
        assert memory.segments[3].description == " ".join(released["3"].split())
        assert library.caption_provenance(memory.video_id).file.endswith(f"!nextqa_allcaps_1fps/{videos[0]}_cap.json")


@pytest.mark.models
def test_importing_the_same_file_again_rebuilds_nothing_and_a_stopped_import_resumes(tmp_path, embedder, ego_slice):
    path, ids = ego_slice
    with Library(tmp_path / "lib.sqlite") as library:
        first = import_captions(library, embedder, path, ImportOptions(only=[ids[0]]))  # as if stopped after one
        built = library.rows("SELECT built_at, config_key FROM stages WHERE video_id=?", (f"egoschema:{ids[0]}",))
        resumed = import_captions(library, embedder, path)
        again = import_captions(library, embedder, path)
        assert first.imported == [f"egoschema:{ids[0]}"]
        assert resumed.unchanged == [f"egoschema:{ids[0]}"] and resumed.imported == [f"egoschema:{ids[1]}"]
        assert again.imported == [] and len(again.unchanged) == 2
        assert library.rows("SELECT built_at, config_key FROM stages WHERE video_id=?",
                            (f"egoschema:{ids[0]}",)) == built


class _FailingEmbedder:
    """The real embedder, failing on its second video: an import that dies half-way."""

    def __init__(self, embedder) -> None:
        self.embedder, self.name, self.calls = embedder, embedder.name, 0

    def embed_passages(self, texts):
        self.calls += 1
        if self.calls > 1:
            raise MemoryStoreError("disk full")
        return self.embedder.embed_passages(texts)


@pytest.mark.models
def test_an_import_that_fails_half_way_leaves_whole_memories_only(tmp_path, embedder, ego_slice):
    path, ids = ego_slice
    with Library(tmp_path / "lib.sqlite") as library:
        with pytest.raises(MemoryStoreError, match="disk full"):
            import_captions(library, _FailingEmbedder(embedder), path)
        assert [row["video_id"] for row in library.video_rows()] == [f"egoschema:{ids[0]}"]
        assert library.count_rows("segments", f"egoschema:{ids[1]}") == 0


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


BAD_INPUTS = {
    # name: (file name, content (str, or a callable of the folder), --format, expected message)
    "unknown format": ("captions.txt", "0 a man walks", None, "cannot tell its caption format"),
    "format not known": ("captions.json", "{}", "srt", "unknown caption format 'srt'"),
    "a list, not an object": ("captions.json", '["#C C walks"]', None, "expected a JSON object of video id"),
    "captions not a list": ("captions.json", '{"v1": "#C C walks"}', None, "video 'v1': expected a list"),
    "no captions": ("captions.json", '{"v1": []}', None, "video 'v1': has no captions"),
    "empty caption": ("captions.json", '{"v1": ["#C C walks", "  "]}', None, "video 'v1' caption 1: the caption is empty"),
    "caption not text": ("captions.json", '{"v1": ["#C C walks", 3]}', None, "caption 1: a caption must be text"),
    "duplicate video": ("captions.json", '{"v1": ["a"], "v1": ["b"]}', None, "key 'v1' appears twice"),
    "bad video id": ("captions.json", '{"v 1": ["a"]}', None, "'v 1' is not a usable video id"),
    "truncated json": ("captions.json", '{"v1": ["#C C walks", "#C C', None, "not valid JSON"),
    "seconds going back": ("caps.zip", lambda d: _zip(d / "caps.zip", {"x/v1_cap.json": '{"1": "a", "0": "b"}'}),
                           None, "v1_cap.json: second 0 comes after second 1"),
    "second not a number": ("caps.zip", lambda d: _zip(d / "caps.zip", {"x/v1_cap.json": '{"one": "a"}'}),
                            None, "key 'one' is not a whole second"),
    "same video twice in a zip": ("caps.zip", lambda d: _zip(d / "caps.zip", {"a/v1_cap.json": '{"0": "a"}',
                                                                             "b/v1_cap.json": '{"0": "b"}'}),
                                  None, "video 'v1' appears twice"),
    "zip without captions": ("caps.zip", lambda d: _zip(d / "caps.zip", {"readme.txt": "hi"}), None,
                             "no *_cap.json files in this zip"),
    "csv without a column": ("caps.csv", "video_id,start_s,caption\nv1,0,a\n", None, "the header lacks end_s"),
    "csv end before start": ("caps.csv", "video_id,start_s,end_s,caption\nv1,2,1,a\n", None,
                             "line 2: end_s 1 is not after start_s 2"),
    "csv times going back": ("caps.csv", "video_id,start_s,end_s,caption\nv1,4,5,a\nv1,1,2,b\n", None,
                             "line 3: video 'v1' starts at 1 s after a caption at 4 s"),
    "csv same span twice": ("caps.csv", "video_id,start_s,end_s,caption\nv1,0,1,a\nv1,0,1,b\n", None,
                            "has a second caption for 0-1 s"),
    "jsonl not a number": ("caps.jsonl", '{"video_id": "v1", "start_s": "soon", "end_s": 1, "caption": "a"}\n', None,
                           "line 1: start_s 'soon' is not a number"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_caption_sets_are_one_line_errors_naming_file_and_record_and_write_nothing(tmp_path, embedder, case):
    name, content, format, message = BAD_INPUTS[case]
    path = content(tmp_path) if callable(content) else tmp_path / name
    if not callable(content):
        path.write_text(content)
    library_path = tmp_path / "lib.sqlite"
    with Library(library_path) as library:
        with pytest.raises(CaptionFormatError) as raised:
            import_captions(library, embedder, path, ImportOptions(format=format, namespace="test"))
    text = str(raised.value)
    assert message in text and "\n" not in text
    assert case in ("format not known",) or path.name in text
    assert _videos(library_path) == []


@pytest.mark.clips
def test_a_truncated_release_zip_is_refused_and_nothing_is_imported(tmp_path, embedder, nextqa_slice):
    path, _ = nextqa_slice
    cut = tmp_path / "nextqa_cut.zip"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with Library(tmp_path / "lib.sqlite") as library:
        with pytest.raises(CaptionFormatError, match="nextqa_cut.zip: not a readable zip .*truncated"):
            import_captions(library, embedder, cut)
    assert _videos(tmp_path / "lib.sqlite") == []


def test_a_generic_jsonl_keeps_each_captions_own_times(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"video_id": "a", "start_s": 0, "end_s": 4.5, "caption": "a man opens a door"},
        {"video_id": "a", "start_s": 4.5, "end_s": 9, "caption": "he walks in"},
        {"video_id": "b", "start_s": 0, "end_s": 2, "caption": "a cat sleeps"}]))
    format, videos = read_caption_set(path)
    assert format == "jsonl" and [v.video for v in videos] == ["a", "b"]
    assert [(c.start_s, c.end_s) for c in videos[0].captions] == [(0.0, 4.5), (4.5, 9.0)] and videos[0].duration_s == 9.0


@pytest.mark.models
def test_tools_read_captions_where_they_would_look_at_frames_and_objects_are_withheld(tmp_path, embedder, ego_slice,
                                                                                   models_dir):
    from vidagent.session import Session

    path, ids = ego_slice
    settings = replace(Settings.from_env(), home=tmp_path, models=models_dir)
    with Library(settings.library_path) as library:
        import_captions(library, embedder, path)
        memory = VideoMemory(library.stored_video(f"egoschema:{ids[0]}"), library)
        llm = ScriptedLLM(["He washes a bowl.", "He rinses it."])
        frames = FrameTools(memory, describer=None, vqa=None, llm=llm)  # type: ignore[arg-type]
        described = frames.frame_description(10.0, 12.0)
        assert described.text.startswith("Captions (this memory has no frames):\n10.0-11.0 s: ")
        assert [(e.start_s, e.end_s) for e in described.evidence] == [(10.0, 11.0), (11.0, 12.0)]
        asked = frames.frame_question_answering("What does he wash?", 10.0, 11.0)
        assert "He washes a bowl." in asked.text and "10.0-11.0 s: " in llm.requests[0][0].content
        vqa = TemporalTools(memory, embedder, vqa=None, llm=llm).visual_question_answering("What now?", 20)  # type: ignore[arg-type]
        assert "read from their captions" in vqa.text and len(vqa.evidence) == 3
    llm = ScriptedLLM(["Thought: look at the objects\nAction: object_memory_querying\nAction Input: what does C hold?",
                       "Thought: none\nFinal Answer: 3"])
    choices = ["a cup", "a bowl", "a knife", "a sponge", "a towel"]
    with Session(settings, llm=llm) as session:
        answer = session.ask(f"egoschema:{ids[0]}", "What does C hold?", choices,
                             planner="react", planner_options={"tools": "caption_retrieval,object_memory_querying"})
    assert not [s for s in answer.trace if getattr(s, "tool", "") == "object_memory_querying"]
    assert "Unknown tool 'object_memory_querying'" in llm.requests[1][-1].content
    assert "object_memory_querying" not in llm.requests[0][0].content  # not offered: a memory of captions has no objects
    assert answer.choice_index is not None and answer.text == choices[answer.choice_index]
    assert "LaViLa" in llm.requests[0][0].content  # the memory note says what the descriptions are


def _cli(*args: str, library: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIDAGENT_LIBRARY": str(library)}
    return subprocess.run([sys.executable, "-m", "vidagent.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.mark.models  # the import embeds with E5, in the command's process (the guard cannot see it)
def test_the_import_command_reports_and_refuses_in_one_line(tmp_path, ego_slice):
    path, ids = ego_slice
    library = tmp_path / "lib.sqlite"
    done = _cli("import", str(path), "--json", "-q", library=library)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["imported"] == [f"egoschema:{i}" for i in ids] and report["captions"] == 360
    again = _cli("import", str(path), "-q", library=library)
    assert again.returncode == 0 and "0 memories imported, 2 unchanged" in again.stdout
    listed = _cli("index", "--list", library=library)
    assert listed.returncode == 0 and "2 memories in" in listed.stderr
    assert f"egoschema:{ids[0]}\t180.0 s\tsegments\tcaptions by LaViLa (LLoVi's release) ({path.resolve()})" in listed.stdout
    bad = tmp_path / "broken.json"
    bad.write_text('{"v1": ["#C C')
    refused = _cli("import", str(bad), "--namespace", "mine", library=library)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "broken.json: not valid JSON" in refused.stderr
    missing = _cli("ask", "egoschema:no-such-video", "what?", "--planner", "random", "--choice", "a", "--choice", "b",
                   library=library)
    assert missing.returncode == 2 and "no memory with this id" in missing.stderr


@pytest.mark.models
def test_the_library_function_imports_and_ask_reads_the_memory_by_its_id(tmp_path, nextqa_slice, models_dir):
    import vidagent

    path, videos = nextqa_slice
    settings = replace(Settings.from_env(), home=tmp_path, models=models_dir)
    report = vidagent.import_captions(path, settings=settings)
    assert sorted(report.imported) == sorted(f"nextqa:{v}" for v in videos)  # in the zip's order
    answer = vidagent.ask(f"nextqa:{videos[0]}", "What happens?", ["a", "b"], planner="random", settings=settings)
    assert answer.video_id == f"nextqa:{videos[0]}" and answer.choice_index in (0, 1)


@pytest.mark.models
def test_a_wide_range_is_skimmed_evenly_and_react_skims_a_long_video_first(tmp_path, embedder, ego_slice, models_dir):
    from vidagent.session import Session

    path, ids = ego_slice
    settings = replace(Settings.from_env(), home=tmp_path, models=models_dir)
    with Library(settings.library_path) as library:
        import_captions(library, embedder, path)
        memory = VideoMemory(library.stored_video(f"egoschema:{ids[0]}"), library)
        tools = TemporalTools(memory, embedder, vqa=None, llm=None)  # type: ignore[arg-type]
        skimmed = tools.caption_retrieval(0, 179)
        assert skimmed.text.startswith("(180 segments in 0-179: 15 of them, evenly spread, are shown")
        assert [e.start_s for e in skimmed.evidence] == [round(i * 179 / 14) for i in range(15)]
        lines = skimmed.text.splitlines()[1:]
        assert len(lines) == 15 and lines[1].startswith("Segment 13 (13.0-14.0 s): ")  # spread lines are never merged
        assert len(tools.caption_retrieval(20, 34).evidence) == 15  # a narrow range: every one
    llm = ScriptedLLM(["Thought: enough\nFinal Answer: 1"])
    with Session(settings, llm=llm) as session:
        answer = session.ask(f"egoschema:{ids[0]}", "What is C mainly doing?", ["a", "b", "c", "d", "e"],
                             planner="react")
    overview = next(s for s in answer.trace if s.kind == "tool_call")
    assert overview.automatic and overview.arguments == {"start_segment": 0, "end_segment": 179}


def test_a_caption_bomb_and_a_zip_bomb_are_refused_before_any_work_and_a_top_level_zip_member_is_read(tmp_path):
    long_line = tmp_path / "long.jsonl"
    long_line.write_text(json.dumps({"video_id": "v1", "start_s": 0, "end_s": 2, "caption": "x " * 60_000}) + "\n")
    with pytest.raises(CaptionFormatError, match=r"long.jsonl.*a caption of 120,000 characters \(at most 8,000\)"):
        read_caption_set(long_line)
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("nextqa/1234_cap.json", "{" + " " * (20 * 1024 * 1024) + "}")
    with pytest.raises(CaptionFormatError, match=r"1234_cap.json: inflates \d[\d,]* times"):
        read_caption_set(bomb)
    flat = tmp_path / "flat.zip"
    with zipfile.ZipFile(flat, "w") as archive:
        archive.writestr("5678_cap.json", json.dumps({"0": "a man walks", "1": "he sits down"}))
    _, videos = read_caption_set(flat)
    assert [video.video for video in videos] == ["5678"]  # not "flat.zip!5678"


class _RecordingEmbedder(HashingEmbedder):
    """The hashing embedder, keeping every text it was asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_passages(self, texts):
        self.texts.extend(texts)
        return super().embed_passages(texts)


@pytest.mark.parametrize("script", ["latin", "cjk"])
def test_captions_just_under_the_cap_cost_the_embedder_a_bounded_prefix_each_and_are_stored_whole(tmp_path, script):
    """Issue 55: 200 captions of 7,999 characters took the embedder over 400 s, one CJK caption 16 s."""
    unit = "a man walks the dog. " if script == "latin" else "中文字幕测试"
    long_caption = (unit * 2000)[:7995]
    path = tmp_path / "near_cap.jsonl"
    path.write_text("".join(json.dumps({"video_id": "v1", "start_s": i, "end_s": i + 1, "caption": f"{i} {long_caption}"},
                                       ensure_ascii=False) + "\n" for i in range(20)), encoding="utf-8")
    embedder = _RecordingEmbedder()
    with Library(tmp_path / "lib.sqlite") as library:
        import_captions(library, embedder, path, ImportOptions(namespace="test"))
        stored = [row[0] for row in library.rows("SELECT description FROM segments ORDER BY segment_id")]
    assert len(embedder.texts) == 20
    assert all(len(text.encode("utf-8")) <= MAX_EMBEDDED_BYTES for text in embedder.texts)
    assert all(text.startswith(stored[i][:100]) for i, text in enumerate(embedder.texts))
    assert [len(text) for text in stored] == [len(" ".join(f"{i} {long_caption}".split())) for i in range(20)]


def test_a_csv_field_of_megabytes_is_a_one_line_caption_error_not_an_internal_error(tmp_path):
    path = tmp_path / "huge_field.csv"
    path.write_text("video_id,start_s,end_s,caption\nv1,0,1,\"" + "x" * (3 * 1024 * 1024) + "\"\n")
    with pytest.raises(CaptionFormatError) as raised:
        read_caption_set(path)
    assert "huge_field.csv: line" in str(raised.value) and "field larger than field limit" in str(raised.value)
    assert "\n" not in str(raised.value)
