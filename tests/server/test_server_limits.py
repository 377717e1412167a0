"""Issue 41, items 2, 4 and 6, against a real server on loopback (the scripted home and perception, a scripted chat
model): a plain ask whose client leaves is cancelled, every question is held to the server's cap on its work, the
Host and Origin checks hold for /mcp on any loopback address (and ``serve`` answers to its own 127.0.0.2), GET
routes that make files refuse other sites, a SIGTERM ends a streamed question with an error event, and the smaller
edges: blank tokens, the token from a file, long upload names, infinite windows."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from argparse import Namespace

import httpx
import numpy as np
import pytest
from mcp import Client

from vidagent.llm.budget import Budget
from vidagent.server.auth import TokenGuard, names_loopback
from vidagent.server.config import DEFAULT_MAX_QUESTION_CALLS, DEFAULT_MAX_QUESTION_SECONDS, ServeConfig
from vidagent.server.errors import ServeSetupError
from vidagent.server.run import BackgroundServer, mcp_app
from vidagent.server.service import VideoService

from conftest import write_test_video
from fakes import scripted_perception
from serve_helpers import copy_home, read_sse, running_server, tagged_llm
from test_server_api import error_of, register

CAP = {"max_question_calls": 5, "max_question_seconds": 120.0}


@pytest.fixture(scope="module")
def served(scripted, tmp_path_factory):
    """A server on 127.0.0.2 that holds every question to 5 model calls and 120 s."""
    home = copy_home(scripted.home, tmp_path_factory.mktemp("limits-home"))
    llm = tagged_llm()
    with running_server(home, home / "models", [scripted.toy.parent], llm, perception=scripted_perception(),
                        host="127.0.0.2", **CAP) as (server, service):
        assert server.host == "127.0.0.2"
        with httpx.Client(base_url=server.url, timeout=60) as client:
            yield client, service, llm


def settle(service: VideoService, seconds: float = 20) -> None:
    """Wait until the model lane is empty."""
    deadline = time.monotonic() + seconds
    while service.lane.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.lane.pending == 0


# -- a plain ask whose client leaves --------------------------------------------------------------------------------
def send_ask(client: httpx.Client, body: dict) -> socket.socket:
    """A connection that has sent ``POST /api/ask`` with ``body`` and waits for its answer (closing it is the
    client going away)."""
    data = json.dumps(body).encode()
    connection = socket.create_connection((client.base_url.host, client.base_url.port))
    connection.sendall(b"POST /api/ask HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (client.base_url.host.encode(), client.base_url.port,
                                                          len(data), data))
    return connection


def wait_for(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_plain_ask_whose_client_leaves_is_stopped_and_frees_the_lane(scripted, served):
    client, service, llm = served
    toy = register(client, scripted.toy)["video_id"]
    before = len(llm.requests)
    running = send_ask(client, {"videos": [toy], "question": "[slow] Keep looking"})  # 5 calls, 1.75 s, if let be
    wait_for(lambda: len(llm.requests) > before)
    queued = send_ask(client, {"videos": [toy], "question": "[slow] Never asked"})
    wait_for(lambda: service.lane.pending == 2)
    queued.close()  # its client leaves before it starts: it is dropped from the queue
    wait_for(lambda: service.lane.pending == 1, 2)
    running.close()  # this one's client leaves mid-question: it stops after the call under way
    wait_for(lambda: service.lane.pending == 0, 2)
    asked = llm.requests[before:]
    assert 1 <= len(asked) < 5  # not the 5 calls the cap allows
    assert not any("Never asked" in message.content for request in asked for message in request)
    assert service.asks.live == 0
    started = time.monotonic()
    answer = client.post("/api/ask", json={"videos": [toy], "question": "[q3] Still there?"}, timeout=10).json()
    assert answer["answer"] == "answer to q3" and time.monotonic() - started < 5


def test_an_mcp_call_the_agent_cancels_stops_its_question(scripted, served):
    client, service, llm = served
    toy = register(client, scripted.toy)["video_id"]
    before = len(llm.requests)

    async def cancel_mid_way() -> None:
        async with Client(str(client.base_url).rstrip("/") + "/mcp", read_timeout_seconds=30) as mcp:
            first_step = asyncio.Event()

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                if "call" in (message or ""):
                    first_step.set()

            call = asyncio.ensure_future(mcp.call_tool("ask_video", {"video": toy, "question": "[slow] Go on"},
                                                       progress_callback=on_progress))
            await asyncio.wait_for(first_step.wait(), 20)
            call.cancel()  # the agent gives up on the call: the SDK tells the server so
            with contextlib.suppress(asyncio.CancelledError):
                await call
            await asyncio.sleep(0.1)

    asyncio.run(asyncio.wait_for(cancel_mid_way(), 60))
    wait_for(lambda: service.lane.pending == 0, 3)
    assert 1 <= len(llm.requests) - before < 5


# -- the server's cap on a question's work ----------------------------------------------------------------------------
def test_every_question_is_held_to_the_servers_cap(scripted, served):
    client, service, _ = served
    toy = register(client, scripted.toy)["video_id"]
    unbounded = client.post("/api/ask", json={"videos": [toy], "question": "[loop] Look until told to stop"}).json()
    assert unbounded["artifacts"]["budget"]["limit"] == {"calls": 5, "seconds": 120}
    assert unbounded["usage"]["llm_calls"] == 5  # react's 8 steps cut to the cap's 5 calls, the last one its answer
    smaller = client.post("/api/ask", json={"videos": [toy], "question": "[q4] What?", "budget": "calls=2"}).json()
    assert smaller["artifacts"]["budget"]["limit"] == {"calls": 2, "seconds": 120}  # the client's own stays
    larger = {"videos": [toy], "question": "[q5] What?", "budget": "calls=1000,seconds=99999,tokens=50000"}
    limit = client.post("/api/ask", json=larger).json()["artifacts"]["budget"]["limit"]
    assert limit == {"calls": 5, "seconds": 120, "tokens": 50000}  # cut to the cap, what it does not cap kept
    error_of(client.post("/api/ask", json={"videos": [toy], "question": "[q5] What?", "budget": "calls=-1"}), 400)

    async def over_mcp() -> dict:
        async with Client(str(client.base_url).rstrip("/") + "/mcp", read_timeout_seconds=60) as mcp:
            result = await mcp.call_tool("ask_video", {"video": toy, "question": "[loop] And over MCP?",
                                                       "budget": "calls=500"})
            assert not result.is_error, result.content
            return result.structured_content

    answer = asyncio.run(asyncio.wait_for(over_mcp(), 60))
    assert answer["budget"]["limit"] == {"calls": 5, "seconds": 120} and answer["usage"]["llm_calls"] == 5
    settle(service)


def test_the_cap_is_a_budget_each_limit_the_smaller():
    cap = Budget(calls=200, seconds=900)
    assert Budget(calls=4).within(cap) == Budget(calls=4, seconds=900)
    assert Budget(calls=999, seconds=10, frames=3).within(cap) == Budget(calls=200, seconds=10, frames=3)
    assert ServeConfig().question_cap == Budget(calls=DEFAULT_MAX_QUESTION_CALLS, seconds=DEFAULT_MAX_QUESTION_SECONDS)
    assert ServeConfig(max_question_calls=None, max_question_seconds=None).question_cap is None
    assert ServeConfig(max_question_calls=None).question_cap == Budget(seconds=DEFAULT_MAX_QUESTION_SECONDS)


def test_serve_takes_the_cap_and_refuses_a_negative_one(capsys):
    from vidagent.cli import build_parser, main

    args = build_parser().parse_args(["serve", "--max-question-seconds", "30", "--max-question-calls", "0"])
    assert (args.max_question_seconds, args.max_question_calls) == (30.0, 0)  # 0: no cap on calls
    assert main(["serve", "--max-question-calls", "-1"]) == 2
    assert "must be 0 (no cap) or above" in capsys.readouterr().err
    assert main(["mcp", "--max-question-seconds", "nan"]) == 2


# -- Host and Origin on any loopback address --------------------------------------------------------------------------
def test_serve_on_another_loopback_address_answers_to_its_own_host_only(served):
    client, _, _ = served
    assert client.get("/api/health").status_code == 200  # Host: 127.0.0.2:PORT
    port = client.base_url.port
    for host in ("evil.example", f"127.0.0.1:{port}@evil.example", f"127.0.0.2:{port}@evil.example",
                 "127.0.0.2:99999", "10.0.0.2"):
        assert error_of(client.get("/api/health", headers={"Host": host}), 400)["error"] == "InvalidHost", host
    for host in ("localhost", f"[::1]:{port}", "127.9.9.9:1"):
        assert client.get("/api/health", headers={"Host": host}).status_code == 200, host
    assert names_loopback("LocalHost:80") and not names_loopback("::1") and not names_loopback("127.0.0.1:80/x")


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def check_mcp_guards(client: httpx.Client) -> None:
    """/mcp refuses a foreign Host and any Origin /api refuses, and lets the SDK's client in."""
    port, own = client.base_url.port, str(client.base_url).rstrip("/")
    refused_hosts = ("evil.example", f"127.0.0.1:{port}@evil.example")
    for host in refused_hosts:
        refused = client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": host})
        assert error_of(refused, 400)["error"] == "InvalidHost", host
    for origin in ("http://evil.example", f"http://127.0.0.2:{port + 1}", f"http://localhost:{port}", "null"):
        refused = client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Origin": origin})
        assert error_of(refused, 403)["error"] == "CrossSiteRequest", origin
        assert client.get("/mcp", headers={**MCP_HEADERS, "Origin": origin}).status_code == 403
    refused = client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403
    own_page = client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Origin": own})
    assert own_page.status_code == 200, own_page.text

    async def tools() -> set[str]:
        async with Client(f"{own}/mcp", read_timeout_seconds=30) as mcp:
            return {tool.name for tool in (await mcp.list_tools()).tools}

    assert "ask_video" in asyncio.run(asyncio.wait_for(tools(), 30))


