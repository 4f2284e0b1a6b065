#!/usr/bin/env python3
"""The H100 fit with each pair's demands taken from the solos of its own run.

`dqngpu calibrate` takes one `--solo` file, so `contention-h100` was fitted with run 1's solo
GPU utils for all 21 pairs, run 2's eight included (docs/INTERFERENCE.md). This script gives
run 2's solos (`solo_profiles_run2.csv`) their own keys (dataset + "-run2", in the solo file and
in run 2's pairs), writes the two files to a temporary folder and runs `dqngpu calibrate` on
them, so each pair is joined with its own run's solos. The model family (the `model` column) is
unchanged, so leave-one-family-out holds out the same pairs.

    python3 scripts/h100_fit_own_solos.py [path/to/dqngpu]
"""
import csv
import os
import subprocess
import sys
import tempfile

DATA = "data/gpu-pairs-h100"


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/dqngpu"
    solo = list(csv.DictReader(open(os.path.join(DATA, "solo_profiles.csv"))))
    run2 = list(csv.DictReader(open(os.path.join(DATA, "solo_profiles_run2.csv"))))
    for r in run2:
        r["dataset"] += "-run2"
    pairs = list(csv.DictReader(open(os.path.join(DATA, "colocate_pairs.csv"))))
    for p in pairs:
        if p["run"] == "2":
            p["dataset1"] += "-run2"
            p["dataset2"] += "-run2"
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for name, rows in (("solo.csv", solo + run2), ("pairs.csv", pairs)):
            path = os.path.join(tmp, name)
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
                w.writeheader()
                w.writerows(rows)
            files.append(path)
        subprocess.run([binary, "calibrate", "--pairs", files[1], "--solo", files[0]], check=True)


if __name__ == "__main__":
    main()
