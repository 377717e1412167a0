"""The ``vidagent`` command line.

vidagent ask SOURCE [SOURCE ...] QUESTION [--choice TEXT ...] [--planner NAME] [--planner-option K=V ...]
             [--json] [--trace] [--experience none|semantic|procedural|all] [--memory-selection tools|llm|all]
             [--knowledge FILE|URL|web ...] [--budget calls=N,tokens=T,seconds=S,frames=F]
             (sources: videos or images; the last argument is the question)
vidagent index PATH [PATH ...] [--stage NAME ...] [--workers N] [--ray [ADDRESS]]   (videos or folders)
vidagent import CAPTIONS|PACK [--format F] [--namespace NAME] [--only FILE]   (memories without video files)
vidagent sql VIDEO QUERY [--json]
vidagent models install [NAME ...] | vidagent models list
vidagent eval DATASET_FILE [--videos DIR] [--planner NAME] ... | vidagent eval --compare RUN_DIR ...
vidagent export VIDEO [-o PACK]   (a video's memory as a portable pack; `vidagent import PACK` reads it)
vidagent clip VIDEO START END | highlight VIDEO OBJECT_ID | remove VIDEO OBJECT_ID | frames VIDEO START END [-o OUT]
vidagent experience list [VIDEO] | show ID | clear [VIDEO] [--kind KIND]   (`vidagent memory`: deprecated)
vidagent serve [--host 127.0.0.1] [--port 8000] [--videos DIR ...] [--token TOKEN]
vidagent mcp [--transport stdio|http] [--videos DIR ...]

Errors print one line on stderr and exit non-zero; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from vidagent.agent.answer import Answer
from vidagent.agent.library_question import DEFAULT_MAX_VIDEOS
from vidagent.agent.task import option_label
from vidagent.agent.learning.keeper import MODES as EXPERIENCE_MODES
from vidagent.config import MEMORY_SELECTIONS, Settings
from vidagent.errors import MemoryStoreError, VidagentError
from vidagent.import_cli import add_import_parser
from vidagent.index_cli import add_index_parser
from vidagent.llm.budget import Budget
from vidagent.memory.coverage import DEFAULT_EVERY_S
from vidagent.experience_cli import add_experience_parser
from vidagent.tools.base import EVIDENCE_KINDS
from vidagent.video.image import IMAGE_SUFFIXES
from vidagent.video.video import VIDEO_SUFFIXES

MEDIA_SUFFIXES = IMAGE_SUFFIXES + VIDEO_SUFFIXES + (".gif",)


class UsageError(VidagentError):
    """The command line is not one vidagent can run."""

    exit_code = 2


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings.from_env().with_overrides(
        home=getattr(args, "home", None), base_url=getattr(args, "base_url", None), model=getattr(args, "model", None),
        api_key=getattr(args, "api_key", None), cache=False if getattr(args, "no_cache", False) else None)
    selection = getattr(args, "memory_selection", None)
    return replace(settings, memory_selection=selection) if selection else settings


def _cmd_ask(args: argparse.Namespace) -> int:
    from vidagent.agent.planner import build_planner, parse_options
    from vidagent.session import Session

    if args.library:
        return _ask_library(args)
    if _asks_which_videos(args):
        print("vidagent: a question about which videos: answered over them as a library question (--library)",
              file=sys.stderr)
        return _ask_library(args)
    if args.max_videos is not None:
        raise UsageError("--max-videos goes with --library")
    sources, question = _sources_and_question([*args.sources, args.question])
    options = parse_options(args.planner_option)
    # built here so that a bad name or option is refused before any model loads
    chosen = build_planner(args.planner, options) if args.planner else None
    if chosen is not None and chosen.name == "random" and not args.choice:  # it would print an empty answer
        raise UsageError("the random baseline only picks among options: give them with --choice TEXT")
    with Session(_settings(args)) as session:  # no --planner: the session's one rule picks it, by the sources
        answer = session.ask(sources, question, args.choice or None, planner=args.planner, planner_options=options,
                             progress=not args.quiet, experience=args.experience, knowledge=args.knowledge or (),
                             budget=_budget(args.budget), check=args.check, glance=args.glance)
        if args.json:
            payload = answer.to_dict()
            if not args.trace:
                payload["trace"] = [{"id": step.id, "parent_id": step.parent_id, "type": step.kind,
                                     "summary": step.summary().splitlines()[0][:200]} for step in answer.trace]
            print(json.dumps(payload, indent=2, ensure_ascii=False), flush=True)
        else:
            _print_answer(answer, trace=args.trace)
        if args.complete:  # the answer is out; now the rest of each video's memory
            from vidagent.memory.builder import TEMPORAL_STAGES

            for source in answer.task.sources:
                if source.kind == "video" and Path(source.path).is_file():
                    session.index(source.path, TEMPORAL_STAGES, progress=not args.quiet)
    return 0


WHICH_VIDEOS = re.compile(r"\b(which|what)\s+(of\s+(these|the|my|those)\s+)?(videos|clips|files|recordings)\b",
                          re.IGNORECASE)


def _asks_which_videos(args: argparse.Namespace) -> bool:
    """Several videos (or folders), no options, no planner named, and a question that asks which of them: a
    library question, not one for a planner reading every video ("Which of these videos show a dog?")."""
    sources = list(args.sources)
    if len(sources) < 2 and not any(Path(source).is_dir() for source in sources):
        return False
    if args.choice or args.planner or args.planner_option or args.knowledge or args.glance is not None \
            or args.complete:
        return False
    if any(Path(source).suffix.lower() in IMAGE_SUFFIXES for source in sources):
        return False
    return bool(WHICH_VIDEOS.search(args.question))


def _ask_library(args: argparse.Namespace) -> int:
    from vidagent.agent.library_question import VideoFinding, spans_text
    from vidagent.session import Session

    mixed = [flag for flag, given in (("--choice", args.choice), ("--planner", args.planner),
                                      ("--planner-option", args.planner_option), ("--knowledge", args.knowledge),
                                      ("--glance", args.glance), ("--complete", args.complete)) if given]
    if mixed:
        raise UsageError(f"{mixed[0]} does not go with --library (a library question is answered by the search and "
                         f"one judgement per video)")
    max_videos = DEFAULT_MAX_VIDEOS if args.max_videos is None else args.max_videos
    if not 1 <= max_videos <= 100:
        raise UsageError("--max-videos must be between 1 and 100")

    def shown(finding: VideoFinding, number: int, total: int) -> None:
        if args.json:
            return
        verdict = "listed" if finding.listed else "left out"
        print(f"[{number}/{total}] {finding.name}: {verdict} ({finding.confidence:.0%}; {finding.evidence}) "
              f"{spans_text(finding)}", flush=True)

    with Session(_settings(args)) as session:
        answer = session.ask_library(args.question, args.sources, max_videos=max_videos, on_video=shown,
                                     progress=not args.quiet)
    if args.json:
        print(json.dumps(answer.to_dict(), indent=2, ensure_ascii=False), flush=True)
        return 0
    print(f"\nAnswer: {answer.text}")
    if answer.confidence is not None:
        print(f"Confidence: {answer.confidence:.0%}")
    if answer.listed:
        print("\nEvidence:")
        for finding in answer.listed:
            for moment in finding.moments[:3]:
                for line in moment.lines[:2]:
                    print(f"  {finding.name}  {line.start_s:6.1f}-{line.end_s:.1f} s  [{line.kind}] {line.text[:120]}")
    print(f"\n{answer.llm_calls} LLM calls, {answer.seconds:.1f} s")
    return 0


def _budget(text: str | None) -> Budget | None:
    if not text:
        return None
    try:
        return Budget.parse(text)
    except ValueError as error:
        raise UsageError(str(error)) from None


def _sources_and_question(inputs: Sequence[str]) -> tuple[list[str], str]:
    """``a.mp4 b.mp4 photo.jpg "QUESTION"``: every argument but the last is a source, the last the question."""
    if len(inputs) < 2:
        raise UsageError("give at least one video or image, then the question: vidagent ask VIDEO \"QUESTION\"")
    *sources, question = inputs
    if Path(question).suffix.lower() in MEDIA_SUFFIXES and Path(question).exists():
        raise UsageError(f"the last argument ({question}) is a file; the question comes last: "
                         f"vidagent ask {' '.join(inputs)} \"QUESTION\"")
    return sources, question


def _print_answer(answer: Answer, *, trace: bool) -> None:
    if answer.choice_index is not None:
        print(f"Answer: {option_label(answer.choice_index)}. {answer.text}")
    else:
        print(f"Answer: {answer.text}")
    for coverage in answer.artifacts.get("coverage", {}).values():  # answered from a partial memory
        print(f"Coverage: {coverage['text']}")
    if answer.abstained:
        print(f"Abstained: {answer.abstained} (the answer above is the best guess)")
    elif answer.confidence is not None:
        calibrated = answer.calibrated is not None
        print(f"Confidence: {answer.confidence:.0%}" + (" (the chance it is right, calibrated on development questions)"
                                                        if calibrated else " (the planner's own measure, not calibrated)"))
    if len(answer.candidates) > 1:
        print("Candidates:")
        for candidate in answer.candidates:
            reward = f", reward {candidate.reward:+.2f}" if candidate.reward is not None else ""
            print(f"  {candidate.text}  ({candidate.votes} vote{'s' if candidate.votes != 1 else ''}{reward})")
    if trace:
        print(f"\nTrace ({answer.planner}):")
        print(answer.trace.render())
    if answer.evidence:
        print("\nEvidence:")
        names = {source.id: Path(source.path).name for source in answer.task.sources}
        if answer.check is not None and answer.check.checked:
            print(f"  (checked: {answer.check.verdict}; + marks what the answer rests on)")
        for item in sorted(answer.evidence, key=lambda e: e.supports is not True)[:8]:  # what it rests on first
            text = item.text if len(item.text) <= 160 else item.text[:157] + "..."
            if item.kind != "description":  # a model's answer, speech, on-screen text, ...: never the video's caption
                text = f"[{EVIDENCE_KINDS.get(item.kind, item.kind)}] {text}"
            where = f"{names.get(item.source.split('@')[0].split('[')[0], '')}  " if len(names) > 1 else ""
            mark = "+ " if item.supports else "  "
            if item.where:  # a knowledge source's page, section, address or SQL: no time span
                print(f"{mark}{item.where}  {text}")
            else:
                print(f"{mark}{where}{item.start_s:6.1f}-{item.end_s:.1f} s  {text}")
    usage = answer.usage
    print(f"\n{usage.llm_calls} LLM calls ({usage.cached_calls} cached), "
          f"{usage.prompt_tokens}+{usage.completion_tokens} tokens, {usage.seconds:.1f} s in the LLM")


def _cmd_sql(args: argparse.Namespace) -> int:
    from vidagent.memory.sql import ReadOnlyQueries
    from vidagent.memory.store import Library
    from vidagent.video.video import Video

    settings = _settings(args)
    video = Video(args.video)
    with Library(settings.library_path) as library:
        if not library.stage_names(video.content_hash):
            raise MemoryStoreError(f"{args.video} is not indexed yet: run `vidagent index {args.video}`")
    with ReadOnlyQueries(settings.library_path, video.content_hash, max_rows=args.max_rows,
                         timeout_s=args.timeout) as queries:
        result = queries.run(args.query)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        print(result.to_text(max_rows=args.max_rows, max_chars=1 << 30))
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from vidagent.models import install

    settings = _settings(args)
    if args.models_command == "install":
        paths = install.install_all(settings.models_dir, names=args.names or None, progress=not args.quiet)
        for name, path in paths.items():
            print(f"{name}: {path}")
    else:
        from vidagent.models.inventory import model_inventory

        statuses = model_inventory(settings.models_dir)
        for status in statuses:
            print(status.line())
        if not install.installed_models(settings.models_dir):
            print(f"no models installed in {settings.models_dir}; run `vidagent models install`")
    return 0


def _cmd_settings(args: argparse.Namespace) -> int:
    """Every setting, the environment variables that set it, its value here, and whether it changes answers; then
    every planner's options (``planners.<planner>.<option>``), their defaults and ranges."""
    from vidagent.agent.planner import planner_options

    described = _settings(args).described()
    options = planner_options()
    if args.json:
        print(json.dumps([{"name": d.name, "variables": list(d.variables), "value": d.value, "answers": d.answers,
                           "set": [v for v in d.variables if os.environ.get(v)]} for d in described]
                         + [{"name": f"planners.{o.planner}.{o.name}", "variables": [], "value": o.default,
                             "answers": True, "set": [], "planner_option": o.name,
                             "range": list(o.bounds) if o.bounds else None} for o in options],
                         ensure_ascii=False, default=str))
        return 0
    rows = [("=" if d.answers else " ", d.name, json.dumps(d.value, default=str),
             ", ".join(f"{v}*" if os.environ.get(v) else v for v in d.variables) or "-") for d in described]
    rows += [("=", f"planners.{o.planner}.{o.name}", json.dumps(o.default, default=str),
              f"--planner-option {o.name}=VALUE" + (f" ({_number(o.bounds[0])} to {_number(o.bounds[1])})"
                                                     if o.bounds else "")) for o in options]
    name_width, value_width = max(len(r[1]) for r in rows), min(40, max(len(r[2]) for r in rows))
    print("= changes answers (in an eval run's identity); * set in this environment; planners.*: a planner's "
          "options, their defaults")
    for mark, name, value, variables in rows:
        print(f"{mark} {name:<{name_width}}  {value:<{value_width}}  {variables}")
    return 0


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vidagent", description="Answer questions about videos.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--home", help="folder for models, the library and caches (default: user cache dir)")
    sub = parser.add_subparsers(dest="command", required=True)

    from vidagent.agent.planner import EMBEDDED_DEFAULT_OPTIONS, default_description, planner_names
    from vidagent.eval.cli import add_eval_parser, add_planner_options

    def add_llm_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", help="local model name (qwen2.5-1.5b, qwen2.5-0.5b) or endpoint model id")
        p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
        p.add_argument("--api-key", help="API key for the endpoint (default: $VIDAGENT_LLM_API_KEY/$OPENAI_API_KEY)")
        p.add_argument("--no-cache", action="store_true", help="do not reuse cached LLM responses")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    ask = sub.add_parser("ask", help="answer a question about videos or images",
                         description="Every argument but the last names a video or an image; the last one is the "
                                     f"question. Unless --planner names one, the planner is: {default_description()}.")
    ask.add_argument("sources", nargs="*", metavar="SOURCE", help="a video or an image (give several for peil); "
                                                                  "with --library: videos or folders to ask over")
    ask.add_argument("question", metavar="QUESTION", help="the question, always the last argument")
    ask.add_argument("--choice", action="append", metavar="TEXT", help="an answer option (repeat for each)")
    ask.add_argument("--library", action="store_true",
                     help="ask over many videos ('which videos show a dog, and when?'): the whole library, or the "
                          "videos and folders given; lists the videos and their moments, with evidence")
    ask.add_argument("--max-videos", type=int, default=None, metavar="N",
                     help=f"with --library: judge at most N candidate videos (default {DEFAULT_MAX_VIDEOS})")
    ask.add_argument("--json", action="store_true", help="print one JSON object")
    ask.add_argument("--trace", action="store_true", help="include every reasoning step (the planner's tree)")
    add_planner_options(ask, planner_names(), default=None, default_note=default_description())
    ask.add_argument("--experience", choices=EXPERIENCE_MODES, default=None,
                     help="memory across questions to replay and keep (default: none, or $VIDAGENT_EXPERIENCE)")
    ask.add_argument("--memory-selection", choices=MEMORY_SELECTIONS, default=None,
                     help="build the object memory when a tool first reads it, without a model call (tools), "
                          "ahead when the model says the question needs it (llm), or always ahead (all) "
                          "(default: tools, or $VIDAGENT_MEMORY_SELECTION)")
    ask.add_argument("--budget", metavar="calls=N,tokens=T,seconds=S,frames=F",
                     help="bound the question's model work (every call counted); once spent, the planner answers "
                          "with what it has")
    ask.add_argument("--check", action=argparse.BooleanOptionalAction, default=None,
                     help="re-read the evidence the answer cites and abstain when it does not support the answer (for "
                          "options: when another option is likelier on it) "
                          "(default: off, or on with VIDAGENT_CHECK=1)")
    ask.add_argument("--knowledge", action="append", metavar="FILE|URL|web",
                     help="knowledge the planner may consult (repeat for each): a table (csv, tsv, xlsx, parquet, "
                          "sqlite), a document (pdf, md, html, txt), an http(s) URL of one, or 'web' (the search at "
                          "$VIDAGENT_WEB_SEARCH); FILE#TEXT describes it to the planner")
    glancing = ask.add_mutually_exclusive_group()
    glancing.add_argument("--glance", nargs="?", type=float, const=DEFAULT_EVERY_S, default=None, metavar="SECONDS",
                          help="a video not indexed yet is answered at once from a frame described every SECONDS "
                               f"(default {DEFAULT_EVERY_S:g}), the stretches the planner reads described in full "
                               "first; the answer says what it saw (Coverage). The default for a video of 2 minutes "
                               "or more ($VIDAGENT_GLANCE_AFTER seconds), at no more frames than the default planner "
                               f"reads lines ({EMBEDDED_DEFAULT_OPTIONS['lines']})")
    glancing.add_argument("--no-glance", dest="glance", action="store_const", const=0.0,
                          help="index a video not indexed yet whole before answering, however long it is")
    ask.add_argument("--complete", action="store_true",
                     help="after answering, finish indexing the videos (the temporal memory, resumed from the glance)")
    add_llm_options(ask)
    ask.set_defaults(run=_cmd_ask)

    add_index_parser(sub, _settings)
    add_import_parser(sub, _settings)
    from vidagent.search_cli import add_search_parser

    add_search_parser(sub, _settings)

    sql = sub.add_parser("sql", help="run a read-only SQL query on a video's memory (see docs/memory-schema.md)")
    sql.add_argument("video")
    sql.add_argument("query", help="one SELECT statement; tables hold only this video's rows")
    sql.add_argument("--json", action="store_true", help='print {"columns": [...], "rows": [[...], ...]}')
    sql.add_argument("--max-rows", type=int, default=1000, help="rows to fetch at most (default 1000)")
    sql.add_argument("--timeout", type=float, default=10.0, help="seconds before the query is stopped")
    sql.set_defaults(run=_cmd_sql)

    models = sub.add_parser("models", help="install or list the offline models")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    install = models_sub.add_parser("install", help="download, assemble and verify offline models")
    install.add_argument("names", nargs="*", help="models to install (default: the standard set)")
    install.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    models_sub.add_parser("list", help="list installed models")
    models.set_defaults(run=_cmd_models)

    shown = sub.add_parser("settings", help="list every setting: its value, its environment variable, whether it "
                                            "changes answers")
    shown.add_argument("--json", action="store_true", help="one JSON list")
    shown.set_defaults(run=_cmd_settings)

    add_eval_parser(sub)
    add_experience_parser(sub, _settings)
    from vidagent.pack_cli import add_export_parser

    add_export_parser(sub, _settings)
    from vidagent.utility_cli import add_utility_parsers

    add_utility_parsers(sub, _settings)
    from vidagent.server.cli import add_serve_parsers

    add_serve_parsers(sub, add_llm_options, _settings)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except VidagentError as error:
        if args.debug:
            raise
        print(f"vidagent: error: {error}", file=sys.stderr)
        return error.exit_code
    except ValueError as error:
        if args.debug:
            raise
        print(f"vidagent: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vidagent: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`vidagent ask ... --json | head`): stop quietly, as Unix tools do
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a tool the pipe stopped
    except Exception as error:  # a bug: still one line, with the way to see more
        if args.debug:
            raise
        print(f"vidagent: internal error: {error.__class__.__name__}: {error} (rerun with --debug)", file=sys.stderr)
        return 70


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush meets no closed pipe either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
