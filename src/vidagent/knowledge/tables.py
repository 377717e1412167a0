"""Symbolic knowledge: CSV, TSV, XLSX and Parquet files loaded into SQLite, and SQLite files as they are.

SQLite, not DuckDB: the library already is SQLite, and its read-only sandbox (an authorizer that
refuses every write, a statement deadline, a row limit; ``memory.sql.ReadOnlyDatabase``) is built and
tested; DuckDB would add a second engine whose sandbox would have to be written again. A loaded file
becomes ``<folder>/<content digest>.sqlite``, built under a temporary name and renamed when complete,
so the same file is loaded once and never half. Column names become identifiers a model can write
(``Cooking time (min)`` -> ``cooking_time_min``); a column whose every value is a number is stored as
numbers. A sheet or file whose first row is not a header (an empty cell, a number, a repeated name) is
refused: its first row would become column names nobody can ask about.
"""

from __future__ import annotations

import csv
import os
import re
import sqlite3
import time
import uuid
import zipfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from vidagent.errors import KnowledgeError
from vidagent.knowledge.spec import identifier, unique

TABLE_SUFFIXES = (".csv", ".tsv", ".xlsx", ".xlsm", ".parquet", ".sqlite", ".sqlite3", ".db")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_NUMBER = re.compile(r"[+-]?(?:0|[1-9]\d{0,2}(?:,\d{3})+|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|[+-]?0?\.\d+")
_INTEGER = re.compile(r"[+-]?\d+")
_YEAR = re.compile(r"(?:1[89]|20)\d\d")  # a header cell may be a year ("country, 2019, 2020")
_COUNT_SECONDS = 2.0  # counting a database's rows stops after this (a view may never end)
_BATCH_ROWS = 5000


@dataclass(frozen=True)
class TableInfo:
    """One table as the planner is told of it."""

    name: str
    columns: tuple[str, ...]
    rows: int | None  # None: not counted (a view, or a count past its deadline)

    def line(self) -> str:
        count = f" -- {self.rows} rows" if self.rows is not None else ""
        return f"{self.name}({', '.join(self.columns)}){count}"


@dataclass(frozen=True)
class TableSource:
    """A file of tables, queryable as the SQLite database ``database``."""

    name: str
    origin: str  # the file's name, as the user gave it
    description: str
    database: Path
    tables: tuple[TableInfo, ...]

    def schema(self) -> str:
        """One line per table, for the SQL writer."""
        return "\n".join(table.line() for table in self.tables)


# A workbook is read whole (openpyxl): its XML and its cells are capped before and while it is read.
MAX_WORKBOOK_BYTES = 64 << 20  # its members inflated, together (a workbook of a million filled cells is ~40 MB)
MAX_WORKBOOK_INFLATION = 100  # one member's inflated size over its compressed size (sheet XML compresses ~10 times)
MAX_WORKBOOK_CELLS = 5_000_000  # cells read, empty ones inside a row included


def load_tables(path: Path, digest: str, folder: Path) -> tuple[Path, tuple[TableInfo, ...]]:
    """The SQLite database holding ``path``'s tables (built into ``folder`` once per content), and its tables."""
    suffix = path.suffix.lower()
    if suffix in (".sqlite", ".sqlite3", ".db"):
        return path, _sqlite_tables(path)
    database = folder / f"{digest}.sqlite"
    if not database.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        partial = database.with_name(f"{database.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial")
        try:
            with closing(sqlite3.connect(partial)) as connection:
                names: list[str] = []
                for sheet, rows in _sheets(path, suffix):
                    names.append(unique(identifier(sheet, "data"), names))
                    _write_table(connection, names[-1], rows, path, sheet)
                connection.commit()
            os.replace(partial, database)
        except (sqlite3.Error, OverflowError, ValueError) as error:
            raise KnowledgeError(f"{path.name}: cannot be loaded as tables ({type(error).__name__}: {error})") \
                from error
        finally:
            partial.unlink(missing_ok=True)
    return database, _sqlite_tables(database)


def _sheets(path: Path, suffix: str) -> Iterator[tuple[str, Iterator[Sequence[Any]]]]:
    """(table name, rows with the header first) for each table the file holds."""
    if suffix in (".csv", ".tsv"):
        yield path.stem, _delimited(path, "\t" if suffix == ".tsv" else ",")
    elif suffix in (".xlsx", ".xlsm"):
        yield from _workbook(path)
    elif suffix == ".parquet":
        yield path.stem, _parquet(path)
    else:
        raise KnowledgeError(f"{path.name}: not a table file ({', '.join(TABLE_SUFFIXES)})")


