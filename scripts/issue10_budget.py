#!/usr/bin/env python3
"""Issue 10's budget line: every class, seeds 1000..1009, one Titan Xp, thesis library,
`--max-slowdown 10`, one row per scheduler (means over the seeds; the largest execution
slowdown of any job; groups the budget refused, summed).

    cargo build --release
    python3 scripts/issue10_budget.py MODEL [SCHEDULER ...]   # default: dqngpu (with MODEL)
"""
import json
import subprocess
import sys

BIN = "target/release/dqngpu"
CLASSES = ["gpu_heavy", "gpu_light", "mem_heavy", "mem_light", "random"]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: issue10_budget.py MODEL [SCHEDULER ...]")
    model, schedulers = sys.argv[1], sys.argv[2:] or ["dqngpu"]
    print("| class | scheduler | mean JCT s | makespan s | max exec slowdown | refusals |")
    print("| --- | --- | --- | --- | --- | --- |")
    for c in CLASSES:
        for sch in schedulers:
            runs = []
            for seed in range(1000, 1010):
                cmd = [BIN, "simulate", "--workload", c, "--seed", str(seed), "--scheduler", sch,
                       "--max-slowdown", "10", "--format", "json"]
                if sch.startswith("dqngpu"):  # dqngpu, dqngpu-plan
                    cmd += ["--model", model]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                runs.append(json.loads(out))
            worst = max(j["exec_slowdown"] for r in runs for j in r["jobs"])
            jct = sum(r["mean_jct_s"] for r in runs) / len(runs)
            mk = sum(r["makespan_s"] for r in runs) / len(runs)
            refused = sum(r.get("budget_refusals", 0) for r in runs)
            print(f"| {c} | {sch} | {jct:.1f} | {mk:.1f} | {worst:.4f} | {refused} |", flush=True)


if __name__ == "__main__":
    main()
