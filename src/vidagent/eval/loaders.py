"""Loaders for the annotation formats of the benchmarks the seed papers report, and vidagent's own.

Each loader reads one annotation file (and the sibling files its dataset ships, e.g. NExT-GQA's
``gsub_val.json`` or ActivityNet-QA's ``*_a.json``) into ``EvalItem``s. ``detect_benchmark_format`` picks
the loader from the file's shape; ``--format`` overrides it. Malformed input raises
``DatasetError`` naming the file and line or record.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from vidagent.eval.dataset import (
    LOCALIZATION,
    MULTIPLE_CHOICE,
    OPEN_ENDED,
    Dataset,
    EvalItem,
    check_unique_ids,
    read_json,
    table_delimiter,
)
from vidagent.eval.errors import DatasetError
from vidagent.eval.refvos import is_meta_expressions, load_ref_davis, load_ref_youtube_vos
from vidagent.prompts import prompt
from vidagent.text import fold

# NExT-QA question types and the groups its tables report (Acc_C, Acc_T, Acc_D).
NEXTQA_GROUPS = {
    "CW": "causal", "CH": "causal",
    "TN": "temporal", "TC": "temporal", "TP": "temporal",
    "DC": "descriptive", "DL": "descriptive", "DO": "descriptive",
}
# IntentQA reports Why, How and Before/After.
INTENTQA_GROUPS = {"CW": "why", "CH": "how", "TN": "before_after", "TP": "before_after", "TC": "before_after"}
ACTIVITYNET_QA_TYPES = ("motion", "spatial", "temporal", "yes_no", "color", "object", "location", "number", "other")
OPTION_COLUMNS = tuple(f"a{i}" for i in range(5))


@dataclass(frozen=True)
class Loader:
    name: str
    description: str
    load: Callable[[Path], list[EvalItem]]


# -- reading helpers -------------------------------------------------------------------------
def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not a UTF-8 text file") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path}: line {number}: not valid JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise DatasetError(f"{path}: line {number}: expected a JSON object")
        yield number, record


def _read_csv(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not a UTF-8 text file") from None
    delimiter = table_delimiter(path)
    reader = csv.DictReader(text.splitlines(), delimiter=delimiter)
    if not reader.fieldnames:
        raise DatasetError(f"{path}: the {'TSV' if delimiter == chr(9) else 'CSV'} file is empty")
    for number, row in enumerate(reader, 2):
        if None in row:
            raise DatasetError(f"{path}: line {number}: more values than columns")
        yield number, {k.strip(): (v or "").strip() for k, v in row.items()}


def _require(record: Mapping[str, Any], keys: Sequence[str], where: str) -> None:
    missing = [k for k in keys if k not in record or record[k] is None]
    if missing:
        raise DatasetError(f"{where}: missing {', '.join(repr(k) for k in missing)}")


def _int(value: Any, where: str, name: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise DatasetError(f"{where}: {name} {value!r} is not a whole number") from None


def _seconds(value: Any, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: {value!r} is not a time in seconds") from None


def _span(start: Any, end: Any, where: str) -> tuple[float, float]:
    a, b = _seconds(start, where), _seconds(end, where)
    if b < a:
        raise DatasetError(f"{where}: span ends ({b}) before it starts ({a})")
    return (a, b)


def _answer_index(value: str, choices: Sequence[str], where: str) -> int:
    """An answer given as an index ("2") or as the text of one option (NExT-GQA)."""
    if value.strip().lstrip("-").isdigit():
        index = int(value)
        if not 0 <= index < len(choices):
            raise DatasetError(f"{where}: answer {index} is not an option index (0..{len(choices) - 1})")
        return index
    wanted = fold(value)
    for index, choice in enumerate(choices):
        if fold(choice) == wanted:
            return index
    raise DatasetError(f"{where}: answer {value!r} is neither an option index nor one of the options")


def _sibling(path: Path, names: Sequence[str]) -> Path | None:
    for name in names:
        candidate = path.parent / name
        if candidate.is_file():
            return candidate
    return None


# -- vidagent JSONL --------------------------------------------------------------------------
def load_vidagent(path: Path) -> list[EvalItem]:
    """vidagent's JSONL: ``id, video, type, question, choices|null, answer_index, answer, accept, span_s``."""
    items = []
    for number, record in _read_jsonl(path):
        where = f"{path}: line {number}"
        _require(record, ("id", "video", "question"), where)
        choices = record.get("choices")
        if choices is not None and (not isinstance(choices, list) or not all(isinstance(c, str) for c in choices)):
            raise DatasetError(f"{where}: 'choices' must be a list of strings or null")
        kind = str(record.get("type") or "")
        span = record.get("span_s")
        spans: tuple[tuple[float, float], ...] = ()
        if span is not None:
            if not isinstance(span, list) or len(span) != 2:
                raise DatasetError(f"{where}: 'span_s' must be [start, end]")
            spans = (_span(span[0], span[1], where),)
        answer_index = record.get("answer_index")
        if choices:
            task = MULTIPLE_CHOICE
            if answer_index is not None:
                answer_index = _int(answer_index, where, "answer_index")
                if not 0 <= answer_index < len(choices):
                    raise DatasetError(f"{where}: answer_index {answer_index} is out of range")
        else:
            task = LOCALIZATION if kind == "localization" else OPEN_ENDED
            answer_index = None
        accept = record.get("accept") or []
        if not isinstance(accept, list):
            raise DatasetError(f"{where}: 'accept' must be a list of strings")
        items.append(EvalItem(
            id=str(record["id"]), video=str(record["video"]), question=str(record["question"]), task=task,
            type=kind, group=kind or "all", choices=tuple(choices) if choices else None, answer_index=answer_index,
            answer=str(record.get("answer") or ""), accept=tuple(str(a) for a in accept), spans=spans,
        ))
    return items


