#!/usr/bin/env python3
"""Issue 10's measurements beside `dqngpu experiment`: what training buys, and apps never seen.

    cargo build --release && cargo build --release -p dqngpu-rl --example scorer
    python3 scripts/issue10_measure.py [OUT_DIR]

Trains (release binary, defaults) `dqngpu train -o M`, `dqngpu train --iterations 0 -o M0`
(the untrained network), `dqngpu train --library generated:1001 -o M1001` (trained on the
held-out library) and the same with `--add-to-defaults` (that library beside the default
distribution), then evaluates each with the `scorer` example against every heuristic on
seeds 1000..1009 per class:
  - training matters: M vs M0 on the thesis library, one Titan Xp (30 jobs at t = 0) and
    4 x 2 Titan Xp (120 Poisson jobs at 0.1/s);
  - unseen apps: M, M1001 and M1001 with the defaults on `generated:1001` (one Titan Xp, 30
    jobs at t = 0).
Prints each table and the ratios issue 10 states. `TRAIN_FLAGS="--iterations 300
--jobsets-per-iter 4"` (an environment variable) adds flags to the trained models' `train`
calls (not to the untrained one), to measure a change to the recipe the same way.
`SCHEDULER=dqngpu-plan` evaluates every model with search at decision time (docs/RL.md);
`REUSE=1` keeps models already in OUT_DIR instead of training them again.
"""
import os
import shlex
import subprocess
import sys
import time

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/issue10"
BIN = "target/release/dqngpu"
EX = "target/release/examples/scorer"
NAME = os.environ.get("SCHEDULER", "dqngpu")


def train(name, *flags):
    path = os.path.join(OUT, name + ".safetensors")
    if os.environ.get("REUSE") == "1" and os.path.exists(path):
        print(f"reused {path}", flush=True)
        return path
    if "--iterations" not in flags:
        flags = (*flags, *shlex.split(os.environ.get("TRAIN_FLAGS", "")))
    t = time.time()
    subprocess.run([BIN, "train", "--quiet", *flags, "-o", path], check=True)
    print(f"trained {name} ({' '.join(flags) or 'defaults'}) in {time.time() - t:.1f} s", flush=True)
    return path


def evaluate(model, gpus, rate, jobs, library):
    """{class: {scheduler: (jct, makespan, slowed_over_10)}} from the scorer example."""
    env = dict(os.environ, MODEL=model)
    out = subprocess.run([EX, "jct", "0", gpus, str(rate), str(jobs), library], env=env,
                         check=True, capture_output=True, text=True).stdout
    table = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) >= 5:
            table.setdefault(f[0], {})[f[1]] = (float(f[2]), float(f[3]), float(f[4]))
    return table


HEURISTICS = ["sjf", "fifo", "tetris", "bestfit", "sjf-bestfit", "lucid", "greedy"]


def show(title, table):
    print(f"\n{title}\n{'class':10} {'dqngpu jct':>10} {'best rule jct':>14} {'ratio':>6} {'mk ratio':>8}")
    for c, rows in table.items():
        bj = min(rows[h][0] for h in HEURISTICS)
        bm = min(rows[h][1] for h in HEURISTICS)
        d = rows[NAME]
        print(f"{c:10} {d[0]:10.1f} {bj:14.1f} {d[0] / bj:6.3f} {d[1] / bm:8.3f}")


def main():
    os.makedirs(OUT, exist_ok=True)
    m = train("m")
    m0 = train("m0", "--iterations", "0")
    m1001 = train("m1001", "--library", "generated:1001")
    for gpus, rate, jobs in [("titanxp:1", 0, 30), ("4xtitanxp:2", 0.1, 120)]:
        trained = evaluate(m, gpus, rate, jobs, "thesis")
        untrained = evaluate(m0, gpus, rate, jobs, "thesis")
        print(f"\ntraining matters, thesis, {gpus}, rate {rate}, {jobs} jobs: mean JCT trained / untrained")
        ratios = []
        for c in trained:
            r = trained[c][NAME][0] / untrained[c][NAME][0]
            ratios.append(r)
            print(f"  {c:10} {trained[c][NAME][0]:9.1f} / {untrained[c][NAME][0]:9.1f} = {r:.3f}")
        print(f"  mean ratio {sum(ratios) / len(ratios):.3f} (issue: <= 0.90, none > 1.01)")
    show("unseen apps: plain `train -o M` on generated:1001", evaluate(m, "titanxp:1", 0, 30, "generated:1001"))
    show("trained on it: `train --library generated:1001` on generated:1001",
         evaluate(m1001, "titanxp:1", 0, 30, "generated:1001"))
    m1001d = train("m1001d", "--library", "generated:1001", "--add-to-defaults")
    show("trained on it and the default distribution: `train --library generated:1001 --add-to-defaults`",
         evaluate(m1001d, "titanxp:1", 0, 30, "generated:1001"))


if __name__ == "__main__":
    main()
