"""Portable memory packs: one video's memory as one file, to move between machines and libraries.

A pack holds every row the library keeps about one video (its ``videos`` row, its ``stages`` rows
with their configs and config keys, and its rows in every other per-video table of the schema) and
nothing about any other video. ``export_pack`` writes one; ``import_pack`` checks one and writes it
into a library in one transaction.

Format: a zip file (suffix ``.vidpack``) with

- ``mimetype`` first and stored uncompressed (``application/vnd.vidagent.pack+zip``), so a pack is
  recognised from its first bytes (``is_pack``), the way EPUB and OpenDocument files are;
- ``manifest.json``: the pack format version, the library schema version, the video's row, its
  stages (config and config key), and per table its columns, row count and the SHA-256 of its member;
  ``pack_id`` is the SHA-256 of the rest of the manifest, so the id names the content;
- ``tables/<table>.jsonl``: the video's rows of the table (``video_id`` left out), one JSON array per
  line, in a canonical order (sorted by every column), blobs as ``{"b64": ...}``.

Why a zip of JSON lines rather than an SQLite file: a zip keeps its directory at the end and a
CRC per member, so a truncated or damaged pack is refused before anything is read, and the bytes
are the same for the same content (fixed timestamps, canonical rows), which an SQLite file's page
layout is not; JSON keeps SQLite's values exactly (Python writes floats so that they read back to
the same double), and a person can read a member with ``unzip -p``. Opening a pack never executes
anything from it (no SQL, no pickles). Per-member SHA-256 sums in the manifest catch changes the
CRC would not, and comparing them with the library's rows is how a second import of the same pack
finds nothing to write.

A pack is importable when its schema version is not newer than this vidagent's and each of its
tables has the columns the library has (a pack of an older schema that only lacks tables is; one of
schema 3, whose frames held sentences where schema 4 keeps facts, is refused saying so). A stage is
written when the library lacks it or has it with another config or other rows; a stage that is the
same is left as it is, so importing the same pack twice writes nothing. Stages the pack does not
hold, and the library's own ``videos`` row (where the video was last seen here), are kept.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import os
import re
import sqlite3
import tempfile
import time
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Mapping, Sequence

from vidagent.errors import MemoryStoreError, VidagentError
from vidagent.memory.store import SCHEMA_VERSION, STAGE_TABLES, Library, config_key
from vidagent.sqlite import open_sqlite, table_columns

log = logging.getLogger(__name__)

PACK_SUFFIX = ".vidpack"
MIMETYPE = b"application/vnd.vidagent.pack+zip"
FORMAT_VERSION = 1
# Per-video tables that are not part of a memory: progress of unfinished builds.
NOT_PACKED = frozenset({"stage_checkpoints"})
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_SIGNATURE_BYTES = 30 + len("mimetype") + len(MIMETYPE)  # a zip local header, the name, the content
# Zip bombs are refused by what the members declare, before any is inflated (zipfile reads no more than a member
# declares): a 2-hour video's pack inflates to tens of MB, its rows compress 2-10 times.
# The caps hold for the pack as a whole too (issue 55: one member of 1,000 MB, 49 times its compressed size, was read
# and parsed, 17.7 s and 3.6 GB, before a check refused it). A manifest is a few KB (the video's row, its stages'
# configs, each table's columns and checksum), holds no other key, and is parsed only when shallow (a manifest nested 200,000 deep
# overflowed the parser's stack).
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_MANIFEST_DEPTH = 32
MAX_PACK_BYTES = 256 * 1024 * 1024  # every member inflated, together
MAX_INFLATION = 100
MANIFEST_KEYS = frozenset({"format", "format_version", "schema_version", "video_id", "video", "stages", "tables",
                           "pack_id"})


class PackError(VidagentError):
    """A pack cannot be read, is damaged, or does not fit this vidagent's library."""

    exit_code = 2