def test_mcp_at_serves_endpoint_checks_host_and_origin_on_any_loopback_address(served):
    client, _, _ = served
    check_mcp_guards(client)
    port = client.base_url.port
    api_refused = client.post("/api/videos", json={"path": "x.mp4"}, headers={"Origin": f"http://localhost:{port}"})
    assert api_refused.status_code == 403  # the same Origin /mcp refuses


def test_vidagent_mcp_over_http_has_the_same_guards(scripted, tmp_path):
    home = copy_home(scripted.home, tmp_path / "home")
    with running_server(home, home / "models", [], tagged_llm(), perception=scripted_perception(),
                        host="127.0.0.2") as (_, service):
        with BackgroundServer(mcp_app(service), "127.0.0.2") as alone, \
                httpx.Client(base_url=alone.url, timeout=30) as client:
            check_mcp_guards(client)


# -- GET routes that make files ---------------------------------------------------------------------------------------
def test_get_routes_that_make_files_refuse_other_sites(scripted, served):
    client, service, _ = served
    toy = register(client, scripted.toy)["video_id"]
    clips = service.config.clips_dir
    before = sorted(clips.rglob("*")) if clips.exists() else []
    window = {"start": 1, "end": 3}
    for path in (f"/api/videos/{toy}/clip", f"/api/videos/{toy}/edits/clip", f"/api/videos/{toy}/edits/frames",
                 f"/api/videos/{toy}/file", f"/api/videos/{toy}/playback"):
        for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}):
            refused = client.get(path, params=window, headers=headers)
            assert error_of(refused, 403)["error"] == "CrossSiteRequest", (path, headers)
    assert (sorted(clips.rglob("*")) if clips.exists() else []) == before  # nothing was cut
    own = client.get(f"/api/videos/{toy}/clip", params=window, headers={"Sec-Fetch-Site": "same-origin"})
    assert own.status_code == 200 and own.headers["content-type"] == "video/mp4"
    assert client.get(f"/api/videos/{toy}/edits/clip", params=window).status_code == 200  # curl sends neither


