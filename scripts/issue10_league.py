#!/usr/bin/env python3
"""Issue 10's league, side by side for several `dqngpu experiment` outputs.

    python3 scripts/issue10_league.py DIR [DIR ...]

Reads each DIR/summary.csv and prints, per (cell, class), dqngpu's mean JCT and makespan
divided by the best heuristic's there (sjf, fifo, tetris, bestfit, sjf-bestfit, lucid,
greedy); `*` marks a pair outside issue 10's lines (JCT <= 1.01x and makespan <= 1.02x),
`+` one with JCT at least 5% lower. The last line: [within, 5% better] per DIR. Used to
measure the recipe's spread over training seeds (docs/RL.md).
"""
import csv, sys
H = ["sjf", "fifo", "tetris", "bestfit", "sjf-bestfit", "lucid", "greedy"]
def load(d):
    rows = {}
    for r in csv.DictReader(open(d + "/summary.csv")):
        rows.setdefault((r["cell"], r["workload"]), {})[r["scheduler"]] = (float(r["mean_jct_s_mean"]), float(r["makespan_s_mean"]))
    return rows
dirs = sys.argv[1:]
tabs = [load(d) for d in dirs]
keys = list(tabs[0].keys())
tot = [[0, 0] for _ in dirs]
for k in keys:
    line = f"{k[0]:20} {k[1]:10}"
    for i, t in enumerate(tabs):
        rows = t[k]
        bj = min(rows[h][0] for h in H); bm = min(rows[h][1] for h in H)
        j, m = rows["dqngpu"][0] / bj, rows["dqngpu"][1] / bm
        ok = j <= 1.01 and m <= 1.02
        tot[i][0] += ok; tot[i][1] += j <= 0.95
        line += f" | {j:5.3f} {m:5.3f}{' ' if ok else '*'}{'+' if j<=0.95 else ' '}"
    print(line)
print("totals", tot)