@dataclass(frozen=True)
class PackImport:
    """What importing a pack did: ``status`` is ``imported`` (something was written) or ``unchanged``."""

    video_id: str
    status: str
    stages: tuple[str, ...]  # the stages the pack holds
    written: tuple[str, ...]  # those written into the library (the others were already there, the same)
    rows: int  # rows written
    pack_id: str
    seconds: float


@dataclass(frozen=True)
class _Table:
    columns: tuple[str, ...]  # without video_id
    blob: bytes  # the member: canonical JSON lines
    rows: int

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.blob).hexdigest()


# ----------------------------------------------------------------------------- the tables


@lru_cache(maxsize=1)
def packed_tables() -> tuple[str, ...]:
    """The schema's per-video tables (those with a ``video_id`` column) in schema order, ``videos``
    and ``stages`` first; read from schema.sql, so a table added there travels in packs."""
    schema = resources.files("vidagent.memory").joinpath("schema.sql").read_text()
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(schema)
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")]
        per_video = [name for name in names
                     if "video_id" in table_columns(conn, name) and name not in NOT_PACKED]
    finally:
        conn.close()
    first = [name for name in ("videos", "stages") if name in per_video]
    return (*first, *[name for name in per_video if name not in first])


def _stage_of_table() -> dict[str, str]:
    return {table: stage for stage, tables in STAGE_TABLES.items() for table in tables}


@contextmanager
def _connection(library: Library) -> Iterator[sqlite3.Connection]:
    """A connection of our own to the library's file: a pack is read in one read transaction and
    imported in one write transaction, across tables the ``Library`` methods write one by one."""
    try:
        conn = open_sqlite(library.path, foreign_keys=True, autocommit=True)
    except sqlite3.DatabaseError as error:
        raise MemoryStoreError(f"cannot open the library database {library.path}: {error}") from error
    try:
        yield conn
    finally:
        conn.close()


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode("ascii")}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        return base64.b64decode(value["b64"], validate=True)
    if isinstance(value, list):
        raise ValueError("a value is a list")
    return value


def _serialise(rows: Sequence[Sequence[Any]]) -> bytes:
    lines = [json.dumps([_encode(v) for v in row], ensure_ascii=False, separators=(",", ":")) for row in rows]
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _read_table(conn: sqlite3.Connection, table: str, video_id: str) -> _Table:
    columns = tuple(c for c in table_columns(conn, table) if c != "video_id")
    if not columns:
        raise MemoryStoreError(f"the library has no table {table!r}")
    order = ", ".join(str(i + 1) for i in range(len(columns)))
    rows = conn.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE video_id=? ORDER BY {order}",
                        (video_id,)).fetchall()
    return _Table(columns, _serialise(rows), len(rows))


def _read_video(conn: sqlite3.Connection, video_id: str) -> dict[str, _Table]:
    return {table: _read_table(conn, table, video_id) for table in packed_tables()}


# ----------------------------------------------------------------------------- export


