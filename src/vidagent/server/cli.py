"""The ``vidagent serve`` and ``vidagent mcp`` commands (added to the main parser by ``vidagent.cli``)."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import stat
from pathlib import Path
from typing import Callable

from vidagent.config import Settings
from vidagent.server.config import (DEFAULT_MAX_EDIT_SECONDS, DEFAULT_MAX_EDITS, DEFAULT_MAX_QUESTION_CALLS,
                                     DEFAULT_MAX_QUESTION_SECONDS, DEFAULT_MAX_UPLOAD_BYTES, TOKEN_ENV, ServeConfig)
from vidagent.server.errors import ServeSetupError

SettingsOf = Callable[[argparse.Namespace], Settings]
log = logging.getLogger(__name__)


def add_serve_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]",
                      add_llm_options: Callable[[argparse.ArgumentParser], None], settings_of: SettingsOf) -> None:
    serve = sub.add_parser("serve", help="the HTTP API, the web page and the MCP endpoint",
                           description="Serve the API under /api (OpenAPI docs at /docs), the web page at / and the "
                                       "MCP tools at /mcp. Beyond loopback a token is required.")
    _add_common(serve, default_port=8000)
    serve.add_argument("--max-upload-mb", type=float, default=DEFAULT_MAX_UPLOAD_BYTES / 2**20,
                       help="largest upload accepted (default %(default)g MiB)")
    serve.add_argument("--max-edit-seconds", type=float, default=DEFAULT_MAX_EDIT_SECONDS,
                       help="most video one edit (/api/videos/ID/edits/...) may cover (default %(default)g s)")
    serve.add_argument("--max-edits", type=int, default=DEFAULT_MAX_EDITS,
                       help="edits made at once; one more is refused with 429 (default %(default)s)")
    add_llm_options(serve)
    serve.set_defaults(run=lambda args: _serve(args, settings_of))

    mcp = sub.add_parser("mcp", help="the MCP server (stdio for desktop agents, or streamable HTTP)",
                         description="Tools list_videos, index_video, ask_video, segment_object, query_video_memory over MCP.")
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                     help="stdio (default: the agent starts this command) or streamable HTTP at /mcp")
    _add_common(mcp, default_port=8001)
    add_llm_options(mcp)
    mcp.set_defaults(run=lambda args: _mcp(args, settings_of))


def _add_common(parser: argparse.ArgumentParser, default_port: int) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=default_port, help="port (default %(default)s)")
    parser.add_argument("--videos", action="append", metavar="DIR", default=[],
                        help="a folder whose videos may be named by path (repeatable)")
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument("--token", help=f"bearer token clients must send (default: ${TOKEN_ENV}); required to listen "
                                        "beyond loopback. Other users see it in `ps`: prefer --token-file or "
                                        f"${TOKEN_ENV}")
    secret.add_argument("--token-file", metavar="PATH", type=Path,
                        help="read the token from this file (its first line; keep the file readable by you alone)")
    parser.add_argument("--max-question-seconds", type=float, default=DEFAULT_MAX_QUESTION_SECONDS, metavar="S",
                        help="the most seconds one question may spend, whatever budget its client names (a smaller "
                             "one stays); 0: no cap (default %(default)g)")
    parser.add_argument("--max-question-calls", type=int, default=DEFAULT_MAX_QUESTION_CALLS, metavar="N",
                        help="the most model calls one question may make, likewise; 0: no cap (default %(default)s)")


def _config(args: argparse.Namespace, settings_of: SettingsOf, **extra: object) -> ServeConfig:
    folders = tuple(Path(folder).expanduser() for folder in args.videos)
    for folder in folders:
        if not folder.is_dir():
            raise ServeSetupError(f"--videos {folder}: not a folder")
    if not args.max_question_seconds >= 0 or args.max_question_seconds == float("inf") or args.max_question_calls < 0:
        raise ServeSetupError("--max-question-seconds and --max-question-calls must be 0 (no cap) or above")
    return ServeConfig(settings=settings_of(args), video_dirs=folders, token=_token(args), host=args.host,
                       port=args.port, max_question_seconds=args.max_question_seconds or None,
                       max_question_calls=args.max_question_calls or None, **extra)  # type: ignore[arg-type]


def _token(args: argparse.Namespace) -> str | None:
    """The token clients must send: ``--token``, the first line of ``--token-file``, or ``$VIDAGENT_TOKEN``
    (None: no token). Its form is checked by ``ServeConfig.check_binding``."""
    if args.token_file is not None:
        try:
            _check_private(args.token_file.expanduser())
            lines = args.token_file.expanduser().read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise ServeSetupError(f"--token-file {args.token_file}: cannot read it ({error})") from None
        if not lines or not lines[0].strip():
            raise ServeSetupError(f"--token-file {args.token_file}: its first line is empty")
        return lines[0].strip()
    if args.token is not None:
        log.warning("the token given as --token is visible to other users in `ps`; use --token-file PATH or $%s",
                    TOKEN_ENV)
        return args.token
    return os.environ.get(TOKEN_ENV) or None


def _check_private(path: Path) -> None:
    """Refuse a token file that others may read or write, as ssh refuses such a private key: a warning scrolls
    away while the token it guards is already known to every user of the machine (POSIX only)."""
    if os.name != "posix":
        return
    mode = path.stat().st_mode
    if stat.S_ISREG(mode) and mode & 0o077:
        raise ServeSetupError(f"--token-file {path}: readable or writable by others (mode {stat.S_IMODE(mode):04o}); "
                              f"run `chmod 600 {path}` and choose a new token")


def _require_extra() -> None:
    missing = [name for name in ("fastapi", "uvicorn", "mcp") if importlib.util.find_spec(name) is None]
    if missing:
        raise ServeSetupError(f"{', '.join(missing)} not installed: pip install 'vidagent[serve]'")


def _serve(args: argparse.Namespace, settings_of: SettingsOf) -> int:
    _require_extra()
    from vidagent.server.run import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.max_edit_seconds > 0 or args.max_edits < 1:
        raise ServeSetupError("--max-edit-seconds must be above 0 and --max-edits at least 1")
    config = _config(args, settings_of, max_upload_bytes=int(args.max_upload_mb * 2**20),
                     max_edit_seconds=args.max_edit_seconds, max_edits=args.max_edits)
    config.check_binding()
    serve(config)
    return 0


def _mcp(args: argparse.Namespace, settings_of: SettingsOf) -> int:
    _require_extra()
    from vidagent.server.run import run_mcp

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = _config(args, settings_of)
    if args.transport == "http":
        config.check_binding()
    run_mcp(config, args.transport)
    return 0
