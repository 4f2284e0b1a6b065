"""Measure real co-location interference on one GPU: each app alone, then every pair together
(or the groups of any size named by --groups).

Writes, in the Lucid layout that `dqngpu calibrate` and `dqngpu interference predict` read:
  solo_profiles.csv   model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label
  colocate_pairs.csv  pair_id,model1,...,speed1,model2,...,speed2,gpu_util,gmem_util,gmem
  colocate_groups.csv (with --groups) one row per job of a group: group_id,size,model,dataset,
                      batchsize,amp,speed,gpu_util,gmem_util,gmem (the NVML columns are the group's)
speed in the solo file is steps/s alone; speed1/speed2 in the pairs file are each job's steps/s
beside its partner divided by its steps/s alone. Utilisation and memory come from NVML
(pynvml), sampled every 100 ms over the measuring window only. Each solo run goes through
`dqngpu profile run` when --dqngpu is given, so the product's own NVML profiler records the
app too (profiles/APP.csv). Results are rewritten after every run: a cut-short run keeps
what it measured.
"""

import argparse
import csv
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Sampler:
    """NVML readings of one GPU every `dt` seconds while `on` is set."""

    def __init__(self, index, dt=0.1):
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        self.h = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.dt, self.on, self.rows, self.quit = dt, threading.Event(), [], False
        self.name = pynvml.nvmlDeviceGetName(self.h)
        self.idle_used_mib = pynvml.nvmlDeviceGetMemoryInfo(self.h).used / 2**20
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while not self.quit:
            if self.on.is_set():
                u = self.nv.nvmlDeviceGetUtilizationRates(self.h)
                m = self.nv.nvmlDeviceGetMemoryInfo(self.h).used / 2**20
                self.rows.append((u.gpu, u.memory, m))
            time.sleep(self.dt)

    def window(self):
        self.rows = []
        self.on.set()

    def close(self):
        self.on.clear()
        rows = self.rows
        if not rows:
            return None
        n = len(rows)
        return {
            "gpu_util": sum(r[0] for r in rows) / n,
            "gmem_util": sum(r[1] for r in rows) / n,
            "gmem": max(r[2] for r in rows) - self.idle_used_mib,
            "samples": n,
        }


def run_group(apps, args, sampler, log, profile_dir=None):
    """Runs the apps together; returns ({id: steps/s}, nvml summary) or None on failure."""
    sync = tempfile.mkdtemp(prefix="pairs-")
    procs = {}
    for i, app in enumerate(apps):
        jid = f"j{i}"
        cmd = [sys.executable, os.path.join(HERE, "job.py"), "--app", app, "--sync-dir", sync,
               "--id", jid, "--window", str(args.window)]
        if profile_dir and args.dqngpu:
            out = os.path.join(profile_dir, f"{app}.csv")
            cmd = [args.dqngpu, "profile", "run", "--app", app, "--kind", "ml", "--interval-ms", "200",
                   "--gpu", str(args.gpu), "-o", out, "--"] + cmd
        procs[jid] = subprocess.Popen(cmd, stdout=log, stderr=log)
    ids = list(procs)
    try:
        deadline = time.time() + 180
        while not all(os.path.exists(os.path.join(sync, f"ready_{j}")) for j in ids):
            if any(p.poll() is not None for p in procs.values()) or time.time() > deadline:
                raise RuntimeError("a job exited or hung before it was ready")
            time.sleep(0.01)
        if sampler:
            sampler.window()
        open(os.path.join(sync, "go"), "w").close()
        deadline = time.time() + args.window + 120
        while not all(os.path.exists(os.path.join(sync, f"done_{j}")) for j in ids):
            if any(p.poll() is not None for p in procs.values()) or time.time() > deadline:
                raise RuntimeError("a job exited or hung while measuring")
            time.sleep(0.01)
        nv = sampler.close() if sampler else None
        speeds = {}
        for j in ids:
            with open(os.path.join(sync, f"done_{j}")) as f:
                speeds[j] = json.load(f)["steps_per_s"]
        return speeds, nv
    except RuntimeError as e:
        print(f"  failed: {apps}: {e}", file=log, flush=True)
        return None
    finally:
        open(os.path.join(sync, "stop"), "w").close()
        for p in procs.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(sync, ignore_errors=True)