def resolve_video_id(library: Library, given: str) -> str:
    """The stored video ``given`` names: a video file (its content hash), a stored id, or the start
    of one (``egoschema:0074`` or a hash prefix)."""
    path = Path(given).expanduser()
    if path.is_file():
        from vidagent.video.video import file_content_hash

        video_id = file_content_hash(path)
        if library.video_row(video_id) is None:
            raise MemoryStoreError(f"{given}: this video has no memory in {library.path}; "
                                   f"run `vidagent index {given}` first")
        return video_id
    if library.video_row(given) is not None:
        return given
    matches = [row[0] for row in library.rows("SELECT video_id FROM videos WHERE substr(video_id, 1, ?) = ?",
                                              (len(given), given))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise MemoryStoreError(f"{given!r}: no such video file, and no stored video id starts so in {library.path}")
    raise MemoryStoreError(f"{given!r}: {len(matches)} stored videos start so; give more of the id")


def export_pack_bytes(library: Library, video_id: str) -> tuple[bytes, dict[str, Any]]:
    """The pack of ``video_id``'s memory as bytes, and its manifest."""
    with _connection(library) as conn:
        try:
            conn.execute("BEGIN")  # one snapshot across the tables, even while a build writes
            try:
                tables = _read_video(conn, video_id)
                video = conn.execute("SELECT * FROM videos WHERE video_id=?", (video_id,))
                names = [d[0] for d in video.description]
                row = video.fetchone()
                stages = conn.execute("SELECT stage, config_key, config, built_at, seconds FROM stages "
                                      "WHERE video_id=? ORDER BY stage", (video_id,)).fetchall()
            finally:
                conn.execute("COMMIT")
        except sqlite3.DatabaseError as error:
            raise MemoryStoreError(f"cannot read {video_id} from the library {library.path}: {error}") from None
    if row is None:
        raise MemoryStoreError(f"no video {video_id!r} in {library.path}")
    if not stages:
        raise MemoryStoreError(f"{video_id}: no memory is built for this video yet; nothing to export")
    manifest: dict[str, Any] = {
        "format": "vidagent-pack",
        "format_version": FORMAT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "video_id": video_id,
        "video": dict(zip(names, row)),
        "stages": [{"stage": s, "config_key": k, "config": json.loads(c), "built_at": b, "seconds": sec}
                   for s, k, c, b, sec in stages],
        "tables": {name: {"columns": list(t.columns), "rows": t.rows, "sha256": t.sha256}
                   for name, t in tables.items()},
    }
    manifest["pack_id"] = _pack_id(manifest)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        _write_member(archive, "mimetype", MIMETYPE, zipfile.ZIP_STORED)
        _write_member(archive, "manifest.json",
                      json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True).encode("utf-8"))
        for name, table in tables.items():
            _write_member(archive, f"tables/{name}.jsonl", table.blob)
    return buffer.getvalue(), manifest


def export_pack(library: Library, video_id: str, out: Path) -> Path:
    """Write the pack of ``video_id``'s memory to ``out`` (a file, or an existing folder to write
    ``<video>-<pack id>.vidpack`` into) atomically, and return its path."""
    started = time.perf_counter()
    data, manifest = export_pack_bytes(library, video_id)
    out = Path(out).expanduser()
    path = out / pack_name(manifest) if out.is_dir() else out
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".pack-", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.chmod(temporary, 0o644)  # mkstemp's file is private; a pack is a file like any other
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    log.info("exported %s to %s (%d bytes) in %.2f s", video_id, path, len(data), time.perf_counter() - started)
    return path