# -- NExT-QA family (CSV) --------------------------------------------------------------------
def _nextqa_rows(path: Path, groups: Mapping[str, str]) -> list[EvalItem]:
    items = []
    for number, row in _read_csv(path):
        where = f"{path}: line {number}"
        video_column = "video" if "video" in row else "video_id"
        _require(row, (video_column, "question", "answer", "qid", *OPTION_COLUMNS), where)
        choices = tuple(row[c] for c in OPTION_COLUMNS)
        kind = row.get("type", "")
        items.append(EvalItem(
            id=f"{row[video_column]}_{row['qid']}", video=row[video_column], question=row["question"],
            task=MULTIPLE_CHOICE, type=kind, group=groups.get(kind, kind.lower() or "all"), choices=choices,
            answer_index=_answer_index(row["answer"], choices, where),
        ))
    return items


def load_nextqa(path: Path) -> list[EvalItem]:
    """NExT-QA multiple choice CSV: ``video, question, answer (index), qid, type, a0..a4``."""
    return _nextqa_rows(path, NEXTQA_GROUPS)


def load_intentqa(path: Path) -> list[EvalItem]:
    """IntentQA CSV (NExT-QA's columns; ``video_id`` or ``video``), grouped Why / How / Before-After."""
    return _nextqa_rows(path, INTENTQA_GROUPS)


def load_nextgqa(path: Path) -> list[EvalItem]:
    """NExT-GQA CSV (answer as text) plus the sibling ``gsub_<split>.json`` grounding spans."""
    items = _nextqa_rows(path, NEXTQA_GROUPS)
    split = path.stem
    spans_file = _sibling(path, (f"gsub_{split}.json", "gsub.json"))
    if spans_file is None:
        return items
    spans = read_json(spans_file)
    if not isinstance(spans, dict):
        raise DatasetError(f"{spans_file}: expected an object of video id -> {{duration, location}}")
    grounded = []
    for item in items:
        video_id, qid = item.video, item.id[len(item.video) + 1:]
        location = (spans.get(video_id) or {}).get("location", {}).get(qid, [])
        where = f"{spans_file}: video {video_id} question {qid}"
        windows = tuple(_span(w[0], w[1], where) for w in location if isinstance(w, list) and len(w) == 2)
        grounded.append(replace(item, spans=windows, extra={"grounded": True}))
    return grounded


