"""How much of the permuted choice's gain each order buys: a ``choose_by=permuted`` run read back.

    .venv/bin/python bench/option_orders.py RUN_FOLDER [--against OTHER_RUN_FOLDER ...]

A run with ``--planner-option choose_by=permuted`` keeps, in each answer's artifacts, every cyclic order's
option probabilities (by option as given). Without another model call this prints the accuracy of choosing
by the first k orders averaged (k = 1: the options in their given order only, shown once), for k = 1 up to
all of them; how often each position was chosen (a position the key rarely uses but the model often picks is
the bias the orders cancel); and, paired on the same questions, any other runs given with ``--against``
(e.g. the same planner choosing by its generated text).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def read_rows(folder: Path) -> dict[str, dict]:
    rows = {}
    for line in (folder / "results.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["id"]] = row
    return rows


def chosen(per_order: list[list[float]], k: int) -> int:
    """The option with the highest probability averaged over the first ``k`` orders."""
    used = per_order[:k]
    means = [sum(order[i] for order in used) / len(used) for i in range(len(used[0]))]
    return max(range(len(means)), key=means.__getitem__)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--against", type=Path, action="append", default=[])
    args = parser.parse_args()
    rows = {key: row for key, row in read_rows(args.run).items()
            if (row.get("artifacts") or {}).get("option_probabilities") and row["gold"].get("answer_index") is not None}
    if not rows:
        print(f"{args.run}: no answer carries option probabilities (was it run with choose_by=permuted?)")
        return 1
    orders = min(len(row["artifacts"]["option_probabilities"]) for row in rows.values())
    print(f"{len(rows)} questions with {orders} orders each\n")
    print("| orders averaged | accuracy % | right |")
    print("|---|---|---|")
    for k in range(1, orders + 1):
        right = sum(chosen(row["artifacts"]["option_probabilities"], k) == row["gold"]["answer_index"]
                    for row in rows.values())
        print(f"| {k} | {100 * right / len(rows):.1f} | {right} |")
    count = len(next(iter(rows.values()))["choices"])
    keys = Counter(row["gold"]["answer_index"] for row in rows.values())
    first = Counter(chosen(row["artifacts"]["option_probabilities"], 1) for row in rows.values())
    every = Counter(chosen(row["artifacts"]["option_probabilities"], orders) for row in rows.values())
    print("\n| position | in the key | chosen, 1 order | chosen, all orders |")
    print("|---|---|---|---|")
    for position in range(count):
        print(f"| {position} | {keys[position]} | {first[position]} | {every[position]} |")
    for other in args.against:
        theirs = read_rows(other)
        shared = [key for key in rows if key in theirs]
        if not shared:
            print(f"\n{other}: no question in common")
            continue
        mine = {key: chosen(rows[key]["artifacts"]["option_probabilities"], orders) == rows[key]["gold"]["answer_index"]
                for key in shared}
        them = {key: bool(theirs[key]["correct"]) for key in shared}
        both = sum(mine[key] and them[key] for key in shared)
        print(f"\nagainst {other.name} on {len(shared)} shared questions: permuted {sum(mine.values())}, "
              f"{other.name} {sum(them.values())}; both right {both}, only permuted {sum(mine.values()) - both}, "
              f"only {other.name} {sum(them.values()) - both}")
        positions = Counter(theirs[key].get("choice_index") for key in shared)
        print(f"  {other.name} chose by position: " + ", ".join(f"{p}: {positions[p]}" for p in range(count)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
