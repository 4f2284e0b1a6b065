#!/usr/bin/env python3
"""The device scripts' HTTP helper for a running `dqngpu serve` (stdlib only: the GPU machine
has python3 but nothing to install). Used by scripts/device-gpu-check.sh and
scripts/device-real-vs-sim.sh.

    service_http.py get URL                      print the body
    service_http.py wait URL SECONDS PID         until URL answers; fails when PID exits
    service_http.py poll BASE SECONDS ID...      until the jobs are final; 0 when all succeeded
    service_http.py state BASE ID                print the job's state
    service_http.py batch BASE PY JOB APP:STEPS...   submit `PY JOB --app APP --steps STEPS`
                                                 jobs as one batch; print their ids
    service_http.py dump BASE                    jobs (and each in detail), cluster, profiles
    service_http.py observed BASE APP            0 when APP has an observed, non-zero profile
    service_http.py survived BASE BEFORE.json ID the jobs of BEFORE.json unchanged, ID succeeded
"""
import json, sys, time, urllib.request

def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()

cmd, url = sys.argv[1], sys.argv[2]
if cmd == "get":
    print(get(url))
elif cmd == "wait":
    # Waits for the server at URL (pid argv[4]) to answer; gives up early when it has exited.
    end, pid = time.time() + float(sys.argv[3]), sys.argv[4]
    while True:
        try:
            get(url)
            sys.exit(0)
        except Exception as e:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    gone = f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
            except OSError:
                gone = True
            if gone:
                sys.exit(f"the server (pid {pid}) exited without answering at {url}")
            if time.time() > end:
                sys.exit(f"{url} not answering: {e}")
            time.sleep(0.2)
elif cmd == "poll":
    # Waits until every job is in a final state; prints each change.
    end, ids, last = time.time() + float(sys.argv[3]), sys.argv[4:], None
    if not ids:
        sys.exit("no job ids to wait for (did the submissions fail?)")
    while True:
        states = {i: json.loads(get(f"{url}/v1/jobs/{i}"))["state"] for i in ids}
        if states != last:
            print(f"t={time.strftime('%H:%M:%S')} {states}", flush=True)
            last = states
        if all(s in ("succeeded", "failed", "cancelled") for s in states.values()):
            sys.exit(0 if all(s == "succeeded" for s in states.values()) else 1)
        if time.time() > end:
            sys.exit(f"jobs not finished in time: {states}")
        time.sleep(0.5)
elif cmd == "state":
    print(json.loads(get(f"{url}/v1/jobs/{sys.argv[3]}"))["state"])
elif cmd == "batch":
    py, job, specs = sys.argv[3], sys.argv[4], sys.argv[5:]
    jobs = [{"app": a, "command": [py, job, "--app", a, "--steps", n]} for a, n in (s.rsplit(":", 1) for s in specs)]
    req = urllib.request.Request(f"{url}/v1/jobs/batch", json.dumps({"jobs": jobs}).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        print(" ".join(str(j["id"]) for j in json.loads(r.read().decode())["jobs"]))
elif cmd == "dump":
    # The service's state as one JSON document: jobs, each job's detail, cluster, profiles.
    d = {"jobs": json.loads(get(url + "/v1/jobs"))["jobs"]}
    d["detail"] = [json.loads(get(f"{url}/v1/jobs/{j['id']}")) for j in d["jobs"]]
    d["cluster"] = json.loads(get(url + "/v1/cluster"))
    d["profiles"] = json.loads(get(url + "/v1/profiles"))
    print(json.dumps(d, indent=1))
elif cmd == "observed":
    # The service recorded the app's run from NVML: an observed profile with usage in it.
    ps = [p for p in json.loads(get(url + "/v1/profiles"))["profiles"] if p["app"] == sys.argv[3]]
    print(json.dumps(ps))
    ok = [p for p in ps if p["source"] == "observed" and p["peak"]["gpu_mem_mib"] > 0 and p["peak"]["gpu_util_pct"] > 0]
    sys.exit(0 if ok else f"no observed profile of {sys.argv[3]} with non-zero peak memory and util")
elif cmd == "survived":
    # Every job of the dump argv[3] is in the same state after the restart; the job that ran
    # across it (argv[4]) succeeded in one attempt (re-adopted, not run again).
    before = {j["id"]: j for j in json.load(open(sys.argv[3]))["jobs"]}
    after = {j["id"]: j for j in json.loads(get(url + "/v1/jobs"))["jobs"]}
    bad = []
    for i, j in before.items():
        a = after.get(i)
        if a is None or (a["state"], a["attempts"]) != (j["state"], j["attempts"]):
            bad.append(f"job {i}: before {j['state']}/{j['attempts']} attempts, after {a and (a['state'], a['attempts'])}")
    long = after.get(int(sys.argv[4]))
    print(f"{len(before)} jobs compared; job {sys.argv[4]} after the restart: {long and (long['state'], long['attempts'])}")
    if long is None or long["state"] != "succeeded" or long["attempts"] != 1:
        bad.append(f"job {sys.argv[4]} should have succeeded in 1 attempt: {long}")
    if not before:
        bad.append("no jobs in the dump before the restart")
    print("\n".join(bad) or "state survived the restart")
    sys.exit(1 if bad else 0)
