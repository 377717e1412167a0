"""The MCP server (official ``mcp`` SDK): video question answering as tools for desktop agents.

Tools: ``list_videos``, ``index_video``, ``ask_video``, ``query_video_memory``, ``segment_object``, over the same
``VideoService`` as the HTTP API (same allowed folders, same model lane). ``vidagent mcp`` serves them
over stdio or streamable HTTP; ``vidagent serve`` also mounts them at ``/mcp``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Iterator

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from starlette.applications import Starlette

from vidagent import __version__
from vidagent.errors import VidagentError
from vidagent.agent.planner import default_description, planner_names
from vidagent.prompts import load_prompt, prompt
from vidagent.server.asks import AskSpec
from vidagent.server.service import VideoService

SUMMARY_CHARS = 300


@contextlib.contextmanager
def _reported() -> Iterator[None]:
    """vidagent's own errors reach the calling agent as tool errors with their one-line message."""
    try:
        yield
    except (VidagentError, ValueError) as error:
        raise ToolError(str(error)) from error


def build_mcp(service: VideoService) -> MCPServer:
    server: MCPServer = MCPServer("vidagent", version=__version__, log_level="WARNING",
                                  instructions=load_prompt("vidagent.server", "mcp_instructions"))
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    def list_videos() -> dict[str, Any]:
        """The videos this server knows, with their ids, paths, durations and built memory stages; memories
        imported from released captions have kind "captions", no file, and an id such as egoschema:<id>."""
        return {"videos": [entry.to_dict() for entry in service.videos()]}

    @server.tool()
    async def index_video(video: str, ctx: Context, stages: list[str] | None = None) -> dict[str, Any]:
        """Build a video's memory ahead of questions (all stages by default: frames, speech, segments,
        objects). video: a path inside the server's video folders, or a video id."""
        with _reported():
            entry = await asyncio.to_thread(service.find, video)
            job = await asyncio.to_thread(service.index, entry.video_id, stages)
            async for event in job.events.follow():
                if event.name == "progress" and event.data.get("state") == "done":
                    await ctx.report_progress(event.data["number"], event.data["total"],
                                              f"built {event.data['stage']}")
            if job.state != "done":
                raise ToolError((job.error or {}).get("message", "the index build failed"))
            return (await asyncio.to_thread(service.video, entry.video_id)).to_dict()

    asks = prompt("vidagent.server", "mcp_ask_video").render(planners=", ".join(planner_names()),
                                                             default=default_description()).strip()

    @server.tool(description=asks)
    async def ask_video(video: str, question: str, ctx: Context, choices: list[str] | None = None,
                        planner: str | None = None, options: dict[str, str | int | float | bool] | None = None,
                        more_videos: list[str] | None = None, knowledge: list[str] | None = None,
                        budget: str | None = None, check: bool | None = None,
                        glance: float | None = None) -> dict[str, Any]:
        """Answer a question about a video: the description the client sees is the prompt ``mcp_ask_video``
        (the planners named from the registry)."""
        with _reported():
            ids = [(await asyncio.to_thread(service.find, reference)).video_id
                   for reference in [video, *(more_videos or [])]]
            spec = AskSpec(tuple(ids), question, tuple(choices) if choices else None, planner, dict(options or {}),
                           tuple(knowledge or ()), budget or None, check, glance)
            run = await asyncio.to_thread(service.start_ask, spec)
            steps: list[str] = []
            try:
                async for event in run.events.follow():
                    if event.name == "step":
                        steps.append(step_line(event.data))
                        await ctx.report_progress(len(steps), None, steps[-1])
                    elif event.name == "error":
                        raise ToolError(str(event.data.get("message", "the question failed")))
                    elif event.name == "answer":
                        data = event.data
                        spent = {key: data["artifacts"][key] for key in ("budget", "coverage")
                                 if key in data.get("artifacts", {})}
                        return {key: data[key] for key in ("answer", "option", "choice_index", "choice", "planner",
                                                            "confidence", "abstained", "abstain_reason", "evidence",
                                                            "candidates", "usage", "video_id")} \
                            | spent | {"steps": steps}
            except asyncio.CancelledError:  # the agent cancelled the call or went away: free the lane, as HTTP does
                run.cancel()
                raise
            raise ToolError("the question ended without an answer")

    @server.tool()
    async def segment_object(video: str, expression: str) -> dict[str, Any]:
        """Find the one object of a video that a referring expression means ("the black dog", "the second cup
        from the left", "the person who sits down") in its object memory (built first if needed) and save its
        mask in every sampled frame: PNG masks, masks.json and overlay.mp4 (the mask drawn over the video) in
        one folder on the server. video: a path inside the server's video folders, or a video id. Returns the
        object (id, class, description), how it was found (parser or model, and why), whether other objects
        fit as well (ambiguous), where the masks came from (a segmenter, or boxes standing in), the folder and
        files, the time span it is seen in as evidence, and each frame's time, box and PNG file."""
        with _reported():
            entry = await asyncio.to_thread(service.find, video)
            found = await service.edits.refer(entry.video_id, expression)
            data = found.to_dict()
            data["frames"] = [{key: frame[key] for key in ("time_s", "frame", "box", "source")}
                              | {"file": str(found.folder / frame["file"])} for frame in data["frames"]]
            return data

    @server.tool(annotations=read_only)
    def search_library(query: str, kinds: list[str] | None = None, limit: int = 10) -> dict[str, Any]:
        """Find moments across every video the server holds: which videos show something, and when. query: what
        to find ("dog", "a red car", "the word SALE", "someone says hello"). kinds: only lines of these kinds
        (object, action, text, speech, segment). Returns moments best first, each with the video (id and name),
        its time spans in seconds, and the memory lines that matched (detected objects with their category,
        on-screen text, speech, descriptions) and how (category, words, meaning)."""
        with _reported():
            return service.search(query, kinds=kinds or (), limit=limit)

    @server.tool(annotations=read_only)
    def query_video_memory(video: str, query: str, max_rows: int = 100) -> dict[str, Any]:
        """Run one read-only SQL SELECT (query) over an indexed video's memory. Tables: segments (start_s,
        end_s, description, speech, on_screen_text), frames, speech, text_in_frame, objects (category,
        first_s, last_s, appearance, motion, description), object_segments, detections, tracks. Rows are
        this video's only."""
        with _reported():
            entry = service.find(video)
            result = service.sql(entry.video_id, query, max_rows)
            return result.to_json()

    return server


