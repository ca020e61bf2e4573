"""The 1 GB memory table: a model of random f32 tensors (make_model.py) federated by 3 regions x
2 clients whose command perturbs it (perturb.py), plaintext and under secure aggregation. Every
Sextant process's peak resident memory (VmHWM, sampled from /proc every 0.2 s) and the seconds
per round, against the model's own size.

usage: memory_bench.py BUILD_DIR [--megabytes 1024] [--rounds 2] [--work DIR] [--modes plain,secure]
                        [--netns] [--regions 3] [--clients 2]

--netns (root, iproute2): every region in its own network namespace, the orchestrator in a
fourth, each joined to the host by a veth pair and routed through it; the orchestrator listens
on its namespace's address over mTLS (`sextant certs init --san orchestrator.sextant.test`, a
name each region's /etc/netns/NS/hosts maps to it) and launches every aggregator and client in
its region's namespace through a `sextant-worker` wrapper beside a copy of its binary. The
namespaces, links and /etc/netns entries are removed at the end.
"""
import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

EXPERIMENT = """name: bench-fl-memory
objective: {metric: train_loss, goal: minimize}
budget: {max_wall_time: 40m}
federation:
  regions: [%(regions)s]
  rounds: %(rounds)d
  min_clients: %(clients)d
  round_deadline: 1200s
  seed: 1
  data: own
  model: {file: %(model)s}
  client_command: [/usr/bin/python3, %(perturb)s]
  secure_aggregation: %(secure)s
"""


def role_of(cmdline):
    """'orchestrator', 'aggregator r1', 'client r1/0', 'evaluator' from a process's argv."""
    if os.path.basename(cmdline[0]) == "sextant":
        return "orchestrator"
    args = dict(zip(cmdline[1::2], cmdline[2::2]))
    role = args.get("--role", "?")
    if role == "client":
        return "client %s/%s" % (args.get("--region"), args.get("--index"))
    if role == "aggregator":
        return "aggregator %s" % args.get("--region")
    return role