def write_csvs(out, solo, pairs, apps_meta):
    with open(os.path.join(out, "solo_profiles.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "dataset", "batchsize", "amp", "speed", "gpu_util", "gmem_util", "gmem", "label"])
        for app, s in solo.items():
            model, dataset, bs = apps_meta[app]
            label = 0 if s["gpu_util"] < 40 else (1 if s["gpu_util"] < 80 else 2)
            w.writerow([model, dataset, bs, 0, f"{s['speed']:.3f}", f"{s['gpu_util']:.3f}",
                        f"{s['gmem_util']:.3f}", f"{s['gmem']:.1f}", label])
    with open(os.path.join(out, "colocate_pairs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["pair_id", "model1", "dataset1", "gpu_num1", "batchsize1", "amp1", "speed1",
                    "model2", "dataset2", "gpu_num2", "batchsize2", "amp2", "speed2",
                    "gpu_util", "gmem_util", "gmem"])
        for k, p in enumerate(pairs):
            m1, d1, b1 = apps_meta[p["app1"]]
            m2, d2, b2 = apps_meta[p["app2"]]
            w.writerow([k, m1, d1, 1, b1, 0, f"{p['speed1']:.4f}", m2, d2, 1, b2, 0, f"{p['speed2']:.4f}",
                        f"{p['gpu_util']:.3f}", f"{p['gmem_util']:.3f}", f"{p['gmem']:.1f}"])


def write_groups(out, groups, apps_meta):
    with open(os.path.join(out, "colocate_groups.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["group_id", "size", "model", "dataset", "batchsize", "amp", "speed",
                    "gpu_util", "gmem_util", "gmem"])
        for k, g in enumerate(groups):
            for app, speed in zip(g["apps"], g["speeds"]):
                m, d, b = apps_meta[app]
                w.writerow([k, len(g["apps"]), m, d, b, 0, f"{speed:.4f}", f"{g['gpu_util']:.3f}",
                            f"{g['gmem_util']:.3f}", f"{g['gmem']:.1f}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--apps", default="all", help="comma-separated app keys, or all")
    ap.add_argument("--dqngpu", help="dqngpu binary: record each solo run with `dqngpu profile run`")
    ap.add_argument("--no-nvml", action="store_true", help="dry run without a GPU")
    ap.add_argument("--pairs", default="all", help="A+B,C+D,... (app keys), or all")
    ap.add_argument("--groups", help="A+B+C,D+E,... (app keys): measure these groups instead of pairs")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting runs after this")
    args = ap.parse_args()

    sys.path.insert(0, HERE)
    # job.py's table without importing torch here.
    src = open(os.path.join(HERE, "job.py")).read()
    keys = [line.split('"')[1] for line in src.split("APPS = {", 1)[1].split("\n}")[0].splitlines()
            if line.startswith('    "')]
    apps = keys if args.apps == "all" else args.apps.split(",")
    meta = {}
    for k in keys:
        model, dataset, bs = k.rsplit("-bs", 1)[0].split("-", 1) + [int(k.rsplit("-bs", 1)[1])]
        meta[k] = (model, dataset, bs)

    os.makedirs(args.out, exist_ok=True)
    profile_dir = os.path.join(args.out, "profiles")
    os.makedirs(profile_dir, exist_ok=True)
    log = open(os.path.join(args.out, "jobs.log"), "a")
    sampler = None if args.no_nvml else Sampler(args.gpu)
    start = time.time()
    raw = {"gpu": sampler.name if sampler else "none", "window_s": args.window, "solo": {}}
    solo = {}
    for app in apps:
        t = time.time()
        r = run_group([app], args, sampler, log, profile_dir)
        if r is None and args.dqngpu:
            print(f"solo {app}: failed under `dqngpu profile run`; again without it", flush=True)
            r = run_group([app], args, sampler, log)
        if r is None:
            continue
        speeds, nv = r
        nv = nv or {"gpu_util": 0.0, "gmem_util": 0.0, "gmem": 0.0, "samples": 0}
        solo[app] = dict(speed=speeds["j0"], **nv)
        raw["solo"][app] = solo[app]
        print(f"solo {app}: {speeds['j0']:.2f} steps/s, util {nv['gpu_util']:.1f}%, "
              f"{nv['gmem']:.0f} MiB ({time.time() - t:.1f} s)", flush=True)
        write_csvs(args.out, solo, [], meta)

    # Pairs of different apps first, then each app with a copy of itself; or the named groups.
    if args.groups:
        todo = [g.split("+") for g in args.groups.split(",")]
    elif args.pairs != "all":
        todo = [p.split("+") for p in args.pairs.split(",")]
    else:
        measured = [a for a in apps if a in solo]
        todo = [list(p) for p in itertools.combinations(measured, 2)] + [[a, a] for a in measured]
    kind = "groups" if args.groups else "pairs"
    raw[kind] = []
    for members in todo:
        if time.time() - start > args.budget_s:
            print(f"budget spent: {len(todo) - len(raw[kind])} {kind} not measured", flush=True)
            break
        if not all(a in solo for a in members):
            print(f"{' + '.join(members)}: an app has no solo speed; skipped", flush=True)
            continue
        t = time.time()
        r = run_group(members, args, sampler, log)
        if r is None:
            continue
        speeds, nv = r
        nv = nv or {"gpu_util": 0.0, "gmem_util": 0.0, "gmem": 0.0, "samples": 0}
        steps = [speeds[f"j{i}"] for i in range(len(members))]
        rel = [x / solo[a]["speed"] for x, a in zip(steps, members)]
        if args.groups:
            raw[kind].append(dict(apps=members, steps=steps, speeds=rel, **nv))
            write_groups(args.out, raw[kind], meta)
        else:
            (a, b), (s1, s2), (r1, r2) = members, steps, rel
            raw[kind].append(dict(app1=a, app2=b, steps1=s1, steps2=s2, speed1=r1, speed2=r2, **nv))
            write_csvs(args.out, solo, raw[kind], meta)
        print(f"{kind[:-1]} {' + '.join(members)}: {' / '.join(f'{x:.3f}' for x in rel)} "
              f"({time.time() - t:.1f} s)", flush=True)
        with open(os.path.join(args.out, "raw.json"), "w") as f:
            json.dump(raw, f, indent=1)
    with open(os.path.join(args.out, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)
    print(f"done in {time.time() - start:.0f} s: {len(solo)} solo, {len(raw[kind])} {kind}", flush=True)

if __name__ == "__main__":
    main()
