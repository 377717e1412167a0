"""Dataset loaders: small files in each benchmark's format, written here, read back as EvalItems."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from vidagent.eval.dataset import LOCALIZATION, MULTIPLE_CHOICE, OPEN_ENDED, VideoFinder, load_id_map
from vidagent.eval.errors import DatasetError
from vidagent.eval.loaders import detect_benchmark_format, load_dataset

from conftest import DATA

NEXT_COLUMNS = ["video", "frame_count", "width", "height", "question", "answer", "qid", "type",
                "a0", "a1", "a2", "a3", "a4"]


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


@pytest.mark.clips
def test_vidagent_jsonl_dev_set():
    dev = DATA / "qa" / "dev.jsonl"
    if not dev.is_file():
        pytest.skip(f"the dev questions {dev} are not available")
    dataset = load_dataset(dev)
    assert dataset.format == "vidagent" and len(dataset.items) == 43
    by_id = {item.id: item for item in dataset.items}
    mc = by_id["dev_dog_2"]
    assert mc.task == MULTIPLE_CHOICE and mc.answer_index == 0 and mc.choices[0] == "a black leash"
    assert by_id["dev_dog_1"].task == OPEN_ENDED and "ball" in by_id["dev_dog_1"].accept
    loc = by_id["dev_dog_3"]
    assert loc.task == LOCALIZATION and loc.spans == ((1.1, 1.9),) and loc.group == "localization"


def test_nextqa_csv_types_map_to_groups(tmp_path):
    path = write_csv(tmp_path / "val.csv", NEXT_COLUMNS, [
        [4010069381, 840, 640, 480, "why did the boy run", 2, 6, "CW", "fell", "sat", "to catch ball", "ate", "slept"],
        [4010069381, 840, 640, 480, "what did the boy do after", 0, 7, "TN", "jump", "sit", "lie", "eat", "cry"],
        [2440175990, 300, 640, 480, "how many dogs", 4, 1, "DC", "one", "two", "three", "four", "five"],
    ])
    dataset = load_dataset(path)
    assert dataset.format == "nextqa"
    first, second, third = dataset.items
    assert (first.id, first.video, first.answer_index, first.group, first.type) == (
        "4010069381_6", "4010069381", 2, "causal", "CW")
    assert first.choices == ("fell", "sat", "to catch ball", "ate", "slept")
    assert second.group == "temporal" and third.group == "descriptive" and third.answer_index == 4


def test_intentqa_csv_uses_its_groups(tmp_path):
    columns = ["video_id", "frame_count", "width", "height", "question", "answer", "qid", "type",
               "a0", "a1", "a2", "a3", "a4"]
    folder = tmp_path / "IntentQA"
    folder.mkdir()
    path = write_csv(folder / "test.csv", columns, [
        [7, 10, 1, 1, "why cut the cake", 1, 3, "CW", "a", "b", "c", "d", "e"],
        [7, 10, 1, 1, "how open", 0, 4, "CH", "a", "b", "c", "d", "e"],
        [7, 10, 1, 1, "what before", 3, 5, "TP", "a", "b", "c", "d", "e"],
    ])
    dataset = load_dataset(path)
    assert dataset.format == "intentqa"
    assert [i.group for i in dataset.items] == ["why", "how", "before_after"]
    assert dataset.items[0].video == "7"


def test_nextgqa_csv_with_text_answers_and_spans(tmp_path):
    columns = ["video_id", "frame_count", "width", "height", "question", "answer", "qid", "type",
               "a0", "a1", "a2", "a3", "a4"]
    path = write_csv(tmp_path / "val.csv", columns, [
        [10001787725, 1, 1, 1, "why did the man wave", "to say goodbye", 1, "CW",
         "to dance", "to say goodbye", "to stretch", "to point", "to swat a fly"],
    ])
    write_json(tmp_path / "gsub_val.json",
               {"10001787725": {"duration": 34, "location": {"1": [[1.2, 5.8], [7.0, 9.0]]}, "fps": 29.97}})
    dataset = load_dataset(path)
    assert dataset.format == "nextgqa"
    item = dataset.items[0]
    assert item.answer_index == 1 and item.spans == ((1.2, 5.8), (7.0, 9.0)) and item.extra["grounded"]


def test_nextoe_csv_open_ended(tmp_path):
    columns = ["video", "frame_count", "width", "height", "question", "answer", "qid", "type", "additional_ref_answer"]
    path = write_csv(tmp_path / "val.csv", columns, [[55, 1, 1, 1, "what is the man holding", "cup", 2, "DO", "mug"]])
    item = load_dataset(path).items[0]
    assert (item.task, item.answer, item.accept, item.group) == (OPEN_ENDED, "cup", ("mug",), "descriptive")


def test_egoschema_with_subset_answers(tmp_path):
    questions = [{"q_uid": f"uid{i}", "google_drive_id": "x", "question": f"q{i}",
                  **{f"option {k}": f"o{k}" for k in range(5)}} for i in range(2)]
    path = write_json(tmp_path / "questions.json", questions)
    write_json(tmp_path / "subset_answers.json", {"uid1": 3})
    dataset = load_dataset(path)
    assert dataset.format == "egoschema"
    first, second = dataset.items
    assert first.answer_index is None and not first.has_key  # hidden test answer: kept, not scored
    assert second.answer_index == 3 and second.video == "uid1" and second.choices[4] == "o4"


def test_egoschema_split_finds_its_own_answers_beside_it(tmp_path):
    questions = [{"q_uid": "uid0", "google_drive_id": "x", "question": "q", **{f"option {k}": f"o{k}" for k in range(5)}}]
    path = write_json(tmp_path / "questions_dev.json", questions)
    write_json(tmp_path / "subset_answers.json", {"uid0": 1})  # another split's: not this one's
    write_json(tmp_path / "subset_answers_dev.json", {"uid0": 2})
    assert load_dataset(path).items[0].answer_index == 2


def test_star_json(tmp_path):
    path = write_json(tmp_path / "STAR_val.json", [{
        "question_id": "Interaction_T1_13", "question": "Which object was tidied up by the person?",
        "video_id": "6H78U", "start": 11.1, "end": 19.6, "answer": "The closet/cabinet.",
        "choices": [{"choice_id": 1, "choice": "The blanket."}, {"choice_id": 0, "choice": "The closet/cabinet."},
                    {"choice_id": 2, "choice": "The clothes."}, {"choice_id": 3, "choice": "The table."}],
    }])
    item = load_dataset(path).items[0]
    assert item.choices == ("The closet/cabinet.", "The blanket.", "The clothes.", "The table.")
    assert (item.answer_index, item.clip, item.group, item.video) == (0, (11.1, 19.6), "interaction", "6H78U")


def test_perception_test_mc(tmp_path):
    path = write_json(tmp_path / "mc_question_valid.json", {"video_10909": {
        "metadata": {"video_id": "video_10909"},
        "mc_question": [{"id": 0, "question": "Is the camera moving?", "options": ["yes", "no", "cannot tell"],
                         "answer_id": 1, "area": "physics", "reasoning": "descriptive", "tag": ["motion"]}],
    }})
    dataset = load_dataset(path)
    assert dataset.format == "perception_test"
    item = dataset.items[0]
    assert (item.id, item.answer_index, item.group, item.type, len(item.choices)) == (
        "video_10909_0", 1, "physics", "descriptive", 3)


def test_tvqa_jsonl_and_tvqa_plus_json(tmp_path):
    record = {"a0": "A", "a1": "B", "a2": "C", "a3": "D", "a4": "E", "answer_idx": 2, "q": "Why is Beckett angry?",
              "qid": 11, "ts": "76.01-84.2", "vid_name": "castle_s05e21_seg02_clip_14", "show_name": "Castle"}
    jsonl = tmp_path / "tvqa_val.jsonl"
    jsonl.write_text(json.dumps(record) + "\n")
    item = load_dataset(jsonl).items[0]
    assert (item.answer_index, item.clip, item.group, item.video) == (2, (76.01, 84.2), "why", record["vid_name"])
    plus = write_json(tmp_path / "tvqa_plus_val.json", [{**record, "ts": "NaN-NaN", "bbox": {}}])
    item = load_dataset(plus).items[0]
    assert item.clip is None and item.answer_index == 2


def test_activitynet_qa_questions_with_sibling_answers(tmp_path):
    path = write_json(tmp_path / "val_q.json", [
        {"video_name": "v_abc", "question": "is the person outdoors", "question_id": "v_abc_1"},
        {"video_name": "v_abc", "question": "what color is the ball", "question_id": "v_abc_2"},
    ])
    write_json(tmp_path / "val_a.json", [{"answer": "yes", "type": 3, "question_id": "v_abc_1"},
                                          {"answer": "red", "type": 4, "question_id": "v_abc_2"}])
    items = load_dataset(path).items
    assert [(i.answer, i.group, i.task) for i in items] == [("yes", "yes_no", OPEN_ENDED), ("red", "color", OPEN_ENDED)]
    assert items[0].question.endswith("?")
    with pytest.raises(DatasetError, match="holds answers"):
        load_dataset(tmp_path / "val_a.json", "activitynet_qa")


def test_ego4d_nlq(tmp_path):
    path = write_json(tmp_path / "nlq_val.json", {"version": "v1", "videos": [{"video_uid": "v1", "clips": [{
        "clip_uid": "clip-1", "video_start_sec": 0, "video_end_sec": 480,
        "annotations": [{"annotation_uid": "ann", "language_queries": [
            {"clip_start_sec": 12.5, "clip_end_sec": 15.0, "template": "Objects: Where is object X?",
             "query": "where did I put the scissors"},
            {"clip_start_sec": 1.0, "clip_end_sec": 2.0, "template": "Place: Where did I go?"},  # no query text
        ]}]}]}]})
    items = load_dataset(path).items
    assert len(items) == 1
    item = items[0]
    assert (item.id, item.video, item.task, item.spans, item.group) == (
        "ann_0", "clip-1", LOCALIZATION, ((12.5, 15.0),), "objects")
    assert "where did I put the scissors" in item.question and item.extra["query"] == "where did I put the scissors"


@pytest.mark.parametrize("content, fragment", [
    ('{"id": "a", "video": "v.mp4", "question": "q?"}\n{"id": "b", "video": \n', "line 2: not valid JSON"),
    ('{"id": "a", "video": "v.mp4"}\n', "line 1: missing 'question'"),
    ('{"id": "a", "video": "v", "question": "q", "choices": ["x", "y"], "answer_index": 5}\n', "out of range"),
    ('{"id": "a", "video": "v", "question": "q"}\n{"id": "a", "video": "v", "question": "r"}\n', "appears twice"),
])
def test_malformed_jsonl_is_one_clear_error(tmp_path, content, fragment):
    path = tmp_path / "qa.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError, match=fragment) as caught:
        load_dataset(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_malformed_csv_and_unknown_formats(tmp_path):
    bad = write_csv(tmp_path / "val.csv", NEXT_COLUMNS, [[1, 1, 1, 1, "q", "seven", 1, "CW", "a", "b", "c", "d", "e"]])
    with pytest.raises(DatasetError, match="line 2: answer 'seven'"):
        load_dataset(bad)
    odd = write_csv(tmp_path / "other.csv", ["x", "y"], [[1, 2]])
    with pytest.raises(DatasetError, match="cannot tell the format"):
        load_dataset(odd)
    with pytest.raises(DatasetError, match="unknown dataset format 'nope'"):
        load_dataset(odd, "nope")
    with pytest.raises(DatasetError, match="no such annotation file"):
        load_dataset(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(DatasetError, match="cannot tell the format"):
        detect_benchmark_format(tmp_path / "list.json")


def test_video_finder_by_name_container_prefix_and_id_map(tmp_path):
    root = tmp_path / "videos"
    (root / "0000").mkdir(parents=True)
    (root / "deep" / "er").mkdir(parents=True)
    (root / "0000" / "2440175990.mp4").write_bytes(b"x")
    (root / "deep" / "er" / "clip-1.mkv").write_bytes(b"x")
    (root / "v_abc.webm").write_bytes(b"x")
    (root / "notes.txt").write_bytes(b"x")
    finder = VideoFinder([root])
    assert finder.find("2440175990") == root / "0000" / "2440175990.mp4"
    assert finder.find("clip-1") == root / "deep" / "er" / "clip-1.mkv"
    assert finder.find("abc") == root / "v_abc.webm"  # ActivityNet ids with or without v_
    assert finder.find("notes") is None and finder.find("nothing") is None
    id_map = write_json(tmp_path / "map_vid_vidorID.json", {"7": "0000/2440175990"})
    mapped = VideoFinder([root], load_id_map(id_map))
    assert mapped.find("7") == root / "0000" / "2440175990.mp4"
    pairs = tmp_path / "map.csv"
    pairs.write_text("7,deep/er/clip-1.mkv\n")
    assert VideoFinder([root], load_id_map(pairs)).find("7") == root / "deep" / "er" / "clip-1.mkv"
    with pytest.raises(DatasetError, match="does not exist"):
        VideoFinder([tmp_path / "absent"])


def test_tsv_files_are_tab_separated(tmp_path):
    rows = [
        [4010069381, 840, 640, 480, "why did the boy run, then stop", 2, 6, "CW", "fell", "sat, then stood",
         "to catch ball", "ate", "slept"],
        [2440175990, 300, 640, 480, "how many dogs", 4, 1, "DC", "one", "two", "three", "four", "five"],
    ]
    path = tmp_path / "val.tsv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(NEXT_COLUMNS)
        writer.writerows(rows)
    assert detect_benchmark_format(path) == "nextqa"
    first, second = load_dataset(path).items
    assert (first.id, first.question, first.answer_index, first.group) == (
        "4010069381_6", "why did the boy run, then stop", 2, "causal")
    assert first.choices == ("fell", "sat, then stood", "to catch ball", "ate", "slept")
    assert second.id == "2440175990_1" and second.answer_index == 4
    id_map = tmp_path / "map.tsv"
    id_map.write_text("id\tpath\n7\tclips/a, b.mp4\n")  # a comma inside a tab-separated column
    assert load_id_map(id_map)["7"] == "clips/a, b.mp4"
