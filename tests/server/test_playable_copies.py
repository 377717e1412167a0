"""Playable copies over HTTP (issue 42, item 1): a video in a format browsers do not play (MPEG-4 Part 2, made
here with PyAV) is served from a copy made once in the background (202 with its progress while it is made, the
server answering meanwhile), kept under the home by content hash and reused after a restart; a file that plays
is served as it is (its copy only on request); a damaged file is a clear 422, never a 500; a server without an
encoder of a browser's format says so. Scripted perception and chat model: no models, no shared clips."""

from __future__ import annotations

import threading
import time

import av
import httpx
import pytest

from vidagent.server import proxies
from vidagent.server.proxies import PlayableCopies
from vidagent.video.proxy import ProxyFormat, playability
from vidagent.video.video import Video

from fakes import ScriptedLLM, scripted_perception
from serve_helpers import running_server
from unplayable_clips import damaged_clip, h264_clip, mpeg4_clip


def serve(home, folder):
    return running_server(home, home / "models", [folder], ScriptedLLM([]), perception=scripted_perception())


def settled(client: httpx.Client, video_id: str, query: str = "") -> dict:
    """The video's playback once its copy is ready or has failed."""
    for _ in range(1200):
        play = client.get(f"/api/videos/{video_id}/playback{query}").json()
        if play["state"] in ("ready", "failed"):
            return play
        time.sleep(0.05)
    raise AssertionError(f"the copy of {video_id} is still being made: {play}")


@pytest.fixture
def counted(monkeypatch):
    """Every copy the server makes, by content hash; a copy waits for ``gate`` after reporting half done."""
    made: list[str] = []
    gate = threading.Event()
    real = proxies.make_proxy

    def make(video, target, form, *, progress=None, **options):
        made.append(video.content_hash)
        progress(0.5)
        assert gate.wait(60)
        return real(video, target, form, progress=progress, **options)

    monkeypatch.setattr(proxies, "make_proxy", make)
    return made, gate


def test_an_unplayable_video_is_served_from_a_copy_made_once(tmp_path, counted):
    made, gate = counted
    folder, home = tmp_path / "clips", tmp_path / "home"
    source = mpeg4_clip(folder / "example1.mp4", audio=True)
    with serve(home, folder) as (server, _), httpx.Client(base_url=server.url, timeout=30) as client:
        video_id = client.post("/api/videos", json={"path": str(source)}).json()["video_id"]
        waiting = client.get(f"/api/videos/{video_id}/file")
        assert waiting.status_code == 202 and waiting.headers["retry-after"] == "2"
        assert waiting.json()["state"] in ("queued", "running") and waiting.json()["source"] == "proxy"
        for _ in range(200):
            play = client.get(f"/api/videos/{video_id}/playback").json()
            if play["progress"] == 0.5:
                break
            time.sleep(0.02)
        assert play["state"] == "running" and play["url"] is None
        assert play["reason"].endswith("web browsers do not play MPEG-4 Part 2 video")
        started = time.perf_counter()  # the encode runs beside the server, not on its event loop
        assert client.get("/api/health").status_code == 200 and time.perf_counter() - started < 2
        assert client.get(f"/api/videos/{video_id}/memory").status_code == 200

        gate.set()
        play = settled(client, video_id)
        assert play["state"] == "ready" and play["url"] == f"/api/videos/{video_id}/file"
        served = client.get(play["url"])
        assert served.status_code == 200 and served.headers["content-type"] == "video/mp4"
        copy = tmp_path / "served.mp4"
        copy.write_bytes(served.content)
        assert playability(copy).playable
        with av.open(str(copy)) as container:  # the sound is kept
            assert container.streams.video[0].codec_context.name == "h264" and container.streams.audio
        assert (home / "playable" / f"{video_id}.mp4").read_bytes() == served.content
        part = client.get(play["url"], headers={"Range": "bytes=0-99"})
        assert part.status_code == 206 and len(part.content) == 100
        original = client.get(f"/api/videos/{video_id}/file", params={"original": "true"})
        assert original.content == source.read_bytes()
        assert client.get(f"/api/videos/{video_id}/playback").json()["state"] == "ready"
    assert made == [video_id]

    with serve(home, folder) as (server, _), httpx.Client(base_url=server.url, timeout=30) as client:
        play = client.get(f"/api/videos/{video_id}/playback").json()  # another server: the copy kept is used
        assert play["state"] == "ready" and client.get(play["url"]).content == served.content
    assert made == [video_id]


