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
from vidagent.video import proxy
from vidagent.server.proxies import PlayableCopies
from vidagent.video.proxy import ProxyFormat, playability
from vidagent.video.video import Video

from fakes import ScriptedLLM, scripted_perception
from serve_helpers import running_server
from hostile_clips import repeated_keyframe_clip
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
        kept = list((home / "playable").iterdir())  # no copy, only why there is none (so no restart tries again)
        assert [path.name for path in kept] == [f"{video_id}{proxies.REFUSED_SUFFIX}"]


def wait_settled(copies: PlayableCopies, video: Video, *, force_copy: bool = False):
    for _ in range(1200):
        play = copies.playback(video, force_copy=force_copy)
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


def test_a_copy_bomb_is_refused_once_for_good_and_holds_up_no_other_copy(tmp_path, monkeypatch):
    """Issue 55: a VP9 keyframe shown again by thousands of one-byte packets kept the one copying thread for 22
    minutes while every other copy waited "queued" (VP9 in MP4 plays as it is: the page asks for a copy when its
player fails, as here). Refused from its header, it is never queued; stopped by its
    time cap, the next copy starts; either refusal is kept, so no later request or restart does the work again."""
    monkeypatch.setattr(proxy, "MAX_SOURCE_PIXELS", 512 * 512)
    monkeypatch.setattr(proxy, "MIN_COPY_S", 0.3)
    monkeypatch.setattr(proxy, "COPY_S_PER_SECOND", 0.0)
    folder = tmp_path / "playable"
    huge = Video(repeated_keyframe_clip(tmp_path / "clips" / "huge.mp4", size=(1024, 1024), repeats=100))
    endless = Video(repeated_keyframe_clip(tmp_path / "clips" / "endless.mp4", size=(256, 256), repeats=20_000))
    plain = Video(mpeg4_clip(tmp_path / "clips" / "example1.mp4"))
    copies = PlayableCopies(folder)
    started: list[str] = []
    real = proxies.make_proxy
    monkeypatch.setattr(proxies, "make_proxy", lambda video, *args, **kw: started.append(video.path.name) or
                        real(video, *args, **kw))
    try:
        refused = copies.playback(huge, force_copy=True)
        assert (refused.state, refused.status) == ("failed", 422) and started == []  # never queued
        assert refused.message == ("no playable copy of huge.mp4 can be made: its picture is 1024 x 1024, larger "
                                   "than a playable copy is made of (at most 262,144 pixels, 7680 x 4320)")
        stopped, other = wait_settled(copies, endless, force_copy=True), wait_settled(copies, plain)
        assert (stopped.state, stopped.status) == ("failed", 422) and "was stopped" in stopped.message
        assert other.ready and started == ["endless.mp4", "example1.mp4"]
    finally:
        copies.close()
    again = PlayableCopies(folder)  # a restart: the refusals are read, nothing is tried again
    monkeypatch.setattr(proxies, "check_copyable", lambda video: pytest.fail("the header was read again"))
    try:
        for video, message in ((huge, refused.message), (endless, stopped.message)):
            for _ in range(2):
                play = again.playback(video, force_copy=True)
                assert (play.state, play.status, play.message) == ("failed", 422, message)
        assert started == ["endless.mp4", "example1.mp4"]
        again.forget(endless.content_hash)  # a video removed: its refusal goes with it
        assert not (folder / f"{endless.content_hash}{proxies.REFUSED_SUFFIX}").exists()
    finally:
        again.close()
