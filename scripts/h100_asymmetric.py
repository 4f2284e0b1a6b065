#!/usr/bin/env python3
"""Does an asymmetric contention model pay on the H100 data? (docs/INTERFERENCE.md)

Computes, on data/gpu-pairs-h100 (run 1's solo utils for every pair, as `dqngpu calibrate`
does) the per-job MAPE of the shipped symmetric form and three two-parameter asymmetric
variants, each fitted by grid search (61 x 61 coarse, then 41 x 41 fine):
  sym     rate_i = 1 / (1 + a x_i o_i + b excess)             (the shipped formula)
  ov_w    rate_i = 1 / (1 + a x_i o_i w_i + b excess)          w_i = x_i / mean(x)
  ex_w    rate_i = 1 / (1 + a x_i o_i + b excess w_i)
  both_w  rate_i = 1 / (1 + (a x_i o_i + b excess) w_i)
(x_i = util/100, o_i = the others' util/100, excess = max(0, sum x - 1), rates clamped to
[0.01, 1]); then leave-one-model-family-out for sym and ov_w, pooled over held-out pairs as
`calibrate` does; then sym and ov_w, with their pair fits, on the held-out groups of three and
four (data/gpu-groups-h100). Copied from the audit of 2026-11-28 (its `asym.py`); pure Python,
about 5 s.

    python3 scripts/h100_asymmetric.py
"""
import csv

PAIRS = "data/gpu-pairs-h100/"
GROUPS = "data/gpu-groups-h100/"


def key(r, k=""):
    return (r["model" + k], r["dataset" + k], r["batchsize" + k], r["amp" + k])


def load_pairs():
    util = {key(r): float(r["gpu_util"]) for r in csv.DictReader(open(PAIRS + "solo_profiles.csv"))}
    return [(util[key(r, "1")], util[key(r, "2")], float(r["speed1"]), float(r["speed2"]), r["model1"], r["model2"])
            for r in csv.DictReader(open(PAIRS + "colocate_pairs.csv"))]


def rates(variant, a, b, utils):
    xs = [u / 100 for u in utils]
    tot = sum(xs)
    ex = max(0.0, tot - 1)
    mean = tot / len(xs)
    out = []
    for x in xs:
        w = x / mean if mean > 0 else 1.0
        o = tot - x
        s = {"sym": 1 + a * x * o + b * ex, "ov_w": 1 + a * x * o * w + b * ex,
             "ex_w": 1 + a * x * o + b * ex * w, "both_w": 1 + (a * x * o + b * ex) * w}[variant]
        out.append(min(1.0, max(0.01, 1 / s)))
    return out


def mape(obs, variant, a, b):
    t = 0.0
    for u1, u2, s1, s2, *_ in obs:
        r1, r2 = rates(variant, a, b, [u1, u2])
        t += abs(r1 - s1) / s1 + abs(r2 - s2) / s2
    return 100 * t / (2 * len(obs))


def fit(obs, variant, amax=3.0, bmax=1.5):
    best = min((mape(obs, variant, i * amax / 60, j * bmax / 60), i * amax / 60, j * bmax / 60)
               for i in range(61) for j in range(61))
    _, a0, b0 = best
    for i in range(41):
        for j in range(41):
            a, b = max(0.0, a0 + (i - 20) * amax / 1200), max(0.0, b0 + (j - 20) * bmax / 1200)
            best = min(best, (mape(obs, variant, a, b), a, b))
    return best


def main():
    obs = load_pairs()
    fits = {}
    print("H100 pairs, in sample (MAPE, a, b):")
    for v in ("sym", "ov_w", "ex_w", "both_w"):
        m, a, b = fits[v] = fit(obs, v)
        print(f"  {v:7} {m:6.2f}%  a {a:.4f}  b {b:.4f}")
    fams = sorted({o[4] for o in obs} | {o[5] for o in obs})
    print("H100 pairs, leave one model family out:")
    for v in ("sym", "ov_w"):
        tot = n = 0
        for fam in fams:
            train = [o for o in obs if fam not in o[4:6]]
            test = [o for o in obs if fam in o[4:6]]
            _, a, b = fit(train, v)
            tot += mape(test, v, a, b) * len(test)
            n += len(test)
        print(f"  {v:7} {tot / n:6.2f}%")
    util = {r["model"]: float(r["gpu_util"]) for r in csv.DictReader(open(GROUPS + "solo_profiles.csv"))}
    groups = {}
    for r in csv.DictReader(open(GROUPS + "colocate_groups.csv")):
        groups.setdefault(r["group_id"], []).append((r["model"], float(r["speed"])))
    print("held-out groups (the pair fits; MAPE by group size, jobs in brackets):")
    for v in ("sym", "ov_w"):
        _, a, b = fits[v]
        errs = {}
        for jobs in groups.values():
            for p, (_, s) in zip(rates(v, a, b, [util[m] for m, _ in jobs]), jobs):
                errs.setdefault(len(jobs), []).append(abs(p - s) / s)
        every = [e for l in errs.values() for e in l]
        by = "  ".join(f"{k}: {100 * sum(l) / len(l):.1f}% ({len(l)})" for k, l in sorted(errs.items()))
        print(f"  {v:7} {by}  all: {100 * sum(every) / len(every):.1f}% ({len(every)})")


if __name__ == "__main__":
    main()