def pack_name(manifest: Mapping[str, Any]) -> str:
    """``<video id, made file-safe>-<first 16 of the pack id>.vidpack``."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(manifest["video_id"]))[:48].strip("._") or "video"
    return f"{slug}-{str(manifest['pack_id'])[:16]}{PACK_SUFFIX}"


def _pack_id(manifest: Mapping[str, Any]) -> str:
    body = {key: value for key, value in manifest.items() if key != "pack_id"}
    canonical = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _write_member(archive: zipfile.ZipFile, name: str, data: bytes, compression: int = zipfile.ZIP_DEFLATED) -> None:
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = compression
    info.external_attr = 0o644 << 16
    archive.writestr(info, data)


# ----------------------------------------------------------------------------- import


def is_pack(path: str | Path) -> bool:
    """Whether ``path`` is a file that claims to be a pack (its first bytes, or its suffix); whether it
    is intact is for ``import_pack`` to say."""
    path = Path(path)
    if not path.is_file():
        return False
    if path.suffix.lower() == PACK_SUFFIX:
        return True
    try:
        with path.open("rb") as file:
            head = file.read(_SIGNATURE_BYTES)
    except OSError:
        return False
    return head.startswith(b"PK\x03\x04") and head[30:38] == b"mimetype" and head[38:] == MIMETYPE


def import_pack(library: Library, path: Path) -> PackImport:
    """Check the pack at ``path`` and write its memory into ``library`` (see the module's description)."""
    path = Path(path).expanduser()
    try:
        with path.open("rb") as file:
            return _import(library, file, str(path))
    except OSError as error:
        raise PackError(f"{path}: cannot read the pack: {error.strerror or error}") from None


def import_pack_bytes(library: Library, data: bytes, name: str) -> PackImport:
    """``import_pack`` for a pack held in memory (a Ray worker's); ``name`` names it in errors."""
    return _import(library, io.BytesIO(data), name)


@dataclass(frozen=True)
class _Pack:
    manifest: dict[str, Any]
    rows: dict[str, list[tuple[Any, ...]]]  # table -> rows without video_id
    tables: dict[str, _Table]


def _import(library: Library, file: BinaryIO, name: str) -> PackImport:
    started = time.perf_counter()
    pack = _read_pack(file, name)
    manifest = pack.manifest
    video_id = manifest["video_id"]
    _check_columns(library, pack, name)
    owner = _stage_of_table()
    stage_rows = _stage_rows(pack)
    stages = tuple(stage_rows)
    with _connection(library) as conn:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as error:
            raise MemoryStoreError(f"cannot write to the library {library.path}: {error}") from None
        try:
            here = _read_video(conn, video_id)
            here_stages = dict(conn.execute("SELECT stage, config_key FROM stages WHERE video_id=?", (video_id,)))
            changed = [stage for stage in stages
                       if here_stages.get(stage) != stage_rows[stage]["config_key"]
                       or any(here[t].sha256 != _sha256_of(pack, t) for t in STAGE_TABLES.get(stage, ()) if t in here)]
            loose = [t for t in pack.tables if t not in ("videos", "stages") and t not in owner
                     and pack.tables[t].rows and here[t].sha256 != pack.tables[t].sha256]
            new_video = here["videos"].rows == 0
            written = 0
            if new_video:
                written += _insert(conn, "videos", video_id, pack.tables["videos"].columns, pack.rows["videos"])
            for table in loose:
                conn.execute(f"DELETE FROM {table} WHERE video_id=?", (video_id,))
                written += _insert(conn, table, video_id, pack.tables[table].columns, pack.rows[table])
            for stage in changed:
                for table in STAGE_TABLES.get(stage, ()):
                    conn.execute(f"DELETE FROM {table} WHERE video_id=?", (video_id,))
                    if table in pack.tables:
                        written += _insert(conn, table, video_id, pack.tables[table].columns, pack.rows[table])
                conn.execute("DELETE FROM stage_checkpoints WHERE video_id=? AND stage=?", (video_id, stage))
                conn.execute("DELETE FROM stages WHERE video_id=? AND stage=?", (video_id, stage))
                columns = pack.tables["stages"].columns
                written += _insert(conn, "stages", video_id, columns, [tuple(stage_rows[stage][c] for c in columns)])
            conn.execute("COMMIT")
        except BaseException as error:
            conn.execute("ROLLBACK")
            if isinstance(error, sqlite3.DatabaseError):
                raise PackError(f"{name}: the library refused the pack's rows ({error}); nothing was imported") \
                    from None
            raise
    status = "imported" if written else "unchanged"
    result = PackImport(video_id, status, stages, tuple(changed), written, manifest["pack_id"],
                        time.perf_counter() - started)
    log.info("%s: %s %s (%d rows) in %.2f s", name, status, video_id, written, result.seconds)
    return result


def _sha256_of(pack: _Pack, table: str) -> str:
    """The checksum of the pack's rows of ``table`` (of no rows where the pack, from an older schema, lacks it)."""
    return pack.tables[table].sha256 if table in pack.tables else hashlib.sha256(b"").hexdigest()


def _stage_rows(pack: _Pack) -> dict[str, dict[str, Any]]:
    """The pack's ``stages`` rows by stage name, each as column -> value."""
    columns = pack.tables["stages"].columns
    return {row[columns.index("stage")]: dict(zip(columns, row)) for row in pack.rows["stages"]}


def _insert(conn: sqlite3.Connection, table: str, video_id: str, columns: Sequence[str],
            rows: Sequence[Sequence[Any]]) -> int:
    if not rows:
        return 0
    names = ", ".join(("video_id", *columns))
    marks = ", ".join("?" * (len(columns) + 1))
    conn.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", [(video_id, *row) for row in rows])
    return len(rows)


def _read_pack(file: BinaryIO, name: str) -> _Pack:
    """The pack's manifest and rows, every check passed (nothing is written before this returns)."""

    def damaged(why: str) -> PackError:
        return PackError(f"{name}: not an intact vidagent pack ({why}); nothing was imported")

    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, EOFError, ValueError) as error:
        raise damaged(f"not a readable zip file, truncated or damaged: {error}") from None
    with archive:
        try:
            members = set(archive.namelist())
            _check_sizes(archive, damaged)
            if "mimetype" not in members or archive.read("mimetype") != MIMETYPE or "manifest.json" not in members:
                raise damaged("no vidagent pack mimetype and manifest")
            manifest = _parse_manifest(_read_member(archive, "manifest.json"), damaged)
            if not isinstance(manifest, dict) or manifest.get("format") != "vidagent-pack":
                raise damaged("the manifest is not a vidagent pack's")
            _check_versions(manifest, name)
            if set(manifest) - MANIFEST_KEYS:
                raise damaged(f"the manifest holds keys a pack has not: {', '.join(sorted(set(manifest) - MANIFEST_KEYS))[:200]}")
            if manifest.get("pack_id") != _pack_id(manifest):
                raise damaged("the manifest does not match its pack id")
            tables: dict[str, _Table] = {}
            rows: dict[str, list[tuple[Any, ...]]] = {}
            for table, entry in manifest["tables"].items():
                member = f"tables/{table}.jsonl"
                if member not in members:
                    raise damaged(f"{member} is missing")
                blob = _read_member(archive, member)
                tables[table] = _Table(tuple(entry["columns"]), blob, int(entry["rows"]))
                if tables[table].sha256 != entry["sha256"]:
                    raise damaged(f"{member} does not match its checksum")
                lines = blob.decode("utf-8").splitlines()
                rows[table] = [tuple(_decode(value) for value in _row(line)) for line in lines]
                if len(rows[table]) != tables[table].rows or \
                        any(len(row) != len(tables[table].columns) for row in rows[table]):
                    raise damaged(f"{member} does not have the rows its manifest lists")
            pack = _Pack(manifest, rows, tables)
            _check_consistency(pack, name)
        except PackError:
            raise
        except RecursionError:
            raise damaged("a value nested too deep") from None
        except (zipfile.BadZipFile, EOFError, OSError, UnicodeDecodeError, ValueError, KeyError, TypeError,
                AttributeError, zlib.error) as error:
            raise damaged(f"{error.__class__.__name__}: {error}") from None
    return pack


