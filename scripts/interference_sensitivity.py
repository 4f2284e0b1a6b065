"""Sensitivity of the simulator's conclusions to the interference calibration: every heuristic on
the five thesis classes (seeds 1000-1009, one Titan Xp) under `contention` (the Lucid fit) and
`contention-h100` (our H100 pairs), with and without a 10% slowdown budget: mean JCT / makespan.

Usage: python3 scripts/interference_sensitivity.py [path/to/dqngpu]   (docs/INTERFERENCE.md)
"""
import json, subprocess, statistics, sys
B=sys.argv[1] if len(sys.argv) > 1 else 'target/release/dqngpu'
classes=['gpu_light','mem_light','random','gpu_heavy','mem_heavy']
res={}
for cap in ['off','10']:
  for m in ['contention','contention-h100']:
    for c in classes:
      for s in range(1000,1010):
        out=subprocess.run([B,'simulate','--workload',c,'--seed',str(s),'--scheduler','all','--interference',m,'--max-slowdown',cap,'--format','json'],capture_output=True,text=True)
        for r in json.loads(out.stdout):
          res.setdefault((cap,m,c,r['scheduler']),[]).append((r['mean_jct_s'],r['makespan_s']))
for cap in ['off','10']:
 print(f"\n== max-slowdown {cap}: mean JCT (s) / makespan (s), 10 seeds 1000-1009, 1 Titan Xp, thesis library")
 for c in classes:
  print(f"-- {c}")
  for sch in ['sjf','tetris','bestfit','sjf-bestfit','lucid','greedy']:
    a=res[(cap,'contention',c,sch)]; b=res[(cap,'contention-h100',c,sch)]
    f=lambda v,i: statistics.mean(x[i] for x in v)
    print(f"{sch:12s} contention {f(a,0):8.1f} / {f(a,1):8.1f}   h100 {f(b,0):8.1f} / {f(b,1):8.1f}")