def sample(run_dir, peaks):
    """Adds each of the run's live processes' VmHWM (kB) to peaks[role] (the max seen)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().decode(errors="replace").split("\0")[:-1]
            if not cmdline or os.path.basename(cmdline[0]) not in ("sextant", "sextant-worker"):
                continue
            if not any(run_dir in a for a in cmdline) and "--role" not in cmdline:
                continue
            with open("/proc/%s/status" % pid) as f:
                hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
        except (OSError, StopIteration, ValueError):
            continue
        role = role_of(cmdline)
        peaks[role] = max(peaks.get(role, 0), hwm)


NETNS = "sxmem"  # namespace names: sxmem0 (orchestrator), sxmem1..3 (regions r1..r3)
ORCHESTRATOR = "orchestrator.sextant.test"
PORT = 7101

WRAPPER = """#!/bin/bash
# Starts each participant in its region's namespace; the evaluator stays beside the orchestrator.
args=("$@"); role=; region=
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  case "${args[i]}" in --role) role=${args[i+1]};; --region) region=${args[i+1]};; esac
done
[ "$role" = evaluator ] && exec %(worker)s "${args[@]}"
case "$region" in r1|r2|r3) ns=%(netns)s${region#r};; *) echo "no namespace for $region" >&2; exit 2;; esac
if [ "$role" = aggregator ]; then
  for ((i = 0; i + 1 < ${#args[@]}; i++)); do
    [ "${args[i]}" = --connect ] && args[i+1]=%(name)s:%(port)d
  done
fi
exec ip netns exec "$ns" %(worker)s "${args[@]}"
"""


def sh(cmd):
    subprocess.run(["bash", "-c", cmd], check=True)


def netns_down():
    for i in range(4):
        ns = "%s%d" % (NETNS, i)
        subprocess.run(["bash", "-c", "ip netns pids %s 2>/dev/null | xargs -r kill -9; "
                        "ip netns del %s 2>/dev/null; ip link del %sh 2>/dev/null; "
                        "rm -rf /etc/netns/%s" % (ns, ns, ns, ns)])


def netns_up():
    """Four namespaces, 10.77.i.2 inside and 10.77.i.1 on the host, routed through the host."""
    netns_down()
    for i in range(4):
        ns = "%s%d" % (NETNS, i)
        sh("set -e; ip netns add {ns}; ip -n {ns} link set lo up; "
           "ip link add {ns}h type veth peer name {ns}i; ip link set {ns}i netns {ns}; "
           "ip addr add 10.77.{i}.1/30 dev {ns}h; ip link set {ns}h up; "
           "ip -n {ns} addr add 10.77.{i}.2/30 dev {ns}i; ip -n {ns} link set {ns}i up; "
           "ip -n {ns} route add default via 10.77.{i}.1".format(ns=ns, i=i))
        os.makedirs("/etc/netns/%s" % ns, exist_ok=True)
        with open("/etc/netns/%s/hosts" % ns, "w") as f:
            f.write("127.0.0.1 localhost\n10.77.0.2 %s\n" % ORCHESTRATOR)
    with open("/proc/sys/net/ipv4/ip_forward") as f:
        forward = f.read().strip()
    sh("echo 1 > /proc/sys/net/ipv4/ip_forward")
    return forward


def netns_command(a, d, exp, run_dir):
    """The orchestrator's command line inside its namespace, with the wrapper beside it."""
    bin_dir = os.path.join(d, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    shutil.copy(os.path.join(a.build, "bin", "sextant"), os.path.join(bin_dir, "sextant"))
    wrapper = os.path.join(bin_dir, "sextant-worker")
    with open(wrapper, "w") as f:
        f.write(WRAPPER % {"worker": os.path.join(a.build, "bin", "sextant-worker"),
                           "netns": NETNS, "name": ORCHESTRATOR, "port": PORT})
    os.chmod(wrapper, 0o755)
    certs = os.path.join(d, "certs")
    subprocess.run(["rm", "-rf", certs], check=True)
    subprocess.run([os.path.join(a.build, "bin", "sextant"), "certs", "init", certs, "--san",
                    ORCHESTRATOR], check=True, stdout=subprocess.DEVNULL)
    return ["ip", "netns", "exec", NETNS + "0", os.path.join(bin_dir, "sextant"), "run", exp,
            "--run-dir", run_dir, "--listen", "10.77.0.2:%d" % PORT, "--tls-dir", certs]


def run_mode(a, model, secure):
    d = os.path.join(a.work, "secure" if secure else "plain")
    os.makedirs(d, exist_ok=True)
    exp = os.path.join(d, "exp.yaml")
    with open(exp, "w") as f:
        f.write(EXPERIMENT % {"rounds": a.rounds, "model": model,
                              "regions": ", ".join("{name: r%d, clients: %d}" % (i + 1, a.clients)
                                                   for i in range(a.regions)),
                              "clients": a.regions * a.clients,
                              "perturb": os.path.join(HERE, "perturb.py"),
                              "secure": "true" if secure else "false"})
    run_dir = os.path.join(d, "run")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    peaks = {}
    start = time.time()
    command = [os.path.join(a.build, "bin", "sextant"), "run", exp, "--run-dir", run_dir]
    if a.netns:
        command = netns_command(a, d, exp, run_dir)
    p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while p.poll() is None:
        sample(run_dir, peaks)
        time.sleep(0.2)
    out = p.stdout.read()
    wall = time.time() - start
    db = sqlite3.connect(os.path.join(run_dir, "state.db"))
    times = [t for (t,) in db.execute(
        "SELECT time FROM rounds WHERE region = '' ORDER BY round")]
    rounds = [b - a_ for a_, b in zip(times, times[1:])]
    return {"mode": "secure" if secure else "plaintext", "exit": p.returncode,
            "network": "namespaces" if a.netns else "loopback",
            "regions": a.regions, "clients_per_region": a.clients,
            "wall_seconds": wall, "round_end_times": times, "round_seconds": rounds,
            "peak_rss_kb": peaks, "output_tail": out[-400:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--megabytes", type=float, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="/tmp/sextant-bench-memory")
    ap.add_argument("--modes", default="plain,secure")
    ap.add_argument("--raw", default=os.path.join(HERE, "..", "runs.jsonl"))
    ap.add_argument("--netns", action="store_true")
    ap.add_argument("--regions", type=int, default=3, help="regions r1.. (--netns: at most 3)")
    ap.add_argument("--clients", type=int, default=2, help="clients per region")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "init.safetensors")
    if not os.path.exists(model) or abs(os.path.getsize(model) / 2**20 - a.megabytes) > 1:
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "make_model.py"), model,
                        str(a.megabytes)], check=True)
    model_mb = os.path.getsize(model) / 2**20
    results = []
    forward = netns_up() if a.netns else None
    try:
        with open(a.raw, "a") as raw:
            for mode in a.modes.split(","):
                r = run_mode(a, model, mode == "secure")
                r["model_mb"] = model_mb
                r["when"] = time.strftime("%Y-%m-%dT%H:%M:%S")
                raw.write(json.dumps(dict(r, bench="memory")) + "\n")
                print(json.dumps(r), file=sys.stderr, flush=True)
                results.append(r)
    finally:
        if a.netns:
            netns_down()
            sh("echo %s > /proc/sys/net/ipv4/ip_forward" % forward)
    print("| process | " + " | ".join("%s peak RSS (x model)" % r["mode"] for r in results) + " |")
    print("|---|" + "---|" * len(results))
    roles = sorted({k for r in results for k in r["peak_rss_kb"]})
    for role in roles:
        cells = []
        for r in results:
            kb = r["peak_rss_kb"].get(role)
            cells.append("%.0f MB (%.2fx)" % (kb / 1024, kb / 1024 / model_mb) if kb else "-")
        print("| %s | %s |" % (role, " | ".join(cells)))
    for r in results:
        print("%s: exit %d, seconds per round %s (first round ends %.1f s after start)" % (
            r["mode"], r["exit"], ["%.1f" % s for s in r["round_seconds"]],
            r["round_end_times"][0] if r["round_end_times"] else -1))


if __name__ == "__main__":
    main()
