#!/usr/bin/env python3
"""Measured against simulated: the output of scripts/device-real-vs-sim.sh (real jobs placed by
`dqngpu serve` on a real GPU) beside `dqngpu simulate` on the same jobs and recorded profiles.

    python3 scripts/real_vs_sim.py OUT [path/to/dqngpu]      (MODEL=FILE: dqngpu's checkpoint,
                                                             default .devbin/m.safetensors)

For each scheduler the device run used (OUT/SCHEDULER.json), prints the measured mean JCT
(finish - submit) and makespan (last finish - first submit), and the simulator's under
`contention-h100` and `contention` (all jobs submitted at t = 0, one H100, OUT/lib as the
library, OUT/jobs.csv as the job set), with the simulated / measured ratio.
"""
import json
import os
import subprocess
import sys


def measured(path):
    jobs = json.load(open(path))["jobs"]
    if not jobs or any(j["state"] != "succeeded" for j in jobs):
        sys.exit(f"{path}: not every job succeeded: {[(j['id'], j['state']) for j in jobs]}")
    t0 = min(j["submitted_at"] for j in jobs)
    jct = sum(j["finished_at"] - j["submitted_at"] for j in jobs) / len(jobs)
    return jct, max(j["finished_at"] for j in jobs) - t0


def simulated(binary, out, scheduler, model):
    cmd = [binary, "simulate", "--library", os.path.join(out, "lib"), "--jobs", os.path.join(out, "jobs.csv"),
           "--gpus", "h100:1", "--interference", model, "--scheduler", scheduler, "--format", "json"]
    if scheduler in ("dqngpu", "dqngpu-plan"):
        cmd += ["--model", os.environ.get("MODEL", ".devbin/m.safetensors")]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    r = r[0] if isinstance(r, list) else r
    return r["mean_jct_s"], r["makespan_s"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else "target/release/dqngpu"
    runs = sorted(f[:-5] for f in os.listdir(out) if f.endswith(".json") and os.path.isdir(os.path.join(out, f"db-{f[:-5]}")))
    print(f"{'scheduler':10} {'measured JCT / makespan':>24} {'sim h100 fit':>16} {'ratio':>12} {'sim Lucid fit':>16} {'ratio':>12}")
    for s in runs:
        mj, mm = measured(os.path.join(out, f"{s}.json"))
        hj, hm = simulated(binary, out, s, "contention-h100")
        lj, lm = simulated(binary, out, s, "contention")
        print(f"{s:10} {mj:10.1f} / {mm:9.1f} s {hj:7.1f} / {hm:6.1f} {hj / mj:5.2f} / {hm / mm:4.2f}"
              f" {lj:7.1f} / {lm:6.1f} {lj / mj:5.2f} / {lm / mm:4.2f}")


if __name__ == "__main__":
    main()
