"""Portable memory packs: a real memory exported and imported table by table, packs that must be
refused (newer schema, other columns, truncated, damaged, rows the library rejects) with nothing
written, a second import that writes nothing, and ``vidagent index --ray`` bringing memories home
as packs."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import TEMPORAL_TEXT, TEMPORAL_TOY, video_path
from test_cli import assert_one_line_error, run_cli
from vidagent.config import Settings
from vidagent.memory import packs
from vidagent.memory.builder import ALL_STAGES, OBJECT_STAGES, MemoryBuilder
from vidagent.memory.library_index import IndexerConfig, IndexItem, VideoIndexer, index_videos
from vidagent.memory.packs import PackError, export_pack, import_pack, is_pack, packed_tables
from vidagent.memory.store import SCHEMA_VERSION, Library
from vidagent.pack_cli import import_pack_command
from vidagent.video.video import Video, VideoInfo

CAPTION_ID = "egoschema:0074f737-11cb-497d-8d07-77c3a8127391"


@pytest.fixture(scope="module")
def built(tmp_path_factory, perception, models_dir) -> Settings:
    """Settings whose library holds every stage of a 5 s clip's memory, and a memory without a file
    (captions only, under a namespaced id, the way `vidagent import` keeps released captions)."""
    home = tmp_path_factory.mktemp("packs-home")
    settings = replace(Settings.from_env(), home=home, models=models_dir)
    with Library(settings.library_path) as library:
        MemoryBuilder(library, perception, settings).build(Video(video_path(TEMPORAL_TOY)), ALL_STAGES,
                                                           progress=False)
        library.add_video(VideoInfo(path="captions:/data/llovi.json", content_hash=CAPTION_ID, duration_s=6.0,
                                    fps=0.0, width=0, height=0, rotation=0, has_audio=False, codec="", container=""))
        rng = np.random.default_rng(0)
        segments = [(i, float(2 * i), float(2 * i + 2), f"#C C does step {i}", "", "",
                     rng.standard_normal(384).astype(np.float32).tobytes()) for i in range(3)]
        library.write_stage(CAPTION_ID, "segments", {"captioner": "LaViLa", "embedder": "e5"},
                            {"segments": segments}, 0.1)
    return settings


def _toy_id() -> str:
    return Video(video_path(TEMPORAL_TOY)).content_hash


def _dump(library: Library, video_id: str) -> dict[str, list]:
    return {table: library.rows(f"SELECT * FROM {table} WHERE video_id=? ORDER BY 2, 3", (video_id,))
            for table in packed_tables()}


def _empty(library: Library, video_id: str) -> bool:
    return all(not rows for rows in _dump(library, video_id).values())


def _rewrite(pack: Path, out: Path, *, manifest_change=None, member_change=None, fix_ids: bool = True) -> Path:
    """A copy of ``pack`` with its manifest or a member changed (checksums and the pack id recomputed
    when ``fix_ids``, so only the change itself is wrong)."""
    with zipfile.ZipFile(pack) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    manifest = json.loads(members["manifest.json"])
    if member_change:
        name, data = member_change(members)
        members[name] = data
        table = name.removeprefix("tables/").removesuffix(".jsonl")
        if fix_ids:
            manifest["tables"][table]["sha256"] = hashlib.sha256(data).hexdigest()
            manifest["tables"][table]["rows"] = len(data.decode().splitlines())
    if manifest_change:
        manifest_change(manifest)
    if fix_ids:
        manifest["pack_id"] = packs._pack_id(manifest)
    members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mimetype", members.pop("mimetype"), compress_type=zipfile.ZIP_STORED)
        for name, data in members.items():
            archive.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    return out


def test_a_real_memory_round_trips_into_a_fresh_library_table_by_table(built, tmp_path):
    video_id = _toy_id()
    with Library(built.library_path) as source:
        pack = export_pack(source, video_id, tmp_path)
        original = _dump(source, video_id)
    assert re.fullmatch(rf"{video_id}-[0-9a-f]{{16}}\.vidpack", pack.name)
    assert is_pack(pack) and not is_pack(video_path(TEMPORAL_TOY))
    renamed = pack.rename(tmp_path / "memory.bin")  # known by its first bytes, whatever its name
    assert is_pack(renamed)
    assert all(original[table] for table in ("segments", "frames", "detections", "tracks", "objects"))

    with Library(tmp_path / "other" / "library.sqlite") as target:
        result = import_pack(target, renamed)
        assert (result.video_id, result.status) == (video_id, "imported")
        assert set(result.stages) == set(result.written) == {"frames", "speech", "segments", "camera", *OBJECT_STAGES}
        assert _dump(target, video_id) == original  # every table, every column, blobs bit for bit
        assert target.segments(video_id)[0].embedding.shape == (384,)
        again = import_pack(target, renamed)
        assert (again.status, again.written, again.rows) == ("unchanged", (), 0)
        assert _dump(target, video_id) == original
        # content-addressed: the imported memory exports to the very same bytes and name
        assert export_pack(target, video_id, tmp_path / "again").read_bytes() == renamed.read_bytes()
        assert (tmp_path / "again").exists() and not (tmp_path / "again").is_dir()
        assert export_pack(target, video_id, tmp_path).name == pack.name


def test_a_memory_without_a_video_file_is_exported_by_its_namespaced_id(built, tmp_path, capsys):
    exported = run_cli("export", "egoschema:0074", "-o", f"{tmp_path}/packs/", home=built.home)
    assert exported.returncode == 0, exported.stderr
    pack = next((tmp_path / "packs").glob("*.vidpack"))
    assert exported.stdout.startswith(f"{pack}: memory of {CAPTION_ID} (stages: segments), ")
    assert pack.name.startswith("egoschema_0074f737-11cb-497d-8d07-77c3a8127391-")
    target = replace(built, home=tmp_path / "target")
    assert import_pack_command(pack, target) == 0
    assert "imported egoschema:0074f737" in capsys.readouterr().out
    with Library(built.library_path) as source, Library(target.library_path) as copy:
        assert _dump(copy, CAPTION_ID) == _dump(source, CAPTION_ID)
        assert copy.video_row(CAPTION_ID)["path"] == "captions:/data/llovi.json"
    assert import_pack_command(pack, target) == 0
    assert "unchanged" in capsys.readouterr().out


def test_export_by_video_file_and_its_errors_in_one_line(built, tmp_path):
    exported = run_cli("export", str(video_path(TEMPORAL_TOY)), "-o", str(tmp_path / "toy.vidpack"), home=built.home)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.startswith(f"{tmp_path / 'toy.vidpack'}: memory of {_toy_id()} "
                                      "(stages: actions, camera, descriptions, frames, objects, segments, speech)")
    assert is_pack(tmp_path / "toy.vidpack")
    assert_one_line_error(run_cli("export", str(video_path(TEMPORAL_TEXT)), home=built.home), 5,
                          "this video has no memory in")
    assert_one_line_error(run_cli("export", "nope:123", home=built.home), 5, "no stored video id starts so")
    assert_one_line_error(run_cli("export", "", home=built.home), 5, "stored videos start so")


def test_a_pack_from_a_newer_schema_or_with_other_columns_is_refused(built, tmp_path):
    with Library(built.library_path) as source:
        pack = export_pack(source, _toy_id(), tmp_path / "good.vidpack")

    def newer(manifest):
        manifest["schema_version"] = SCHEMA_VERSION + 1

    def other_columns(manifest):
        manifest["tables"]["objects"]["columns"][-1] = "colour"

    with Library(tmp_path / "target.sqlite") as target:
        with pytest.raises(PackError, match=rf"newer.vidpack: the pack was written with library schema "
                                            rf"{SCHEMA_VERSION + 1}, newer than this vidagent's .*upgrade vidagent"):
            import_pack(target, _rewrite(pack, tmp_path / "newer.vidpack", manifest_change=newer))
        with pytest.raises(PackError, match="columns.vidpack: incompatible pack: .*other columns in table 'objects'"):
            import_pack(target, _rewrite(pack, tmp_path / "columns.vidpack", manifest_change=other_columns))
        assert _empty(target, _toy_id())


def test_a_schema_3_pack_whose_frames_hold_sentences_is_refused_saying_so(built, tmp_path):
    with Library(built.library_path) as source:
        pack = export_pack(source, _toy_id(), tmp_path / "good.vidpack")

    def sentences(members):  # schema 3's frames: (time_s, segment_id, description, objects)
        rows = [json.loads(line) for line in members["tables/frames.jsonl"].decode().splitlines()]
        old = [[row[0], row[1], "[detector+OCR description, not a caption] " + row[2], "[]"] for row in rows]
        return "tables/frames.jsonl", "".join(json.dumps(row) + "\n" for row in old).encode()

    def schema_3(manifest):
        manifest["schema_version"] = 3
        manifest["tables"]["frames"]["columns"] = ["time_s", "segment_id", "description", "objects"]
        del manifest["tables"]["describers"]

    with Library(tmp_path / "target.sqlite") as target:
        with pytest.raises(PackError, match=r"old.vidpack: incompatible pack: written with library schema 3, and this "
                                            rf"library \(schema {SCHEMA_VERSION}\) has other columns in table 'frames'; nothing was imported "
                                            r"\(export it again with this vidagent, or index the video here\)"):
            import_pack(target, _rewrite(pack, tmp_path / "old.vidpack", manifest_change=schema_3,
                                         member_change=sentences))
        assert _empty(target, _toy_id())


def test_a_pack_from_an_older_schema_that_lacks_a_table_is_imported(built, tmp_path):
    video_id = _toy_id()
    with Library(built.library_path) as source:
        pack = export_pack(source, video_id, tmp_path / "good.vidpack")
        original = _dump(source, video_id)
    assert not original["motion"]

    def older(manifest):
        manifest["schema_version"] = SCHEMA_VERSION - 1
        del manifest["tables"]["motion"]

    with Library(tmp_path / "target.sqlite") as target:
        result = import_pack(target, _rewrite(pack, tmp_path / "older.vidpack", manifest_change=older))
        assert result.status == "imported"
        assert _dump(target, video_id) == original


def test_truncated_or_damaged_packs_are_refused_naming_the_file_and_nothing_is_written(built, tmp_path):
    video_id = _toy_id()
    with Library(built.library_path) as source:
        pack = export_pack(source, video_id, tmp_path / "good.vidpack")
    data = pack.read_bytes()
    truncated = tmp_path / "truncated.vidpack"
    truncated.write_bytes(data[: len(data) // 2])
    assert is_pack(truncated)  # it says it is one: `vidagent import` hands it to the pack reader
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF
    (tmp_path / "flipped.vidpack").write_bytes(bytes(flipped))

    def edit_segments(members):  # one digit of a time changed, the manifest left as it was
        return "tables/segments.jsonl", members["tables/segments.jsonl"].replace(b"2.0", b"2.5", 1)

    _rewrite(pack, tmp_path / "edited.vidpack", member_change=edit_segments, fix_ids=False)

    def duplicate_segment(members):  # checksums right, but a row the library's primary key refuses
        lines = members["tables/segments.jsonl"].splitlines(keepends=True)
        return "tables/segments.jsonl", b"".join([*lines, lines[0]])

    _rewrite(pack, tmp_path / "duplicate.vidpack", member_change=duplicate_segment)

    with Library(tmp_path / "target.sqlite") as target:
        for name, fragment in (("truncated", "not a readable zip file"), ("flipped", "not an intact vidagent pack"),
                               ("edited", "does not match its checksum"),
                               ("duplicate", "the library refused the pack's rows")):
            with pytest.raises(PackError, match=rf"{name}.vidpack: .*{fragment}.*nothing was imported"):
                import_pack(target, tmp_path / f"{name}.vidpack")
            assert _empty(target, video_id), name  # not even the video's row: one transaction
        with pytest.raises(PackError, match="gone.vidpack: cannot read the pack"):
            import_pack(target, tmp_path / "gone.vidpack")
        assert import_pack(target, pack).status == "imported"  # the good one still goes in


def test_a_stage_built_again_differently_is_replaced_and_the_others_kept(built, tmp_path):
    video_id = _toy_id()
    with Library(built.library_path) as source:
        pack = export_pack(source, video_id, tmp_path / "good.vidpack")
        original = _dump(source, video_id)
    with Library(tmp_path / "target.sqlite") as target:
        import_pack(target, pack)
        target.write_stage(video_id, "speech", {"model": "other"}, {"speech": [(0.0, 1.0, "hello")]}, 0.5)
        result = import_pack(target, pack)
        assert (result.status, result.written) == ("imported", ("speech",))
        assert _dump(target, video_id) == original


def test_a_pack_worker_never_opens_the_users_library(built, tmp_path):
    settings = replace(built, library=tmp_path / "never" / "library.sqlite")
    video = Video(video_path(TEMPORAL_TOY))
    with Library(built.library_path) as source:
        seed = packs.export_pack_bytes(source, video.content_hash)[0]
    indexer = VideoIndexer(IndexerConfig(settings, ("frames", "speech", "segments"), packs=True))
    try:  # seeded with what is built, nothing is left to build: the pack is the seed's memory
        outcome = indexer(IndexItem(str(video.path), video.content_hash, video.duration_s, seed=seed))
    finally:
        indexer.close()
    assert outcome.status == "built" and outcome.pack is not None
    assert not settings.library_path.parent.exists()
    with Library(tmp_path / "target.sqlite") as target:
        result = packs.import_pack_bytes(target, outcome.pack, "worker")
        assert set(result.stages) == {"frames", "speech", "segments", "camera", *OBJECT_STAGES}


@pytest.mark.slow
def test_ray_indexing_brings_each_memory_home_as_a_pack(built, tmp_path):
    pytest.importorskip("ray")
    settings = replace(built, home=tmp_path / "home", library=None)
    video = Video(video_path(TEMPORAL_TOY))
    job = IndexItem(str(video.path), video.content_hash, video.duration_s)
    outcomes = list(index_videos([job], settings, ("frames", "segments"), ray=True, workers=1))
    assert [o.status for o in outcomes] == ["built"], outcomes
    assert outcomes[0].pack is None and len(outcomes[0].pack_id) == 64
    with Library(settings.library_path) as library, Library(built.library_path) as reference:
        assert set(library.stage_names(video.content_hash)) == {"frames", "speech", "segments"}
        mine, theirs = _dump(library, video.content_hash), _dump(reference, video.content_hash)
        for table in ("frames", "text_in_frame", "segments", "clips"):
            assert mine[table] == theirs[table], table
        # the library holds exactly the pack the worker sent
        data, manifest = packs.export_pack_bytes(library, video.content_hash)
        assert manifest["pack_id"] == outcomes[0].pack_id
    # again, with the objects stage: the worker starts from a pack of what is built and adds objects
    outcomes = list(index_videos([job], settings, ("objects",), ray=True, workers=1))
    assert [o.status for o in outcomes] == ["built"]
    with Library(settings.library_path) as library:
        assert set(library.stage_names(video.content_hash)) == {"frames", "speech", "segments", "camera", *OBJECT_STAGES}
        built_at = dict(library.rows("SELECT stage, built_at FROM stages WHERE video_id=?", (video.content_hash,)))
    assert built_at["segments"] == manifest_built_at(manifest, "segments")


def manifest_built_at(manifest: dict, stage: str) -> str:
    return next(s["built_at"] for s in manifest["stages"] if s["stage"] == stage)


def test_pack_bytes_are_a_zip_with_the_mimetype_first(built):
    with Library(built.library_path) as source:
        data, manifest = packs.export_pack_bytes(source, _toy_id())
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        assert names[:2] == ["mimetype", "manifest.json"]
        assert set(names[2:]) == {f"tables/{t}.jsonl" for t in packed_tables()}
    assert manifest["schema_version"] == SCHEMA_VERSION and manifest["video_id"] == _toy_id()
    assert {s["stage"] for s in manifest["stages"]} == {"frames", "speech", "segments", "camera", *OBJECT_STAGES}
    assert manifest["tables"]["segments"]["rows"] == 3


@pytest.mark.parametrize("member", ["manifest.json", "tables/segments.jsonl"])
def test_a_zip_bomb_is_refused_from_what_it_declares_before_anything_is_inflated(tmp_path, member):
    bomb = tmp_path / "bomb.vidpack"
    with zipfile.ZipFile(bomb, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), packs.MIMETYPE)
        if member != "manifest.json":
            archive.writestr("manifest.json", json.dumps({"format": "vidagent-pack"}))
        archive.writestr(member, b"0" * (12 * 1024 * 1024), compress_type=zipfile.ZIP_DEFLATED)  # ~12 KB packed
    with Library(tmp_path / "target.sqlite") as target:
        with pytest.raises(PackError, match=rf"bomb.vidpack: .*{member} inflates \d[\d,]* times .*zip bomb"):
            import_pack(target, bomb)


def _hostile_pack(path: Path, manifest: bytes, members: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), packs.MIMETYPE)
        archive.writestr("manifest.json", manifest, compress_type=zipfile.ZIP_DEFLATED)
        for name, data in (members or {}).items():
            archive.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    return path


def _valid_head() -> dict:
    return {"format": "vidagent-pack", "format_version": packs.FORMAT_VERSION, "schema_version": SCHEMA_VERSION}


def test_members_that_inflate_past_the_packs_total_cap_together_are_refused_before_any_is_read(tmp_path, monkeypatch):
    """Issue 55: a member inflating 49 times to 1,000 MB (under each member's caps) was read and parsed, 17.7 s
    and 3.6 GB, before a check refused it. The total is capped from the declarations (the cap made small here)."""
    monkeypatch.setattr(packs, "MAX_PACK_BYTES", 3 * 1024 * 1024)
    pieces = {f"tables/t{i}.jsonl": np.random.default_rng(i).bytes(1024 * 1024).hex().encode()[:1024 * 1024]
              for i in range(4)}  # 1 MiB each, about 2 times compressed: no member is a bomb, together 4 MiB
    pack = _hostile_pack(tmp_path / "total.vidpack", json.dumps(_valid_head()).encode(), pieces)
    read: list[str] = []
    monkeypatch.setattr(packs, "_read_member", lambda archive, name: read.append(name))
    with Library(tmp_path / "target.sqlite") as target:
        with pytest.raises(PackError, match=r"total.vidpack: .*members inflate to more than 3,145,728 bytes together"):
            import_pack(target, pack)
        assert _empty(target, "anything")
    assert read == []


@pytest.mark.parametrize("case", ["junk of 2 MB", "nested 200,000 deep", "a key a pack has not"])
def test_a_hostile_manifest_is_a_one_line_pack_error(tmp_path, case):
    head = _valid_head()
    manifest = {
        "junk of 2 MB": json.dumps({**head, "video": np.random.default_rng(0).bytes(1024 * 1024).hex()}).encode(),
        "nested 200,000 deep": b"[" * 200_000 + b"]" * 200_000,
        "a key a pack has not": json.dumps({**head, "payload": "x" * 1000}).encode(),
    }[case]
    expected = {"junk of 2 MB": r"manifest.json inflates to 2,\d{3},\d{3} bytes \(at most 1,048,576\)",
                "nested 200,000 deep": r"the manifest nests deeper than 32 levels",
                "a key a pack has not": r"the manifest holds keys a pack has not: payload"}[case]
    pack = _hostile_pack(tmp_path / "manifest.vidpack", manifest)
    with Library(tmp_path / "target.sqlite") as target:
        with pytest.raises(PackError, match=rf"manifest.vidpack: not an intact vidagent pack \({expected}") as raised:
            import_pack(target, pack)
    assert "\n" not in str(raised.value)


def test_a_table_row_nested_deep_is_refused_without_a_recursion_error():
    with pytest.raises(ValueError, match="nests deeper"):
        packs._row("[" * 100_000 + "]" * 100_000)
    assert packs._row('["a [", {"b64": "AA=="}, 1]') == ["a [", {"b64": "AA=="}, 1]
