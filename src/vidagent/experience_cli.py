"""``vidagent experience``: list, show and clear the experience kept across questions.

vidagent experience list [VIDEO] [--kind KIND] [--scope SCOPE | --all-scopes] [--json]
vidagent experience show ID [--json]
vidagent experience clear [VIDEO] [--kind KIND] [--scope SCOPE | --all-scopes]

VIDEO is a video file (its content names it) or the start of a video id as ``list`` shows it.
``--scope`` picks an evaluation run's own experience (``eval:<run>``); the default is the user's.

"Memory" names the video memory (``vidagent index``, ``export``, ``import``); ``vidagent memory ...``,
this command's old name, still works for one release and says so on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

from vidagent.agent.steps import Trace
from vidagent.config import Settings
from vidagent.errors import VidagentError
from vidagent.experience.store import KINDS, Entry, ExperienceStore

SHORT_ID = 12
DEPRECATED_NAME = "memory"  # the command's name until it was renamed; removed in the next release


class ExperienceCommandError(VidagentError):
    exit_code = 2


def add_experience_parser(subparsers: Any, settings_of: Callable[[argparse.Namespace], Settings]) -> None:
    """``vidagent experience``, and the same command under its old name with a deprecation notice."""
    for name in ("experience", DEPRECATED_NAME):
        _add_parser(subparsers, name, settings_of)


def _add_parser(subparsers: Any, name: str, settings_of: Callable[[argparse.Namespace], Settings]) -> None:
    deprecated = name == DEPRECATED_NAME
    what = "list, show or clear the experience kept across questions"
    parser = subparsers.add_parser(name, help=f"deprecated: use `vidagent experience` ({what})" if deprecated
                                   else what)
    commands = parser.add_subparsers(dest="experience_command", required=True)

    def filters(p: argparse.ArgumentParser) -> None:
        p.add_argument("video", nargs="?", help="a video file, or the start of a video id (default: every video)")
        p.add_argument("--kind", choices=KINDS, help="only this kind of entry")
        scope = p.add_mutually_exclusive_group()
        scope.add_argument("--scope", default="", help="whose experience: '' the user's (default), eval:<run> a run's")
        scope.add_argument("--all-scopes", action="store_true", help="the user's and every evaluation run's")

    listing = commands.add_parser("list", help="list kept entries, oldest first")
    filters(listing)
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    show = commands.add_parser("show", help="show one entry with its provenance (question, answer, model, trace)")
    show.add_argument("id", type=int)
    show.add_argument("--json", action="store_true")
    clear = commands.add_parser("clear", help="delete the entries named (all of the user's when nothing is named)")
    filters(clear)
    parser.set_defaults(run=lambda args: _run(args, settings_of(args), deprecated=deprecated))


def _run(args: argparse.Namespace, settings: Settings, *, deprecated: bool = False) -> int:
    if deprecated:
        print(f"vidagent: `vidagent {DEPRECATED_NAME}` is deprecated and goes in the next release; "
              f"use `vidagent experience {args.experience_command}`", file=sys.stderr)
    if not settings.library_path.is_file():
        raise ExperienceCommandError(f"no library at {settings.library_path}: nothing has been kept yet")
    store = ExperienceStore(settings.library_path)
    try:
        if args.experience_command == "show":
            return _show(store, args.id, as_json=args.json)
        scope = None if args.all_scopes else args.scope
        video_id = _video_id(store, args.video) if args.video else None
        if args.experience_command == "list":
            return _list(store.entries(scope=scope, kind=args.kind, video_id=video_id), as_json=args.json)
        removed = store.clear(scope=scope, kind=args.kind, video_id=video_id)
        named = " ".join(part for part in (args.kind or "", f"about {video_id[:SHORT_ID]}" if video_id else "",
                                            "in every scope" if scope is None else f"in scope {scope!r}") if part)
        print(f"cleared {removed} entr{'y' if removed == 1 else 'ies'} ({named})")
        return 0
    finally:
        store.close()


def _video_id(store: ExperienceStore, given: str) -> str:
    """A video's id from its file (by content) or from the start of an id that is kept."""
    if Path(given).is_file():
        from vidagent.video.image import open_media

        return open_media(given).content_hash
    matches = [video_id for video_id in store.video_ids() if video_id.startswith(given)]
    if len(matches) != 1:
        found = "no kept entry is about" if not matches else f"{len(matches)} videos match"
        raise ExperienceCommandError(f"{given!r}: {found} such a video (give a video file or a longer id)")
    return matches[0]


def _list(entries: list[Entry], *, as_json: bool) -> int:
    if as_json:
        for entry in entries:
            print(json.dumps(entry.to_dict(with_provenance=False), ensure_ascii=False))
        return 0
    if not entries:
        print("no entries kept")
        return 0
    for entry in entries:
        about = entry.video_id[:SHORT_ID] if entry.video_id else "-"
        scope = f" [{entry.scope}]" if entry.scope else ""
        text = " ".join(entry.text.split())
        print(f"#{entry.entry_id} {entry.kind} {entry.status}{scope} video={about} type={entry.task_type or '-'} "
              f"planner={entry.planner}\n    Q: {entry.question[:100]}\n    {text[:160]}")
    return 0


def _show(store: ExperienceStore, entry_id: int, *, as_json: bool) -> int:
    entry = store.get(entry_id)
    if entry is None:
        raise ExperienceCommandError(f"no entry #{entry_id}")
    if as_json:
        print(json.dumps(entry.to_dict(), ensure_ascii=False, indent=2))
        return 0
    data = entry.to_dict(with_provenance=False)
    for key in ("entry_id", "kind", "status", "scope", "planner", "video_id", "task_type", "question", "answer",
                "checked_by", "attempts", "model"):
        print(f"{key}: {data[key]}")
    print(f"text: {entry.text}")
    provenance = dict(entry.provenance)
    verdict = provenance.get("verdict")
    if verdict:
        print(f"validation: {'passed' if verdict.get('passed') else 'failed'} ({verdict.get('mode')}): "
              f"{verdict.get('reason')}")
    if provenance.get("entries"):
        print(f"abstracted from: {', '.join(f'#{i}' for i in provenance['entries'])}")
    steps = provenance.get("trace") or []
    if steps:
        print(f"trace ({len(steps)} steps):")
        print(textwrap.indent(Trace.from_list(steps).render(max_chars=200), "  "))
    return 0