def test_infinite_or_nan_windows_are_refused(scripted, served):
    client, _, _ = served
    toy = register(client, scripted.toy)["video_id"]
    for path, params in ((f"/api/videos/{toy}/edits/clip", {"start": 0, "end": "inf"}),
                         (f"/api/videos/{toy}/edits/clip", {"start": 0, "end": "nan"}),
                         (f"/api/videos/{toy}/edits/clip", {"start": "-inf", "end": 1}),
                         (f"/api/videos/{toy}/edits/frames", {"start": 0, "end": "Infinity"}),
                         (f"/api/videos/{toy}/clip", {"start": 0, "end": "inf"}),
                         (f"/api/videos/{toy}/frame", {"t": "nan"})):
        body = error_of(client.get(path, params=params), 422)
        assert "finite" in body["message"], (path, params, body)


# -- uploads with long names ------------------------------------------------------------------------------------------
def test_a_long_upload_name_is_shortened_to_what_a_file_system_holds(scripted, served, tmp_path):
    client, _, _ = served
    frames = [np.full((48, 64, 3), 10 * shade, np.uint8) for shade in range(20)]
    data = write_test_video(tmp_path / "new.mp4", frames).read_bytes()  # content the server does not list
    for given in ("a" * 300 + ".mp4", "中" * 250 + ".mp4"):
        response = client.post("/api/videos/upload", params={"filename": given}, content=data)
        assert response.status_code == 201, response.text
        name = response.json()["name"]
        assert name.endswith(".mp4") and len(name.encode()) <= 200 and name[0] == given[0]
        client.delete(f"/api/videos/{response.json()['video_id']}")
    too_long = client.post("/api/videos/upload", params={"filename": "a" * 2000 + ".mp4"}, content=data)
    assert error_of(too_long, 422)["error"] == "InvalidRequest"
    not_video = client.post("/api/videos/upload", params={"filename": "b" * 300 + ".exe"}, content=data)
    assert len(error_of(not_video, 415)["message"]) < 300