def test_a_playable_video_is_served_as_it_is_and_copied_only_on_request(tmp_path, counted):
    made, gate = counted
    gate.set()
    folder, home = tmp_path / "clips", tmp_path / "home"
    source = h264_clip(folder / "plays.mp4", audio=True)
    with serve(home, folder) as (server, _), httpx.Client(base_url=server.url, timeout=30) as client:
        video_id = client.post("/api/videos", json={"path": str(source)}).json()["video_id"]
        play = client.get(f"/api/videos/{video_id}/playback").json()
        assert (play["source"], play["state"], play["url"]) == ("original", "ready", f"/api/videos/{video_id}/file")
        assert client.get(play["url"]).content == source.read_bytes()
        assert made == []

        forced = settled(client, video_id, "?proxy=true")  # the page's player failed on it: a copy after all
        assert forced["source"] == "proxy" and forced["url"] == f"/api/videos/{video_id}/file?proxy=true"
        copy = client.get(forced["url"])
        assert copy.status_code == 200 and copy.content != source.read_bytes() and made == [video_id]
        assert client.get(f"/api/videos/{video_id}/file").content == source.read_bytes()  # still as it is

        assert client.delete(f"/api/videos/{video_id}").status_code == 200  # removed: its copy goes with it
        assert not list((home / "playable").iterdir())


def test_a_damaged_video_gives_a_clear_error_not_a_500(tmp_path, counted):
    made, gate = counted
    gate.set()
    folder, home = tmp_path / "clips", tmp_path / "home"
    source = damaged_clip(folder / "damaged.mp4")
    with serve(home, folder) as (server, _), httpx.Client(base_url=server.url, timeout=30) as client:
        added = client.post("/api/videos", json={"path": str(source)})
        assert added.status_code == 201, added.text  # it opens: only decoding it past its first frame fails
        video_id = added.json()["video_id"]
        play = settled(client, video_id)
        assert (play["state"], play["status"], play["url"]) == ("failed", 422, None)
        assert play["message"].startswith("no playable copy of damaged.mp4 can be made: the video data is damaged")
        assert str(folder) not in play["message"]  # the server's paths stay private
        for _ in range(2):  # failed for good: asked again, the answer is the same (the file is not decoded again)
            refused = client.get(f"/api/videos/{video_id}/file")
            assert refused.status_code == 422
            assert refused.json() == {"error": "NoPlayableCopyError", "message": play["message"], "status": 422}
        assert client.get("/api/health").status_code == 200 and made == [video_id]
        assert not (home / "playable").exists() or not list((home / "playable").iterdir())


def wait_settled(copies: PlayableCopies, video: Video):
    for _ in range(1200):
        play = copies.playback(video)
        if play.state in ("ready", "failed"):
            return play
        time.sleep(0.05)
    raise AssertionError(f"the copy is still being made: {play}")


def test_a_copy_that_cannot_be_written_fails_in_words_and_is_tried_again_later(tmp_path, monkeypatch):
    blocked = tmp_path / "playable"
    blocked.write_text("a file where the folder of copies goes")
    copies = PlayableCopies(blocked)
    try:
        video = Video(mpeg4_clip(tmp_path / "clips" / "example1.mp4"))
        play = wait_settled(copies, video)
        assert (play.state, play.status) == ("failed", 500)
        assert play.message.startswith("the server failed to make a playable copy of example1.mp4: cannot write")
        assert str(blocked) not in play.message
        assert copies.playback(video).state == "failed"  # not at once: a client that polls sees the failure
        blocked.unlink()
        monkeypatch.setattr(proxies, "RETRY_AFTER_S", 0.0)
        assert wait_settled(copies, video).ready  # asked for again later: made
    finally:
        copies.close()


def test_without_an_encoder_browsers_play_the_copy_is_refused_in_words(tmp_path):
    nothing = ProxyFormat("nothing", "no-such-encoder", "mp4", ".mp4", "video/mp4", ())
    copies = PlayableCopies(tmp_path / "playable", formats=(nothing,))
    try:
        play = copies.playback(Video(mpeg4_clip(tmp_path / "example1.mp4")))
        assert (play.state, play.status) == ("failed", 501)
        assert "no encoder of a format browsers play" in play.message and "MPEG-4 Part 2" in play.message
        assert copies.playback(Video(h264_clip(tmp_path / "plays.mp4"))).ready  # what plays as it is still does
    finally:
        copies.close()