def load_nextoe(path: Path) -> list[EvalItem]:
    """NExT-OE open-ended CSV: ``video, question, answer, qid, type[, additional_ref_answer]``."""
    items = []
    for number, row in _read_csv(path):
        where = f"{path}: line {number}"
        video_column = "video" if "video" in row else "video_id"
        _require(row, (video_column, "question", "answer", "qid"), where)
        kind = row.get("type", "")
        extra = row.get("additional_ref_answer", "")
        items.append(EvalItem(
            id=f"{row[video_column]}_{row['qid']}", video=row[video_column], question=row["question"],
            task=OPEN_ENDED, type=kind, group=NEXTQA_GROUPS.get(kind, kind.lower() or "all"), answer=row["answer"],
            accept=tuple(a.strip() for a in re.split(r"[|;]", extra) if a.strip()),
        ))
    return items


# -- EgoSchema ---------------------------------------------------------------------------------
def load_egoschema(path: Path) -> list[EvalItem]:
    """EgoSchema ``questions.json`` (``q_uid, question, option 0..4``); answers from a sibling
    ``subset_answers.json`` (``subset_answers_dev.json`` beside ``questions_dev.json``; or an ``answer`` field). Questions without an answer are kept unscored."""
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of questions")
    answers: dict[str, Any] = {}
    # a split's answers sit beside its questions with the same tail: questions_dev.json -> subset_answers_dev.json
    tail = path.stem[len("questions"):] if path.stem.startswith("questions") else ""
    answers_file = _sibling(path, tuple(dict.fromkeys((f"subset_answers{tail}.json", f"answers{tail}.json",
                                                       "subset_answers.json", "answers.json"))))
    if answers_file is not None:
        loaded = read_json(answers_file)
        if not isinstance(loaded, dict):
            raise DatasetError(f"{answers_file}: expected an object of q_uid -> answer index")
        answers = loaded
    items = []
    for number, record in enumerate(data):
        where = f"{path}: question {number}"
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: expected an object")
        options = [f"option {i}" for i in range(5)]
        _require(record, ("q_uid", "question", *options), where)
        uid = str(record["q_uid"])
        answer = answers.get(uid, record.get("answer", record.get("truth")))
        index = _int(answer, where, "answer") if answer is not None else None
        if index is not None and not 0 <= index < 5:
            raise DatasetError(f"{where}: answer {index} is out of range")
        items.append(EvalItem(
            id=uid, video=uid, question=str(record["question"]), task=MULTIPLE_CHOICE, type="egoschema",
            group="egoschema", choices=tuple(str(record[o]) for o in options), answer_index=index,
        ))
    return items


# -- STAR --------------------------------------------------------------------------------------
def load_star(path: Path) -> list[EvalItem]:
    """STAR ``STAR_<split>.json``: ``question_id, question, video_id, start, end, answer,
    choices [{choice_id, choice}]``; grouped Interaction / Sequence / Prediction / Feasibility."""
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of questions")
    items = []
    for number, record in enumerate(data):
        where = f"{path}: question {number}"
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: expected an object")
        _require(record, ("question_id", "question", "video_id", "choices"), where)
        raw = record["choices"]
        if not isinstance(raw, list) or not raw:
            raise DatasetError(f"{where}: 'choices' must be a non-empty list")
        raw = sorted(raw, key=lambda c: c.get("choice_id", 0) if isinstance(c, dict) else 0)
        choices = tuple(str(c["choice"]) if isinstance(c, dict) else str(c) for c in raw)
        answer = record.get("answer")
        index = _answer_index(str(answer), choices, where) if answer is not None else None
        clip = None
        if record.get("start") is not None and record.get("end") is not None:
            clip = _span(record["start"], record["end"], where)
        question_id = str(record["question_id"])
        group = question_id.split("_")[0].lower()
        items.append(EvalItem(
            id=question_id, video=str(record["video_id"]), question=str(record["question"]), task=MULTIPLE_CHOICE,
            type="_".join(question_id.split("_")[:2]), group=group, choices=choices, answer_index=index, clip=clip,
        ))
    return items