# -- SIGTERM during a streamed question -------------------------------------------------------------------------------
def test_a_server_stopping_ends_a_streamed_question_with_an_error_event(scripted, tmp_path):
    home = copy_home(scripted.home, tmp_path / "home")
    with running_server(home, home / "models", [scripted.toy.parent], tagged_llm(),
                        perception=scripted_perception()) as (server, service):
        with httpx.Client(base_url=server.url, timeout=30) as client:
            toy = register(client, scripted.toy)["video_id"]
            events = []
            with client.stream("POST", "/api/ask/stream", json={"videos": [toy], "question": "[slow] Go on"}) as stream:
                for name, data in read_sse(stream.iter_lines()):
                    events.append((name, json.loads(data)))
                    if name == "step" and len(events) == 3:
                        server.stop()  # what SIGTERM does to `vidagent serve`
    assert events[-1][0] == "error" and events[-1][1]["error"] == "ServerShuttingDown", events[-1]
    assert events[-1][1]["status"] == 503 and "shutting down" in events[-1][1]["message"]
    settle(service)


# -- tokens -----------------------------------------------------------------------------------------------------------
def test_a_blank_token_is_refused(capsys, monkeypatch):
    from vidagent.cli import main

    for token in (" " * 12, "\t" * 9, "s3cret token", "s3cret\x00token"):
        with pytest.raises(ServeSetupError, match="spaces or control characters"):
            ServeConfig(token=token).check_binding()
        with pytest.raises(ServeSetupError):
            TokenGuard(lambda *args: None, token)
    monkeypatch.delenv("VIDAGENT_TOKEN", raising=False)
    assert main(["serve", "--token", " " * 12, "--port", "1"]) == 2
    assert "spaces or control characters" in capsys.readouterr().err
    monkeypatch.setenv("VIDAGENT_TOKEN", " " * 12)
    assert main(["serve", "--port", "1"]) == 2


def test_the_token_can_come_from_a_file_or_the_environment(tmp_path, capsys, monkeypatch):
    """A token file's first line (or $VIDAGENT_TOKEN) is the token: the server gets past the token's checks to
    the port, which another process holds here, so it stops there without starting."""
    from vidagent.cli import main

    monkeypatch.delenv("VIDAGENT_TOKEN", raising=False)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = str(holder.getsockname()[1])
        secret = tmp_path / "token"
        secret.write_text("s3cret-token-from-a-file\n")
        secret.chmod(0o600)
        assert main(["serve", "--host", "0.0.0.0", "--token-file", str(secret), "--port", port]) == 2
        assert "in use by another process" in capsys.readouterr().err  # the token was taken
        monkeypatch.setenv("VIDAGENT_TOKEN", "s3cret-token-from-the-environment")
        assert main(["serve", "--host", "127.0.0.1", "--port", port]) == 2
        assert "in use by another process" in capsys.readouterr().err
    secret.write_text("   \n")
    assert main(["serve", "--token-file", str(secret)]) == 2
    assert "first line is empty" in capsys.readouterr().err
    assert main(["serve", "--token-file", str(tmp_path / "missing")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one or the other
        main(["serve", "--token", "s3cret-token", "--token-file", str(secret)])


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o606])
def test_a_token_file_others_may_read_is_refused(tmp_path, capsys, mode):
    """Issue 55: as ssh refuses a private key others may read (the token is known to them already)."""
    from vidagent.cli import main

    secret = tmp_path / "token"
    secret.write_text("s3cret-token-from-a-file\n")
    secret.chmod(mode)
    assert main(["serve", "--token-file", str(secret)]) == 2
    error = capsys.readouterr().err
    assert f"readable or writable by others (mode {mode:04o})" in error and "chmod 600" in error
    assert "s3cret" not in error and len(error.strip().splitlines()) == 1


def test_the_token_file_is_read_into_the_config(tmp_path):
    from vidagent.config import Settings
    from vidagent.server.cli import _config

    secret = tmp_path / "token"
    secret.write_text("s3cret-token\nignored\n")
    secret.chmod(0o600)
    args = Namespace(videos=[], token=None, token_file=secret, host="127.0.0.1", port=8000,
                     max_question_seconds=60.0, max_question_calls=0)
    config = _config(args, lambda _: Settings.from_env())
    assert config.token == "s3cret-token" and config.question_cap == Budget(seconds=60.0)
