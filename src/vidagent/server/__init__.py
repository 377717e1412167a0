"""``vidagent serve`` and ``vidagent mcp``: the faces that put the library in front of people and agents.

- ``service``: one ``VideoService`` holding the session, the allowed folders, the model lane, the index
  jobs; every face calls it, so the HTTP API and the MCP server answer alike.
- ``app``, ``routes``: the FastAPI app, its routes under ``/api``, the web page at ``/`` (``static/``).
- ``mcp_server``: the MCP tools ``list_videos``, ``index_video``, ``ask_video``, ``query_video_memory``.
- ``run``: starting either on uvicorn (or stdio), refusing to bind beyond loopback without a token.
"""
