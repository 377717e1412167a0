"""The MCP server through the official SDK's client: over stdio (``vidagent mcp`` started as a process, as a
desktop agent starts it) and over streamable HTTP (``vidagent mcp --transport http``, and the ``/mcp``
endpoint of ``vidagent serve``)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from vidagent.agent.planner import BUILTIN_PLANNERS
from vidagent.video.video import Video

from conftest import TEMPORAL_TEXT, TEMPORAL_TOY, video_path
from fakes import scripted_perception
from serve_helpers import copy_home, running_server, tagged_llm

TOOLS = {"list_videos", "index_video", "ask_video", "query_video_memory", "segment_object", "search_library"}


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=120))


def structured(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


def test_stdio_tools_list_index_query_and_ask(temporal_library, models_dir, tmp_path):
    home = copy_home(temporal_library, tmp_path / "home")
    folder = video_path(TEMPORAL_TOY).parent
    toy_id = Video(video_path(TEMPORAL_TOY)).content_hash
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "vidagent.cli", "--home", str(home), "mcp", "--videos", str(folder)],
        env={"VIDAGENT_MODELS": str(models_dir)})

    async def session() -> None:
        async with Client(server, read_timeout_seconds=120) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            assert tools["query_video_memory"].annotations.read_only_hint
            assert all(name in tools["ask_video"].description for name in BUILTIN_PLANNERS)  # from the registry
            videos = structured(await client.call_tool("list_videos", {}))["videos"]
            assert {v["name"] for v in videos} == {"3.mp4", "4.mp4"}  # the library's clips in the served folder
            built = structured(await client.call_tool("index_video", {"video": str(video_path(TEMPORAL_TOY)),
                                                                       "stages": ["segments"]}))
            assert built["video_id"] == toy_id and "segments" in built["stages"]
            rows = structured(await client.call_tool("query_video_memory", {
                "video": toy_id, "query": "SELECT segment_id, start_s FROM segments ORDER BY segment_id"}))
            assert rows["rows"] == [[0, 0.0], [1, 2.0], [2, 4.0]]
            escape = structured(await client.call_tool("query_video_memory", {  # issue 55: a CTE, all videos' paths
                "video": toy_id, "query": "WITH x AS (SELECT video_id, path FROM main.videos) SELECT * FROM x"}))
            assert [row[0] for row in escape["rows"]] == [toy_id]
            refused = await client.call_tool("query_video_memory", {"video": toy_id, "query": "DROP TABLE segments"})
            assert refused.is_error and "SQL refused" in refused.content[0].text
            assert tools["search_library"].annotations.read_only_hint
            found = structured(await client.call_tool("search_library", {"query": "clideo", "kinds": ["text"]}))
            assert found["moments"][0]["name"] == "3.mp4" and found["moments"][0]["kinds"] == ["text"]
            assert "clideo" in found["moments"][0]["lines"][0]["text"].lower()
            progress: list[str] = []

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                progress.append(message or "")

            answer = structured(await client.call_tool("ask_video", {
                "video": Path(TEMPORAL_TEXT).name, "question": "Which is it?", "choices": ["a", "b", "c"],
                "planner": "random"}, progress_callback=on_progress))  # needs no model: the process has the real one
            assert answer["choice"] in ("a", "b", "c") and answer["planner"] == "random"
            assert answer["steps"][0] == "#0 question: Which is it? (3 options)"
            assert answer["option"] == "ABC"[answer["choice_index"]]
            assert answer["steps"][-1].startswith(f"#1 final answer (random): {answer['option']}. {answer['choice']}")
            assert progress == answer["steps"]  # each step reported while the question was answered
            outside = await client.call_tool("ask_video", {"video": str(video_path("github_InternVideo/example1.mp4")),
                                                           "question": "What?"})
            assert outside.is_error and "outside the folders" in outside.content[0].text
            unknown = await client.call_tool("ask_video", {"video": toy_id, "question": "What?", "planner": "tot"})
            assert unknown.is_error and "unknown planner" in unknown.content[0].text

    run(session())


def test_streamable_http_at_the_servers_mcp_endpoint(scripted, tmp_path):
    home = copy_home(scripted.home, tmp_path / "home")
    folder = scripted.toy.parent
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "fares.csv").write_text("trip,price\nriver cruise,12\n")
    llm = tagged_llm()
    with running_server(home, home / "models", [folder, papers], llm, perception=scripted_perception()) as (server, _):
        async def session() -> None:
            async with Client(f"{server.url}/mcp", read_timeout_seconds=120) as client:
                assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
                answer = structured(await client.call_tool("ask_video", {
                    "video": str(scripted.toy), "question": "[q7] What is drawn?",
                    "choices": ["answer to q7", "a car"]}))
                assert answer["answer"] == "answer to q7" and answer["choice_index"] == 0
                assert any(step.endswith("final answer: A. answer to q7  — the memory says so") for step in answer["steps"])
                assert answer["evidence"] and answer["usage"]["llm_calls"] >= 1
                bounded = structured(await client.call_tool("ask_video", {
                    "video": str(scripted.toy), "question": "[q8] What does a cruise cost?",
                    "knowledge": ["fares.csv#boat trip prices"], "budget": "calls=6"}))  # the table is read first
                assert bounded["answer"] == "answer to q8" and bounded["budget"]["limit"]["calls"] == 6
                assert "- fares_knowledge(question: str)" in llm.requests[-1][0].content
                refused = await client.call_tool("ask_video", {"video": str(scripted.toy),
                                                               "question": "What?", "knowledge": ["https://x.org/a.csv"]})
                assert refused.is_error and "fetches no URLs" in refused.content[0].text

        run(session())


def test_vidagent_mcp_over_streamable_http(temporal_library, models_dir, tmp_path):
    home = copy_home(temporal_library, tmp_path / "home")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "vidagent.cli", "--home", str(home), "mcp", "--transport", "http",
               "--port", str(port), "--videos", str(video_path(TEMPORAL_TOY).parent)]
    process = subprocess.Popen(command, env={**os.environ, "VIDAGENT_MODELS": str(models_dir)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()[-2000:]
            time.sleep(0.2)

        async def session() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
                assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
                videos = structured(await client.call_tool("list_videos", {}))["videos"]
                toy = next(v["video_id"] for v in videos if v["name"] == "4.mp4")
                rows = structured(await client.call_tool("query_video_memory", {
                    "video": toy, "query": "SELECT COUNT(*) FROM segments"}))
                assert rows["rows"] == [[3]]

        run(session())
    finally:
        process.terminate()
        process.wait(timeout=20)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