def _delimited(path: Path, delimiter: str) -> Iterator[Sequence[Any]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            yield from csv.reader(handle, delimiter=delimiter)
    except UnicodeDecodeError as error:
        raise KnowledgeError(f"{path.name}: not UTF-8 text ({error.reason} at byte {error.start})") from error
    except csv.Error as error:
        raise KnowledgeError(f"{path.name}: not a readable {'TSV' if delimiter == chr(9) else 'CSV'} file: {error}") \
            from error


def check_workbook_size(path: Path) -> None:
    """Refuse, from what its zip members declare and before any is inflated, a workbook whose XML inflates past
    ``MAX_WORKBOOK_BYTES`` in all or one member more than ``MAX_WORKBOOK_INFLATION`` times (a 1.2 MB workbook of
    300 MB of sheet XML took 263 s to read, issue 55)."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise KnowledgeError(f"{path.name}: not a readable Excel workbook ({type(error).__name__}: {error})") \
            from error
    total = 0
    for member in members:
        total += member.file_size
        if member.file_size > 1 << 20 and member.file_size > MAX_WORKBOOK_INFLATION * max(1, member.compress_size):
            raise KnowledgeError(f"{path.name}: {member.filename} inflates "
                                 f"{member.file_size // max(1, member.compress_size):,} times (at most "
                                 f"{MAX_WORKBOOK_INFLATION}): a zip bomb, not a workbook")
        if total > MAX_WORKBOOK_BYTES:
            raise KnowledgeError(f"{path.name}: its XML inflates to more than {MAX_WORKBOOK_BYTES >> 20} MiB; "
                                 "save the sheets as CSV files and attach those")


def _workbook(path: Path) -> Iterator[tuple[str, Iterator[Sequence[Any]]]]:
    from openpyxl import load_workbook  # a core dependency; imported here to keep start-up light

    check_workbook_size(path)
    try:
        book = load_workbook(path, read_only=True, data_only=True)
    except Exception as error:  # openpyxl raises zipfile, KeyError and its own errors for a bad file
        raise KnowledgeError(f"{path.name}: not a readable Excel workbook ({type(error).__name__}: {error})") \
            from error
    try:
        cells = 0
        sheets = []
        for sheet in book.worksheets:  # a sheet's rows are padded to its widest: a far cell costs a whole row
            rows = []
            for row in sheet.iter_rows(values_only=True):
                cells += len(row)
                if cells > MAX_WORKBOOK_CELLS:
                    raise KnowledgeError(f"{path.name}: more than {MAX_WORKBOOK_CELLS:,} cells (sheet "
                                         f"{sheet.title!r} reaches row {len(rows) + 1:,}, {len(row):,} columns wide); "
                                         "attach the part of it the question needs")
                rows.append(row)
            sheets.append((sheet.title, rows))
    finally:
        book.close()
    filled = [(title, rows) for title, rows in sheets if any(_filled(row) for row in rows)]
    if not filled:
        raise KnowledgeError(f"{path.name}: every sheet is empty")
    single = len(filled) == 1
    for title, rows in filled:
        yield (path.stem if single else title), iter(rows)


def _parquet(path: Path) -> Iterator[Sequence[Any]]:
    try:
        import pyarrow.parquet as parquet
    except ImportError as error:
        raise KnowledgeError(f"{path.name}: reading Parquet needs pyarrow (pip install 'vidagent[knowledge]')") \
            from error
    try:
        table = parquet.read_table(path)
    except Exception as error:  # pyarrow raises ArrowInvalid/OSError for a damaged file
        raise KnowledgeError(f"{path.name}: not a readable Parquet file ({error})") from error
    yield table.column_names
    for batch in table.to_batches(_BATCH_ROWS):
        columns = batch.to_pydict()
        yield from zip(*columns.values())


def _filled(row: Sequence[Any]) -> bool:
    return any(value not in (None, "") for value in row)


def _write_table(connection: sqlite3.Connection, table: str, rows: Iterator[Sequence[Any]], path: Path,
                 sheet: str) -> None:
    where = path.name if sheet == path.stem else f"{path.name}, sheet {sheet!r}"
    header = next((row for row in rows if _filled(row)), None)
    if header is None:
        raise KnowledgeError(f"{where}: holds no rows")
    columns = _columns(header, where)
    body = [tuple(_cell(value) for value in row[: len(columns)]) + (None,) * (len(columns) - len(row))
            for row in rows if _filled(row)]
    if not body:
        raise KnowledgeError(f"{where}: has a header but no rows under it")
    kinds = [_kind(row[i] for row in body) for i in range(len(columns))]
    definition = ", ".join(f'"{name}" {kind}' for name, kind in zip(columns, kinds))
    connection.execute(f'CREATE TABLE "{table}" ({definition})')
    placeholders = ", ".join("?" for _ in columns)
    converted = ([_as(kind, value) for kind, value in zip(kinds, row)] for row in body)
    connection.executemany(f'INSERT INTO "{table}" VALUES ({placeholders})', converted)


def _columns(header: Sequence[Any], where: str) -> list[str]:
    """The header's names as identifiers; a first row that is no header is an error saying so."""
    while header and header[-1] in (None, ""):
        header = header[:-1]
    values = [str(value).strip() if value is not None else "" for value in header]
    named = [value for value in values if _number(value) is None or _YEAR.fullmatch(value)]
    if any(not value for value in values) or len(named) < len(values) / 2 or not any(
            _number(value) is None for value in values):
        raise KnowledgeError(f"{where}: has no header row (its first row {values[:6]} holds empty cells or "
                             f"numbers); add a first row naming the columns")
    names: list[str] = []
    for value in values:
        if value in values[: len(names)]:
            raise KnowledgeError(f"{where}: two columns are named {value!r}; name each column once")
        names.append(unique(identifier(value, f"column_{len(names) + 1}"), names))
    return names


def _cell(value: Any) -> Any:
    if isinstance(value, str):
        value = value.strip()
        return value if value else None
    if value is None or isinstance(value, (int, float)):
        return value
    return str(value)  # dates, times, decimals: as their text


def _number(text: str) -> int | float | None:
    """The number ``text`` writes plainly (``1,234.5``, ``-3``, ``2e6``), else None: a leading zero (a code
    such as ZIP 02134), a decimal comma (``1,5``), ``nan`` or ``inf`` stay text."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    plain = text.replace(",", "")
    return int(plain) if _INTEGER.fullmatch(plain) else float(plain)


def _kind(values: Iterable[Any]) -> str:
    """INTEGER, REAL or TEXT: the narrowest type every non-empty value of a column fits."""
    kind = "INTEGER"
    seen = False
    for value in values:
        if value is None:
            continue
        seen = True
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else \
            _number(value) if isinstance(value, str) else None
        if number is None or (isinstance(number, int) and not -(2 ** 63) <= number < 2 ** 63):
            return "TEXT"  # words, or an integer past SQLite's (an id): kept as written
        if kind == "INTEGER" and isinstance(number, float):
            kind = "REAL"
    return kind if seen else "TEXT"


def _as(kind: str, value: Any) -> Any:
    if value is None or kind == "TEXT":
        return value
    number = _number(value) if isinstance(value, str) else value
    return int(number) if kind == "INTEGER" and number is not None else number


def _sqlite_tables(database: Path) -> tuple[TableInfo, ...]:
    with database.open("rb") as handle:
        if handle.read(len(_SQLITE_MAGIC)) != _SQLITE_MAGIC:
            raise KnowledgeError(f"{database.name}: not an SQLite database")
    try:
        connection = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
        try:
            names = [(row[0], row[1]) for row in connection.execute(
                "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name")]
            tables = []
            deadline = time.monotonic() + _COUNT_SECONDS
            connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
            for name, kind in names:
                quoted = name.replace('"', '""')
                columns = tuple(row[1] for row in connection.execute(f'PRAGMA table_info("{quoted}")'))
                count = None
                if kind == "table":
                    try:
                        count = int(connection.execute(f'SELECT COUNT(*) FROM "{quoted}"').fetchone()[0])
                    except sqlite3.OperationalError:  # interrupted at the deadline: a count it does not know
                        count = None
                tables.append(TableInfo(name, columns, count))
        finally:
            connection.close()
    except sqlite3.DatabaseError as error:
        raise KnowledgeError(f"{database.name}: cannot read its tables ({error})") from error
    if not tables:
        raise KnowledgeError(f"{database.name}: holds no tables")
    return tuple(tables)
