#!/usr/bin/env python3
"""Measured against simulated: the output of scripts/device-real-vs-sim.sh (real jobs placed by
`dqngpu serve` on a real GPU) beside `dqngpu simulate` on the same jobs and recorded profiles.

    python3 scripts/real_vs_sim.py OUT [path/to/dqngpu]      (MODEL=FILE: dqngpu's checkpoint,
                                                             default .devbin/m.safetensors, made
                                                             by `dqngpu train -o
                                                             .devbin/m.safetensors` (defaults,
                                                             seed 1, 2-7 minutes);
                                                             GPUS: the simulated card, default the
                                                             one the profiles were recorded on;
                                                             STEP: the simulator's --step-s,
                                                             default 1 s)

OUT is one device run, or holds several (OUT/run1, OUT/run2, ...) of the same jobs on the same
profiles (OUT/lib, OUT/jobs.csv); the measured figures are then the median over the runs.

For each scheduler the device run used (OUT/SCHEDULER.json), prints the measured mean JCT
(finish - submit) and makespan (last finish - first submit), and the simulator's under
`contention-h100` and `contention` (all jobs submitted at t = 0, one card, OUT/lib as the
library, OUT/jobs.csv as the job set), with the simulated / measured ratio. A scheduler that
needs a model (dqngpu, dqngpu-plan) is left out, with a line that says so, when MODEL is missing.
"""
import json
import os
import statistics
import subprocess
import sys


def measured(jobs):
    """Mean JCT and makespan of one schedule's jobs, or None (with the reason) if a job did not
    succeed."""
    if not jobs or any(j["state"] != "succeeded" for j in jobs):
        return None, f"not every job succeeded: {[(j['id'], j['state']) for j in jobs]}"
    t0 = min(j["submitted_at"] for j in jobs)
    jct = sum(j["finished_at"] - j["submitted_at"] for j in jobs) / len(jobs)
    return (jct, max(j["finished_at"] for j in jobs) - t0), None


def gpus_of(lib):
    """The simulated card: the one the profiles were recorded on (GPUS overrides)."""
    if os.environ.get("GPUS"):
        return os.environ["GPUS"]
    for f in sorted(os.listdir(lib)):
        if f.endswith(".json"):
            name = (json.load(open(os.path.join(lib, f))).get("recorded_on") or {}).get("gpu_name", "")
            return "h200:1" if "H200" in name else "h100:1"
    return "h100:1"


NEEDS_MODEL = ("dqngpu", "dqngpu-plan")


def model_file():
    return os.environ.get("MODEL", ".devbin/m.safetensors")


def simulated(binary, out, scheduler, model):
    lib = os.path.join(out, "lib")
    cmd = [binary, "simulate", "--library", lib, "--jobs", os.path.join(out, "jobs.csv"),
           "--gpus", gpus_of(lib), "--interference", model, "--scheduler", scheduler, "--format", "json"]
    if scheduler in NEEDS_MODEL:
        cmd += ["--model", model_file()]
    if os.environ.get("STEP"):
        cmd += ["--step-s", os.environ["STEP"]]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    r = r[0] if isinstance(r, list) else r
    return r["mean_jct_s"], r["makespan_s"], r["jobs"]


def schedules(run):
    """SCHEDULER -> (path, jobs) of each `GET /v1/jobs` the device script saved in one run's
    directory, the jobs in id (submission) order."""
    found = {}
    for f in sorted(os.listdir(run)):
        if f.endswith(".json"):
            path = os.path.join(run, f)
            try:
                d = json.load(open(path))
            except (ValueError, OSError):
                continue
            if isinstance(d, dict) and "jobs" in d:
                found[f[:-5]] = (path, sorted(d["jobs"], key=lambda j: j["id"]))
    return found


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else "target/release/dqngpu"
    # OUT is one run, or holds several (run1/, run2/, ...) sharing OUT/lib and OUT/jobs.csv.
    runs = sorted(os.path.join(out, d) for d in os.listdir(out) if d.startswith("run")
                  and os.path.isdir(os.path.join(out, d))) or [out]
    per, execs = {}, {}
    for run in runs:
        for s, (path, jobs) in schedules(run).items():
            m, why = measured(jobs)
            if m is None:
                print(f"{path}: left out, {why}")
                continue
            per.setdefault(s, []).append(m)
            # Each job's run time (finish - start), in submission order, for the per-job table.
            for k, j in enumerate(jobs):
                execs.setdefault(s, {}).setdefault(k, []).append(j["finished_at"] - j["started_at"])
    if not os.path.exists(model_file()):
        for s in sorted(set(per) & set(NEEDS_MODEL)):
            print(f"{s}: left out, no model at {model_file()} (make it with `dqngpu train -o "
                  f"{model_file()}`, defaults, or set MODEL=FILE)")
            del per[s], execs[s]
    print(f"simulated on {gpus_of(os.path.join(out, 'lib'))}; measured: median of the runs (n)")
    print(f"{'scheduler':12} {'n':>2} {'measured JCT / makespan':>24} {'sim h100 fit':>16} {'ratio':>12}"
          f" {'sim Lucid fit':>16} {'ratio':>12}")
    sim_jobs = {}
    for s, ms in sorted(per.items()):
        mj = statistics.median(m[0] for m in ms)
        mm = statistics.median(m[1] for m in ms)
        hj, hm, sim_jobs[s] = simulated(binary, out, s, "contention-h100")
        lj, lm, _ = simulated(binary, out, s, "contention")
        print(f"{s:12} {len(ms):2} {mj:10.1f} / {mm:9.1f} s {hj:7.1f} / {hm:6.1f} {hj / mj:5.2f} / {hm / mm:4.2f}"
              f" {lj:7.1f} / {lm:6.1f} {lj / mj:5.2f} / {lm / mm:4.2f}")
    per_job(execs, sim_jobs)


def per_job(execs, sim_jobs):
    """Each job's execution slowdown (run time over its own run time in the exclusive `sjf`
    schedule, medians over the runs) against the simulator's (exec_s / solo_s, h100 fit)."""
    if "sjf" not in execs:
        return
    solo = {k: statistics.median(v) for k, v in execs["sjf"].items()}
    for s in sorted(execs):
        if s == "sjf":
            continue
        print(f"\n{s}: per job, execution slowdown measured (vs its sjf run) and simulated (h100 fit)")
        errs = []
        for k, sj in enumerate(sorted(sim_jobs[s], key=lambda j: j["id"])):
            run = statistics.median(execs[s][k])
            meas, sim = run / solo[k], sj["exec_s"] / sj["solo_s"]
            errs.append(abs(sim - meas) / meas)
            print(f"  {k} {sj['app']:24} starts sim {sj['start_s']:5.1f} s  run {run:5.1f} s  solo {solo[k]:5.1f} s"
                  f"  measured {meas:4.2f}  simulated {sim:4.2f}")
        print(f"  mean |error| of the simulated slowdown: {100 * statistics.mean(errs):.1f}%")


if __name__ == "__main__":
    main()