# -- Perception Test -----------------------------------------------------------------------------
def load_perception_test(path: Path) -> list[EvalItem]:
    """Perception Test multiple choice (``mc_question_<split>.json``): ``{video_id: {mc_question:
    [{id, question, options, answer_id, area, reasoning}]}}``; grouped by area."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected an object of video id -> annotations")
    items = []
    for video_id, entry in data.items():
        where = f"{path}: video {video_id}"
        if not isinstance(entry, dict):
            raise DatasetError(f"{where}: expected an object")
        for position, question in enumerate(entry.get("mc_question") or []):
            at = f"{where}: mc_question {position}"
            if not isinstance(question, dict):
                raise DatasetError(f"{at}: expected an object")
            _require(question, ("question", "options"), at)
            options = question["options"]
            if not isinstance(options, list) or not options:
                raise DatasetError(f"{at}: 'options' must be a non-empty list")
            answer = question.get("answer_id")
            index = _int(answer, at, "answer_id") if answer is not None else None
            if index is not None and not 0 <= index < len(options):
                raise DatasetError(f"{at}: answer_id {index} is out of range")
            items.append(EvalItem(
                id=f"{video_id}_{question.get('id', position)}", video=str(video_id), question=str(question["question"]),
                task=MULTIPLE_CHOICE, type=str(question.get("reasoning") or ""),
                group=str(question.get("area") or "all"), choices=tuple(str(o) for o in options), answer_index=index,
                extra={"tags": list(question.get("tag") or [])},
            ))
    return items


# -- TVQA / TVQA+ ------------------------------------------------------------------------------
def _tvqa_item(record: Mapping[str, Any], where: str) -> EvalItem:
    _require(record, ("q", "vid_name", *OPTION_COLUMNS), where)
    choices = tuple(str(record[c]) for c in OPTION_COLUMNS)
    answer = record.get("answer_idx")
    index = _int(answer, where, "answer_idx") if answer is not None else None
    if index is not None and not 0 <= index < 5:
        raise DatasetError(f"{where}: answer_idx {index} is out of range")
    clip = None
    stamp = str(record.get("ts") or "")
    match = re.fullmatch(r"\s*([\d.]+)\s*-\s*([\d.]+)\s*", stamp)
    if match:
        clip = _span(match.group(1), match.group(2), where)
    question = str(record["q"])
    first = (question.split() or ["other"])[0].lower().strip("?,.")
    group = first if first in ("what", "who", "where", "why", "how", "when", "which") else "other"
    return EvalItem(
        id=str(record.get("qid", where)), video=str(record["vid_name"]), question=question, task=MULTIPLE_CHOICE,
        type=str(record.get("show_name") or ""), group=group, choices=choices, answer_index=index, clip=clip,
    )


def load_tvqa(path: Path) -> list[EvalItem]:
    """TVQA ``tvqa_<split>.jsonl`` or TVQA+ ``tvqa_plus_<split>.json``: ``qid, q, a0..a4, answer_idx,
    vid_name, ts`` (the question is asked about the ``ts`` part of the clip); grouped by question word."""
    if path.suffix.lower() == ".jsonl":
        return [_tvqa_item(record, f"{path}: line {number}") for number, record in _read_jsonl(path)]
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of questions")
    return [_tvqa_item(record if isinstance(record, dict) else {}, f"{path}: question {n}") for n, record in enumerate(data)]


# -- ActivityNet-QA ------------------------------------------------------------------------------
def load_activitynet_qa(path: Path) -> list[EvalItem]:
    """ActivityNet-QA ``<split>_q.json`` (``video_name, question, question_id``) with its sibling
    ``<split>_a.json`` (``answer, type, question_id``); open-ended, grouped by type."""
    questions = read_json(path)
    if not isinstance(questions, list):
        raise DatasetError(f"{path}: expected a list of questions")
    if questions and isinstance(questions[0], dict) and "question" not in questions[0] and "answer" in questions[0]:
        raise DatasetError(f"{path} holds answers: pass the questions file (<split>_q.json) instead")
    answers_file = path.with_name(path.name.replace("_q.json", "_a.json")) if path.name.endswith("_q.json") else None
    answers: dict[str, Mapping[str, Any]] = {}
    if answers_file is not None and answers_file.is_file():
        loaded = read_json(answers_file)
        if not isinstance(loaded, list):
            raise DatasetError(f"{answers_file}: expected a list of answers")
        answers = {str(a.get("question_id")): a for a in loaded if isinstance(a, dict)}
    items = []
    for number, record in enumerate(questions):
        where = f"{path}: question {number}"
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: expected an object")
        _require(record, ("video_name", "question", "question_id"), where)
        qid = str(record["question_id"])
        answer = answers.get(qid, record)
        code = answer.get("type")
        kind = ACTIVITYNET_QA_TYPES[int(code)] if str(code).isdigit() and int(code) < len(ACTIVITYNET_QA_TYPES) else "other"
        question = str(record["question"]).strip()
        if question and not question.endswith("?"):
            question += "?"
        items.append(EvalItem(
            id=qid, video=str(record["video_name"]), question=question, task=OPEN_ENDED, type=kind, group=kind,
            answer=str(answer.get("answer") or ""),
        ))
    return items


# -- Ego4D NLQ -------------------------------------------------------------------------------------
def load_ego4d_nlq(path: Path) -> list[EvalItem]:
    """Ego4D NLQ ``nlq_<split>.json``: videos -> clips -> annotations -> language_queries; one
    localization question per query, asked about the canonical clip (``<clip_uid>.mp4``), with the
    target window in clip seconds. Grouped by template family (objects / place / people)."""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("videos"), list):
        raise DatasetError(f"{path}: expected an object with a 'videos' list")
    template = prompt("vidagent.eval", "nlq_question")
    items = []
    for v, video in enumerate(data["videos"]):
        for c, clip in enumerate(video.get("clips") or []):
            where = f"{path}: video {v} clip {c}"
            _require(clip, ("clip_uid",), where)
            for a, annotation in enumerate(clip.get("annotations") or []):
                uid = str(annotation.get("annotation_uid", f"{clip['clip_uid']}_{a}"))
                for q, query in enumerate(annotation.get("language_queries") or []):
                    at = f"{where} annotation {a} query {q}"
                    text = str(query.get("query") or "").strip()
                    if not text:
                        continue  # a few NLQ annotations have no query text; the official scripts skip them too
                    spans: tuple[tuple[float, float], ...] = ()
                    if query.get("clip_start_sec") is not None and query.get("clip_end_sec") is not None:
                        spans = (_span(query["clip_start_sec"], query["clip_end_sec"], at),)
                    family = str(query.get("template") or "").split(":")[0].strip().lower() or "unknown"
                    items.append(EvalItem(
                        id=f"{uid}_{q}", video=str(clip["clip_uid"]), question=template.render(query=text),
                        task=LOCALIZATION, type=str(query.get("template") or ""), group=family, spans=spans,
                        extra={"query": text},
                    ))
    return items


LOADERS: dict[str, Loader] = {
    loader.name: loader
    for loader in (
        Loader("vidagent", "vidagent JSONL: id, video, type, question, choices, answer_index, answer, accept, span_s", load_vidagent),
        Loader("nextqa", "NExT-QA multiple choice CSV", load_nextqa),
        Loader("intentqa", "IntentQA CSV", load_intentqa),
        Loader("nextgqa", "NExT-GQA CSV + gsub_<split>.json", load_nextgqa),
        Loader("nextoe", "NExT-OE open-ended CSV", load_nextoe),
        Loader("egoschema", "EgoSchema questions.json + subset_answers.json", load_egoschema),
        Loader("star", "STAR_<split>.json", load_star),
        Loader("perception_test", "Perception Test mc_question_<split>.json", load_perception_test),
        Loader("tvqa", "TVQA .jsonl / TVQA+ .json", load_tvqa),
        Loader("activitynet_qa", "ActivityNet-QA <split>_q.json + <split>_a.json", load_activitynet_qa),
        Loader("ego4d_nlq", "Ego4D NLQ nlq_<split>.json", load_ego4d_nlq),
        Loader("ref_youtube_vos", "Ref-YouTube-VOS meta_expressions.json + JPEGImages/, Annotations/",
               load_ref_youtube_vos),
        Loader("ref_davis", "Ref-DAVIS17 in Ref-YouTube-VOS's layout", load_ref_davis),
    )
}


# Not memory.caption_formats.detect_caption_format: that one tells caption sets apart, this one benchmarks.
def detect_benchmark_format(path: Path) -> str:
    """The loader for ``path``, from its extension and the shape of its first record."""
    suffix = path.suffix.lower()
    unknown = DatasetError(f"cannot tell the format of {path}: pass --format (one of {', '.join(LOADERS)})")
    if suffix in (".csv", ".tsv"):
        with path.open(encoding="utf-8-sig") as handle:
            header = {c.strip() for c in next(csv.reader([handle.readline()], delimiter=table_delimiter(path)), [])}
        if set(OPTION_COLUMNS) <= header and {"question", "answer"} <= header:
            if _sibling(path, (f"gsub_{path.stem}.json", "gsub.json")) is not None:
                return "nextgqa"
            return "intentqa" if "intentqa" in str(path).lower() else "nextqa"
        if {"question", "answer"} <= header:
            return "nextoe"
        raise unknown
    if suffix == ".jsonl":
        first = next((record for _, record in _read_jsonl(path)), None)
        if first is None:
            raise DatasetError(f"{path}: the file holds no questions")
        if "q" in first and "vid_name" in first:
            return "tvqa"
        if "video" in first and ("question" in first or "id" in first):
            return "vidagent"
        raise unknown
    if suffix == ".json":
        data = read_json(path)
        if isinstance(data, dict):
            if isinstance(data.get("videos"), list):
                return "ego4d_nlq"
            if is_meta_expressions(data):
                return "ref_davis" if "davis" in str(path).lower() else "ref_youtube_vos"
            if data and all(isinstance(v, dict) and "mc_question" in v for v in list(data.values())[:5]):
                return "perception_test"
            raise unknown
        if isinstance(data, list) and data and isinstance(data[0], dict):
            first = data[0]
            if "q_uid" in first:
                return "egoschema"
            if "question_id" in first and isinstance(first.get("choices"), list):
                return "star"
            if "q" in first and "vid_name" in first:
                return "tvqa"
            if "video_name" in first or ("question_id" in first and "answer" in first):
                return "activitynet_qa"
        raise unknown
    raise unknown


def load_dataset(path: Path | str, format: str | None = None) -> Dataset:
    """Load an annotation file into a ``Dataset`` (format detected unless given)."""
    path = Path(path).expanduser().absolute()
    if not path.is_file():
        raise DatasetError(f"no such annotation file: {path}")
    name = format or detect_benchmark_format(path)
    loader = LOADERS.get(name.lower().replace("-", "_"))
    if loader is None:
        raise DatasetError(f"unknown dataset format {name!r}: use one of {', '.join(LOADERS)}")
    items = loader.load(path)
    if not items:
        raise DatasetError(f"{path}: the file holds no questions")
    check_unique_ids(items, path)
    return Dataset(source=path, format=loader.name, items=tuple(items))