def _check_sizes(archive: zipfile.ZipFile, damaged: Any) -> None:
    """Refuse, from what the members declare and before any is inflated, a member past its cap, one that inflates
    more than ``MAX_INFLATION`` times, and members that together inflate past ``MAX_PACK_BYTES``."""
    total = 0
    for info in archive.infolist():
        if info.file_size > 1024 * 1024 and info.file_size > MAX_INFLATION * max(1, info.compress_size):
            raise damaged(f"{info.filename} inflates {info.file_size // max(1, info.compress_size):,} times "
                          f"(at most {MAX_INFLATION}): a zip bomb, not a pack")
        cap = MAX_MANIFEST_BYTES if info.filename in ("manifest.json", "mimetype") else MAX_PACK_BYTES
        if info.file_size > cap:
            raise damaged(f"{info.filename} inflates to {info.file_size:,} bytes (at most {cap:,})")
        total += info.file_size
        if total > MAX_PACK_BYTES:
            raise damaged(f"its members inflate to more than {MAX_PACK_BYTES:,} bytes together")


def _read_member(archive: zipfile.ZipFile, name: str) -> bytes:
    """A member's bytes, never more than it declared (``_check_sizes`` capped the declarations): a member whose data
    inflates past its declared size is damaged."""
    declared = archive.getinfo(name).file_size
    with archive.open(name) as member:
        data = member.read(declared + 1)
    if len(data) > declared:
        raise ValueError(f"{name} holds more than the {declared:,} bytes it declares")
    return data


