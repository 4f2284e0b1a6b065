#!/usr/bin/env python3
"""The interference model's error on measured pairs, split by how busy the pair is.

Computes: for each pair, the summed solo GPU util of its two jobs (from the solo file); the
per-job MAPE, `mean |pred - measured| / measured` as `dqngpu calibrate` computes it, in bins of
that sum (0-50, 50-100, 100-150, above 150%), for three predictors: `contention` (the
predictions of `dqngpu interference predict`, so the shipped model and parameters), fair share
of util above 100% (each job 100 / sum(util)) and no slowdown (1.0). Also the signed mean error
of `contention` per bin. Copied from the audit of 2026-11-28 (its `fit.py`, docs/INTERFERENCE.md
"Error by load"), with the contention column taken from the binary rather than re-implemented.

    python3 scripts/mape_by_load.py [path/to/dqngpu] [--model contention|contention-h100]
                                    [--pairs FILE --solo FILE]       (default: the Lucid files)
"""
import csv
import io
import subprocess
import sys


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    pos = [a for i, a in enumerate(sys.argv[1:], 1) if not a.startswith("--") and not sys.argv[i - 1].startswith("--")]
    binary = pos[0] if pos else "target/release/dqngpu"
    model = arg("--model", "contention")
    pairs = arg("--pairs", "data/lucid/colocate_pairs.csv")
    solo = arg("--solo", "data/lucid/solo_profiles.csv")
    util = {}
    for r in csv.DictReader(open(solo)):
        util[(r["model"], r["dataset"], r["batchsize"], r["amp"])] = float(r["gpu_util"])
    out = subprocess.run([binary, "interference", "predict", "--model", model, "--pairs", pairs, "--solo", solo],
                         check=True, capture_output=True, text=True).stdout
    bins = [(0, 50), (50, 100), (100, 150), (150, float("inf"))]
    acc = {b: {"n": 0, "contention": 0.0, "fair": 0.0, "none": 0.0, "signed": 0.0} for b in bins + ["all"]}
    for r in csv.DictReader(io.StringIO(out)):
        u = [util[(r[f"model{k}"], r[f"dataset{k}"], r[f"batchsize{k}"], r[f"amp{k}"])] for k in (1, 2)]
        total = sum(u)
        fair = 100.0 / total if total > 100 else 1.0
        b = next(b for b in bins if b[0] <= total < b[1])
        for k in (1, 2):
            meas, pred = float(r[f"speed{k}"]), float(r[f"pred_speed{k}"])
            for key in (b, "all"):
                a = acc[key]
                a["n"] += 1
                a["contention"] += abs(pred - meas) / meas
                a["fair"] += abs(fair - meas) / meas
                a["none"] += abs(1.0 - meas) / meas
                a["signed"] += (pred - meas) / meas
    print(f"{pairs}, `{model}`: per-job MAPE by the pair's summed solo GPU util")
    print(f"{'summed util':>12} {'speeds':>7} {'contention':>11} {'fair share':>11} {'no slowdown':>12} {'signed':>8}")
    for key in bins + ["all"]:
        a = acc[key]
        if not a["n"]:
            continue
        name = "all" if key == "all" else (f">{key[0]}%" if key[1] == float("inf") else f"{key[0]}-{key[1]}%")
        pct = {k: 100 * a[k] / a["n"] for k in ("contention", "fair", "none", "signed")}
        print(f"{name:>12} {a['n']:7d} {pct['contention']:10.1f}% {pct['fair']:10.1f}% {pct['none']:11.1f}%"
              f" {pct['signed']:+7.1f}%")


if __name__ == "__main__":
    main()
