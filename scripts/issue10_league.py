#!/usr/bin/env python3
"""Issue 10's league for dqngpu, side by side for several `dqngpu experiment` outputs.

    python3 scripts/issue10_league.py DIR [DIR ...]

Reads each DIR/league.csv (written by the experiment: ratios to the best heuristic and the
lines, computed once in crates/experiment/src/league.rs) and prints, per (cell, class),
dqngpu's mean JCT and makespan ratios; `*` marks a pair outside issue 10's lines, `+` one
with JCT at least 5% lower, `!` one where a heuristic beats it on both metrics by more than
1% (named at the end of the line), `~` after the class a pair where no heuristic is within
both lines either (files from before 2026-11-27 lack these two columns; they are then left
out), `0` after it a pair where no policy can be 5% better (the best heuristic is within 5%
of the mean-JCT lower bound: `jct_room` < 1/0.95; files from before 2026-11-28 lack it). The
last line: within / 5% better per DIR, and 5% better among the pairs with room for it. Used to measure the recipe's spread over
training seeds (docs/RL.md). SCHEDULER=dqngpu-plan reads that scheduler's rows instead.
"""
import csv
import os
import sys

NAME = os.environ.get("SCHEDULER", "dqngpu")


def dqngpu_rows(out_dir):
    """{(cell, class): row} of NAME in out_dir/league.csv."""
    with open(f"{out_dir}/league.csv", newline="") as f:
        return {(r["cell"], r["class"]): r for r in csv.DictReader(f) if r["scheduler"] == NAME}


def has_room(row):
    """Whether the bound leaves room for a 5% lower mean JCT (true where it is not recorded)."""
    return 0.95 * float(row.get("jct_room") or "inf") >= 1.0


def main():
    dirs = sys.argv[1:]
    if not dirs:
        sys.exit("usage: issue10_league.py DIR [DIR ...]")
    tables = [dqngpu_rows(d) for d in dirs]
    totals = [[0, 0, 0, 0] for _ in dirs]
    for key in tables[0]:
        conflicting = tables[0][key].get("a_rule_within") == "false"
        line = f"{key[0]:20} {key[1]:10}{'~' if conflicting else ' '}{' ' if has_room(tables[0][key]) else '0'}"
        beaten = []
        for i, table in enumerate(tables):
            r = table[key]
            if r.get("beaten_on_both_by"):
                beaten.append(f"{i + 1}:{r['beaten_on_both_by']}")
            within, better = r["within"] == "true", r["better_by_5pct"] == "true"
            room = has_room(r)
            totals[i][0] += within
            totals[i][1] += better
            totals[i][2] += room
            totals[i][3] += better and room
            line += f" | {float(r['jct_ratio']):5.3f} {float(r['makespan_ratio']):5.3f}"
            line += (" " if within else "*") + ("+" if better else " ")
            line += "!" if r.get("beaten_on_both_by") else " "
        print(line + (f"  beaten by {' '.join(beaten)}" if beaten else ""))
    print("within / 5% better: " + "   ".join(f"{w}/{len(tables[i])} {b}/{len(tables[i])}"
                                                for i, (w, b, _, _) in enumerate(totals)))
    print("5% better where there is room for it: " + "   ".join(f"{rb}/{r}" for (_, _, r, rb) in totals))


if __name__ == "__main__":
    main()