def _parse_manifest(data: bytes, damaged: Any) -> Any:
    """The manifest's JSON, refused unread when its brackets nest deeper than ``MAX_MANIFEST_DEPTH``."""
    text = data.decode("utf-8")
    if _json_depth(text) > MAX_MANIFEST_DEPTH:
        raise damaged(f"the manifest nests deeper than {MAX_MANIFEST_DEPTH} levels")
    return json.loads(text)


def _json_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (outside its strings), counted without parsing it."""
    depth = deepest = 0
    for token in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in "]}":
            depth -= 1
    return deepest


def _row(line: str) -> Any:
    """One table row: a flat JSON array (a blob is one level deeper, ``{"b64": ...}``)."""
    if _json_depth(line) > 2:
        raise ValueError("a row nests deeper than a list of values")
    return json.loads(line)


def _check_versions(manifest: Mapping[str, Any], name: str) -> None:
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise PackError(f"{name}: pack format {version} is newer than this vidagent reads ({FORMAT_VERSION}); "
                        "upgrade vidagent to import it")
    schema = manifest.get("schema_version")
    if not isinstance(schema, int):
        raise PackError(f"{name}: not an intact vidagent pack (no schema version); nothing was imported")
    if schema > SCHEMA_VERSION:
        raise PackError(f"{name}: the pack was written with library schema {schema}, newer than this vidagent's "
                        f"({SCHEMA_VERSION}); upgrade vidagent to import it")


def _check_columns(library: Library, pack: _Pack, name: str) -> None:
    """Each of the pack's tables must exist here with the same columns (an older schema only lacks tables)."""
    known = set(packed_tables())
    with _connection(library) as conn:
        for table, entry in pack.tables.items():
            here = tuple(c for c in table_columns(conn, table) if c != "video_id") if table in known else ()
            if here != entry.columns:
                schema = pack.manifest["schema_version"]
                what = "has no table" if not here else "has other columns in table"
                again = (" (export it again with this vidagent, or index the video here)"
                         if isinstance(schema, int) and schema < SCHEMA_VERSION else "")
                raise PackError(f"{name}: incompatible pack: written with library schema {schema}, and this "
                                f"library (schema {SCHEMA_VERSION}) {what} {table!r}; nothing was imported{again}")


def _check_consistency(pack: _Pack, name: str) -> None:
    def damaged(why: str) -> PackError:
        return PackError(f"{name}: not an intact vidagent pack ({why}); nothing was imported")

    manifest = pack.manifest
    for table in ("videos", "stages"):
        if table not in pack.tables:
            raise damaged(f"no {table} table")
    if pack.tables["videos"].rows != 1:
        raise damaged("it must hold exactly one video")
    stages = _stage_rows(pack)
    if not stages or len(stages) != pack.tables["stages"].rows:
        raise damaged("it holds no stage, or one stage twice")
    for stage in stages.values():
        if config_key(json.loads(stage["config"])) != stage["config_key"]:
            raise damaged(f"stage {stage['stage']!r}: its config does not match its config key")
    built = set(stages)
    for table, stage_name in _stage_of_table().items():
        if table in pack.tables and pack.tables[table].rows and stage_name not in built:
            raise damaged(f"rows in {table} but no stage {stage_name!r}")
    if not isinstance(manifest.get("video_id"), str) or not manifest["video_id"]:
        raise damaged("no video id")
