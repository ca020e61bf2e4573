#!/usr/bin/python3
"""Starts one or more commands at once and measures them exactly.

usage: measure.py OUT.json [--stdout FILE] -- ARGV... [::: ARGV...]

All argv groups start together. For each process it records its wall time and, read from
/proc/PID/stat while the process is an unreaped zombie (waitid with WNOWAIT), its OWN CPU
seconds (utime+stime of all its threads, excluding children) and the CPU of the children it
reaped itself (cutime+cstime). This is exact to one clock tick and needs no cooperation from
the measured program. Writes a JSON object to OUT.json; exits with the first non-zero status.
"""
import json
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def stat_times(pid):
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    fields = data[data.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime..cstime are fields 14..17.
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK, utime / TICK, stime / TICK


def main():
    args = sys.argv[1:]
    out_path = args.pop(0)
    stdout_path = None
    if args and args[0] == "--stdout":
        args.pop(0)
        stdout_path = args.pop(0)
    assert args and args[0] == "--", __doc__
    groups, cur = [], []
    for a in args[1:]:
        if a == ":::":
            groups.append(cur)
            cur = []
        else:
            cur.append(a)
    groups.append(cur)

    sink = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    start = time.monotonic()
    procs = {}
    for g in groups:
        p = subprocess.Popen(g, stdout=sink, stderr=subprocess.STDOUT)
        procs[p.pid] = (p, g)
    results = []
    rc = 0
    while procs:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        pid = info.si_pid
        end = time.monotonic()
        own, children, user, system = stat_times(pid)
        p, g = procs.pop(pid)
        code = p.wait()
        if code != 0 and rc == 0:
            rc = code if code > 0 else 128 - code
        results.append({"argv": g, "wall_s": end - start, "own_cpu_s": own, "own_user_s": user,
                        "own_sys_s": system, "children_cpu_s": children, "exit": code})
    doc = {"wall_s": time.monotonic() - start, "procs": results,
           "own_cpu_s": sum(r["own_cpu_s"] for r in results),
           "children_cpu_s": sum(r["children_cpu_s"] for r in results)}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    sys.exit(rc)


if __name__ == "__main__":
    main()
