"""One benchmark question in a common shape, a loaded dataset, and finding its videos on disk."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from vidagent.eval.errors import DatasetError
from vidagent.video.video import VIDEO_SUFFIXES

MULTIPLE_CHOICE = "multiple_choice"
OPEN_ENDED = "open_ended"
LOCALIZATION = "localization"
# referring video object segmentation: the question is an expression, the answer the object's masks
# (``vidagent.eval.refvos``; scored by J&F, ``vidagent.eval.referring``)
REFERRING_SEGMENTATION = "referring_segmentation"
TASKS = (MULTIPLE_CHOICE, OPEN_ENDED, LOCALIZATION, REFERRING_SEGMENTATION)

VIDEO_EXTENSIONS = VIDEO_SUFFIXES + (".flv", ".wmv", ".3gp", ".ts")  # tried in this order


@dataclass(frozen=True)
class EvalItem:
    """A question from any benchmark, in vidagent's terms.

    ``video`` is what the dataset calls the video (an id or a relative path); ``video_path`` is
    where the runner found it. ``type`` is the dataset's own label (e.g. NExT-QA's ``CW``) and
    ``group`` the group papers report (``causal``). ``spans`` are ground-truth windows in seconds
    (the target of a localization task, or the evidence of a grounded question). ``clip`` is the
    part of the video the question is about, when the dataset asks about a part (STAR, TVQA).
    """

    id: str
    video: str
    question: str
    task: str
    type: str = ""
    group: str = ""
    choices: tuple[str, ...] | None = None
    answer_index: int | None = None
    answer: str = ""
    accept: tuple[str, ...] = ()
    spans: tuple[tuple[float, float], ...] = ()
    clip: tuple[float, float] | None = None
    video_path: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def has_key(self) -> bool:
        """Whether the dataset gives the answer (EgoSchema's hidden test answers do not)."""
        if self.task == MULTIPLE_CHOICE:
            return self.answer_index is not None
        if self.task == LOCALIZATION:
            return bool(self.spans)
        if self.task == REFERRING_SEGMENTATION:
            ref = self.extra.get("ref") or {}
            return ref.get("object_id") is not None and bool(ref.get("annotations"))
        return bool(self.answer or self.accept)

    def with_video_path(self, path: Path | str) -> "EvalItem":
        return replace(self, video_path=str(path))

    def gold(self) -> dict[str, Any]:
        return {
            "answer_index": self.answer_index,
            "answer": self.answer,
            "accept": list(self.accept),
            "spans": [list(s) for s in self.spans],
        }


@dataclass(frozen=True)
class Dataset:
    """The questions of one annotation file."""

    source: Path
    format: str
    items: tuple[EvalItem, ...]
    id_map: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.source.stem


def check_unique_ids(items: Sequence[EvalItem], source: Path) -> None:
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise DatasetError(f"{source}: question id {item.id!r} appears twice")
        seen.add(item.id)


# -- id maps ---------------------------------------------------------------------------------
ID_MAP_NAMES = ("map_vid_vidorID.json", "video_id_map.json", "id_map.json", "id_map.csv")


def table_delimiter(path: Path) -> str:
    """The column separator of a table file, from its suffix: tab for ``.tsv``, else comma."""
    return "\t" if path.suffix.lower() == ".tsv" else ","


def read_json(path: Path) -> Any:
    """A JSON file's value; a malformed or non-UTF-8 file is a one-line ``DatasetError``."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not a UTF-8 text file") from None


def load_id_map(path: Path) -> dict[str, str]:
    """A dataset's map from video id to a path (JSON object, or a CSV/TSV of two columns)."""
    if not path.is_file():
        raise DatasetError(f"no such id map file: {path}")
    if path.suffix.lower() == ".json":
        data = read_json(path)
        if not isinstance(data, dict):
            raise DatasetError(f"{path}: an id map must be a JSON object of video id -> path")
        return {str(k): str(v) for k, v in data.items()}
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".csv", ".tsv"):
        delimiter = table_delimiter(path)
    else:  # another name (e.g. .txt): tab-separated when the first line holds a tab
        first_line = text.splitlines()[0] if text.strip() else ""
        delimiter = "\t" if "\t" in first_line else ","
    mapping: dict[str, str] = {}
    for number, row in enumerate(csv.reader(text.splitlines(), delimiter=delimiter), 1):
        if not row:
            continue
        if len(row) < 2:
            raise DatasetError(f"{path}: line {number}: expected two columns (video id, path)")
        mapping[row[0].strip()] = row[1].strip()
    return mapping


def find_id_map(folders: Iterable[Path]) -> Path | None:
    """A known id-map file lying in one of ``folders`` (e.g. NExT-QA's map_vid_vidorID.json)."""
    for folder in folders:
        for name in ID_MAP_NAMES:
            if (folder / name).is_file():
                return folder / name
    return None


# -- finding videos --------------------------------------------------------------------------
class VideoFinder:
    """Finds a dataset's videos under one or more folders: by relative path, through the id map,
    or by file name (any common container) anywhere below the folders."""

    def __init__(self, roots: Sequence[Path], id_map: Mapping[str, str] | None = None) -> None:
        self.roots = [Path(r).expanduser() for r in roots]
        for root in self.roots:
            if not root.is_dir():
                raise DatasetError(f"the video folder {root} does not exist")
        self.id_map = dict(id_map or {})
        self._by_stem: dict[str, Path] | None = None
        self._by_name: dict[str, Path] | None = None

    def _scan(self) -> None:
        self._by_stem, self._by_name = {}, {}
        for root in self.roots:
            for folder, _, files in os.walk(root, followlinks=True):
                for name in sorted(files):
                    path = Path(folder) / name
                    if path.suffix.lower() in VIDEO_EXTENSIONS:
                        self._by_stem.setdefault(path.stem, path)
                        self._by_name.setdefault(name, path)

    def find(self, video: str) -> Path | None:
        """The file for a dataset's video name or id, or None."""
        names = [video]
        if video in self.id_map:
            names.insert(0, self.id_map[video])
        for name in names:
            for root in self.roots:
                candidate = root / name
                if candidate.is_file():
                    return candidate
                for extension in VIDEO_EXTENSIONS:
                    with_extension = root / f"{name}{extension}"
                    if with_extension.is_file():
                        return with_extension
        if self._by_stem is None:
            self._scan()
        assert self._by_stem is not None and self._by_name is not None
        for name in names:
            base = Path(name).name
            if base in self._by_name:
                return self._by_name[base]
            stem = Path(base).stem if Path(base).suffix.lower() in VIDEO_EXTENSIONS else base
            for key in (stem, f"v_{stem}", stem[2:] if stem.startswith("v_") else None):
                if key and key in self._by_stem:
                    return self._by_stem[key]
        return None
