#!/usr/bin/env python3
"""dqngpu-plan against the seven rules on chosen (library, cluster, class) pairs, as issue 10's
league measures it, without running the whole experiment (docs/RL.md, "The promise").

    python3 scripts/plan_pairs.py DQNGPU MODEL OUT [LIBRARY:MODEL:GPUS:CLASS ...]

For each pair, `DQNGPU simulate` (e.g. target/release/dqngpu) runs every heuristic and
`dqngpu-plan --model MODEL` on seeds 1000..1009 (30 jobs at t = 0), writing each run's JSON
under OUT (kept: a run already there is read, not run again), and prints the plan's mean JCT
and makespan, each over the lowest mean among the rules (sjf, fifo, tetris, bestfit,
sjf-bestfit, lucid, greedy). Pairs default to the four the plan missed before its promise:
thesis:titanxp:1:gpu_light lucid:rtx3090:1:mem_light generated:1001:titanxp:1:gpu_heavy
generated:1001:titanxp:1:mem_light. PLAN_FLAGS="--plan-guard 2 --plan-rows 8" (an
environment variable) is passed to the plan's runs only; FLAGS="--max-slowdown 10" to every
run, rules' and plan's (a budget cell).
"""
import concurrent.futures as cf
import json
import os
import shlex
import subprocess
import sys

RULES = ["sjf", "fifo", "tetris", "bestfit", "sjf-bestfit", "lucid", "greedy"]
DEFAULT_PAIRS = [
    "thesis:titanxp:1:gpu_light",
    "lucid:rtx3090:1:mem_light",
    "generated:1001:titanxp:1:gpu_heavy",
    "generated:1001:titanxp:1:mem_light",
]
SEEDS = range(1000, 1010)


def parse(pair):
    """LIBRARY:MODEL:GPUS:CLASS, where LIBRARY may hold a colon (generated:1001)."""
    parts = pair.split(":")
    if len(parts) < 4:
        raise SystemExit(f"pair `{pair}`: expected LIBRARY:MODEL:GPUS:CLASS, e.g. thesis:titanxp:1:gpu_light")
    return ":".join(parts[:-3]), f"{parts[-3]}:{parts[-2]}", parts[-1]


def run(binary, args, path):
    if not os.path.exists(path):
        r = subprocess.run([binary, "simulate", "--format", "json", *args], capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"{binary} simulate {' '.join(args)}: {r.stderr.strip()}")
        with open(path, "w") as f:
            f.write(r.stdout)


def results(path):
    with open(path) as f:
        d = json.load(f)
    return {r["scheduler"]: r for r in (d if isinstance(d, list) else [d])}


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    binary, model, out = sys.argv[1:4]
    pairs = sys.argv[4:] or DEFAULT_PAIRS
    flags = shlex.split(os.environ.get("PLAN_FLAGS", ""))
    common = shlex.split(os.environ.get("FLAGS", ""))
    os.makedirs(out, exist_ok=True)
    jobs = []
    with cf.ThreadPoolExecutor(2) as pool:
        for pair in pairs:
            library, gpus, cls = parse(pair)
            tag = pair.replace(":", "_")
            for s in SEEDS:
                base = ["--library", library, "--gpus", gpus, "--workload", cls, "--seed", str(s), *common]
                jobs.append(pool.submit(run, binary, [*base, "--scheduler", "all"], f"{out}/{tag}-all-{s}.json"))
                plan = [*base, *flags, "--scheduler", "dqngpu-plan", "--model", model]
                jobs.append(pool.submit(run, binary, plan, f"{out}/{tag}-plan-{s}.json"))
        for j in jobs:
            j.result()
    for pair in pairs:
        tag = pair.replace(":", "_")
        jct, mk = {}, {}
        for s in SEEDS:
            runs = results(f"{out}/{tag}-all-{s}.json") | results(f"{out}/{tag}-plan-{s}.json")
            for name, r in runs.items():
                jct.setdefault(name, []).append(r["mean_jct_s"])
                mk.setdefault(name, []).append(r["makespan_s"])
        mean = lambda xs: sum(xs) / len(xs)
        best_jct = min(mean(jct[r]) for r in RULES)
        best_mk = min(mean(mk[r]) for r in RULES)
        plan_jct, plan_mk = mean(jct["dqngpu-plan"]) / best_jct, mean(mk["dqngpu-plan"]) / best_mk
        within = plan_jct <= 1.01 and plan_mk <= 1.02
        print(f"{pair:40s} JCT {plan_jct:.3f}  makespan {plan_mk:.3f}  {'within' if within else 'OUTSIDE'}")


if __name__ == "__main__":
    main()
