"""A question over a library, timed: seconds to the first listed video and to the whole answer, and whether every
clip that shows what was asked is listed.

    VIDAGENT_LIBRARY=... .venv/bin/python bench/library_question.py "Which of these videos show a dog, and at what times?" \
        --expect 01_dog.mp4 example1.mp4 skateboarding_dog.mp4 2.avi

Runs ``Session.ask_library`` with the settings' chat model (the embedded one by default) over the library named by
the settings; the library search's index is synced first and that time is reported apart (a library searched
before has nothing to sync).
"""

from __future__ import annotations

import argparse
import time

from vidagent.agent.library_question import VideoFinding, spans_text
from vidagent.config import Settings
from vidagent.memory.library_search import LibrarySearch
from vidagent.session import Session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question")
    parser.add_argument("--expect", nargs="*", default=[], help="file names of the clips that should be listed")
    args = parser.parse_args()
    settings = Settings.from_env()
    started = time.perf_counter()
    with LibrarySearch.open(settings) as search:
        synced = search.sync()
    sync_s = time.perf_counter() - started
    first: list[float] = []
    started = time.perf_counter()

    def seen(finding: VideoFinding, number: int, total: int) -> None:
        at = time.perf_counter() - started
        if finding.listed and not first:
            first.append(at)
        print(f"  {at:6.1f} s  [{number}/{total}] {finding.name}: {'listed' if finding.listed else 'left out'} "
              f"({finding.confidence:.0%}, {finding.evidence}) {spans_text(finding)}", flush=True)

    with Session(settings) as session:
        answer = session.ask_library(args.question, on_video=seen)
    total = time.perf_counter() - started
    listed = {finding.name for finding in answer.listed}
    missing = sorted(set(args.expect) - listed)
    extra = sorted(listed - set(args.expect)) if args.expect else []
    print(f"index sync {sync_s:.1f} s ({len(synced.updated)} videos taken in); first listed video "
          f"{first[0] if first else float('nan'):.1f} s; whole answer {total:.1f} s; {answer.llm_calls} LLM calls")
    print(f"answer: {answer.text} (confidence {answer.confidence if answer.confidence is None else round(answer.confidence, 2)})")
    if args.expect:
        print(f"expected clips listed: {len(set(args.expect) & listed)}/{len(args.expect)}; missing {missing or 'none'}; "
              f"listed but not expected {extra or 'none'}")


if __name__ == "__main__":
    main()