def mcp_http_app(service: VideoService, path: str = "/mcp") -> Starlette:
    """The MCP tools over streamable HTTP at ``path``, as a Starlette app (its lifespan runs the sessions),
    without guards: ``auth.add_guards`` checks the Host and Origin headers (and the token) on any address, as it
    does for the API. The SDK's own DNS-rebinding check, which knows only 127.0.0.1, localhost and ::1 (so
    none on 127.0.0.2) and lets in an Origin of any port of them, is turned off so one set of rules holds."""
    unchecked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return build_mcp(service).streamable_http_app(streamable_http_path=path, transport_security=unchecked)


STEP_NAMES = {"task": "question", "tool_call": "call", "final_answer": "final answer",
              "format_error": "unusable reply"}


def step_line(step: dict[str, Any]) -> str:
    """A streamed step on one line for an agent: ``#4 call: caption_retrieval(0, 2)``; a step that does not
    follow the one before it (a branch of a search) says which it follows: ``#9 (after #2) ...``."""
    after = f" (after #{step['parent_id']})" if step.get("parent_id") not in (None, step["id"] - 1) else ""
    kind = STEP_NAMES.get(step["type"], step["type"])
    if step["type"] == "final_answer" and step.get("how") not in (None, "model"):
        kind += f" ({step['how']})"
    return f"#{step['id']}{after} {kind}: {one_line(step.get('display') or step['summary'])}"


def one_line(summary: str) -> str:
    """A step's summary on one line, cut to ``SUMMARY_CHARS``."""
    text = " | ".join(line.strip() for line in summary.splitlines() if line.strip())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 3] + "..."
