#!/usr/bin/env python3
"""A small PyTorch CUDA workload in phases, for checking `dqngpu profile run` and the service.

Run:     python3 scripts/gpu_workload.py [--seconds 20] [--phases FILE.jsonl]
Analyse: python3 scripts/gpu_workload.py --analyse PROFILE.json --phases FILE.jsonl [--report OUT.json]

The run goes through four phases, each a fixed share of --seconds, so a profile of it should
show them in GPU utilisation and memory:
  1. warm   (20%): 1 GiB held, GPU mostly idle (a small matmul every 100 ms)
  2. heavy  (35%): +6 GiB held, bf16 matmuls back to back (utilisation near 100%)
  3. medium (25%): the 6 GiB freed, matmuls half the time (utilisation about half)
  4. tail   (20%): 1 GiB held, idle
It writes one JSON line per phase (name, start and end seconds since the script began) to
--phases (and to stdout). `--analyse` compares a profile (the AppProfile JSON) with those
phases and exits 1 when the profile does not show them.
"""

import time

T0 = time.monotonic()  # as near the process start as Python allows: profile time 0

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

GIB = 1 << 30

PHASES = [("warm", 0.20), ("heavy", 0.35), ("medium", 0.25), ("tail", 0.20)]


def run(args):
    import torch  # imported here so that --analyse works without PyTorch

    if not torch.cuda.is_available():
        print("error: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    out = open(args.phases, "a") if args.phases else None
    n = 8192  # one bf16 matmul is ~1.1 TFLOP: long kernels, so launch overhead does not hide the load
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    base = torch.empty(int(args.base_gib * GIB), dtype=torch.uint8, device=dev)
    base.fill_(1)
    torch.cuda.synchronize()
    big = None
    # Phases start once PyTorch and CUDA are up; times are since the process started.
    start = time.monotonic() - T0
    init = json.dumps({"phase": "init", "start_s": 0.0, "end_s": round(start, 3)})
    print(init, flush=True)
    if out:
        out.write(init + "\n")
    ends = []
    acc = start
    for name, share in PHASES:
        acc += share * args.seconds
        ends.append((name, acc))
    t0 = T0
    for name, end in ends:
        if name == "heavy":
            big = torch.empty(int(args.big_gib * GIB), dtype=torch.uint8, device=dev)
            big.fill_(2)
        if name == "medium" and big is not None:
            del big
            big = None
            torch.cuda.synchronize()
            torch.cuda.empty_cache()  # give the memory back to the driver so NVML sees it go
        while time.monotonic() - t0 < end:
            if name == "heavy":
                for _ in range(8):
                    a = (a @ b) * 0.01
                torch.cuda.synchronize()
            elif name == "medium":
                busy_until = time.monotonic() + 0.05
                while time.monotonic() < busy_until:
                    a = (a @ b) * 0.01
                    torch.cuda.synchronize()
                time.sleep(0.05)
            elif name == "warm":
                a = (a @ b) * 0.01
                torch.cuda.synchronize()
                time.sleep(0.1)
            else:
                time.sleep(0.05)
        line = json.dumps({"phase": name, "start_s": round(start, 3), "end_s": round(time.monotonic() - t0, 3)})
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()
        start = time.monotonic() - t0
    del base
    print(json.dumps({"done": True, "wall_s": round(time.monotonic() - t0, 3), "checksum": float(a.float().sum())}))
    return 0


def analyse(args):
    with open(args.analyse) as f:
        prof = json.load(f)
    phases = []
    with open(args.phases) as f:
        for line in f:
            line = line.strip()
            if line:
                phases.append(json.loads(line))
    dt = float(prof["interval_s"])
    samples = prof["samples"]
    report = {"interval_s": dt, "samples": len(samples), "recorded_on": prof.get("recorded_on"), "phases": {}}
    for p in phases:
        # Skip the first and last interval of a phase: they straddle the change.
        lo = int(p["start_s"] / dt) + 1
        hi = int(p["end_s"] / dt) - 1
        sel = samples[lo:hi] if hi > lo else []
        if not sel:
            report["phases"][p["phase"]] = {"samples": 0}
            continue
        mean = lambda k: sum(s[k] for s in sel) / len(sel)  # noqa: E731
        report["phases"][p["phase"]] = {
            "samples": len(sel),
            "util_mean_pct": round(mean("gpu_util_pct"), 1),
            "mem_mean_mib": round(mean("gpu_mem_mib"), 1),
            "mem_max_mib": round(max(s["gpu_mem_mib"] for s in sel), 1),
            "sm_mean_pct": round(mean("sm_pct"), 1),
            "pcie_mean_mbps": round(mean("pcie_mbps"), 1),
        }
    ph = report["phases"]
    checks = {
        "util_nonzero": any(s["gpu_util_pct"] > 0 for s in samples),
        "mem_nonzero": any(s["gpu_mem_mib"] > 0 for s in samples),
        "util_in_range": all(0 <= s["gpu_util_pct"] <= 100 for s in samples),
        "sm_in_range": all(0 <= s["sm_pct"] <= 100 for s in samples),
    }
    if all(ph.get(k, {}).get("samples", 0) > 0 for k in ("warm", "heavy", "medium", "tail")):
        checks["heavy_util_above_warm"] = ph["heavy"]["util_mean_pct"] > ph["warm"]["util_mean_pct"] + 30
        checks["heavy_util_above_medium"] = ph["heavy"]["util_mean_pct"] > ph["medium"]["util_mean_pct"]
        checks["medium_util_above_tail"] = ph["medium"]["util_mean_pct"] > ph["tail"]["util_mean_pct"]
        # 6 GiB more in the heavy phase; allow for allocator rounding and NVML's granularity.
        checks["heavy_mem_above_warm_by_5gib"] = ph["heavy"]["mem_mean_mib"] > ph["warm"]["mem_mean_mib"] + 5 * 1024
        checks["medium_mem_below_heavy_by_5gib"] = ph["medium"]["mem_mean_mib"] < ph["heavy"]["mem_mean_mib"] - 5 * 1024
    else:
        checks["all_phases_sampled"] = False
    report["checks"] = checks
    report["ok"] = all(checks.values())
    text = json.dumps(report, indent=2)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    return 0 if report["ok"] else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=20.0, help="total run time, s")
    p.add_argument("--base-gib", type=float, default=1.0, help="memory held throughout, GiB")
    p.add_argument("--big-gib", type=float, default=6.0, help="extra memory held in the heavy phase, GiB")
    p.add_argument("--phases", help="append phase times (JSON lines) here; with --analyse, read them")
    p.add_argument("--analyse", metavar="PROFILE", help="check a recorded profile against --phases")
    p.add_argument("--report", help="with --analyse: write the report JSON here")
    args = p.parse_args()
    if args.analyse:
        if not args.phases:
            p.error("--analyse needs --phases")
        return analyse(args)
    if args.seconds <= 0:
        p.error("--seconds must be positive")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
