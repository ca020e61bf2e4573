#!/usr/bin/env bash
# Learning benchmark of hierarchical FedAvg (issue 7): Fashion-MNIST, 3 regions x 10 clients,
# non-IID Dirichlet(alpha = 0.5) shares, 1 local epoch of plain SGD per round, every client every
# round; rounds to 85% validation accuracy against centralised training of the same MLP with the
# same optimiser (epochs to 85%). One FedAvg round and one centralised epoch both make one pass
# over the training data.
#   bench/federated/run.sh BUILD_DIR [ROUNDS] [EPOCHS]     (defaults: 60 rounds, 30 epochs)
# Writes bench/federated/raw/{fedavg-rounds.csv,centralised.csv,*.log} and prints the summary.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [ROUNDS] [EPOCHS]}
rounds=${2:-60}
epochs=${3:-30}
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$build" && pwd)
out=$here/raw
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

hidden=128 lr=0.05 batch=32 seed=1
cat > "$work/fedavg.yaml" <<YAML
name: bench-fedavg-dirichlet
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "$hidden"}}
federation:
  regions:
    - {name: eu, clients: 10}
    - {name: us, clients: 10}
    - {name: ap, clients: 10}
  rounds: $rounds
  clients_per_round: 1.0
  local_epochs: 1
  local_batch_size: $batch
  local_lr: $lr
  server_optimizer: fedavg
  min_clients: 30
  round_deadline: 600s
  partition: dirichlet
  dirichlet_alpha: 0.5
  seed: $seed
  validation_examples: 10000
  secure_aggregation: false
YAML

echo "== centralised: $epochs epochs of SGD(lr=$lr, batch $batch), MLP $hidden" >&2
SECONDS=0
"$build/bin/sextant-worker" train --model mlp --dataset fashion-mnist --hidden $hidden \
  --optimizer sgd --lr $lr --momentum 0 --batch-size $batch --epochs "$epochs" --seed $seed \
  --threads 1 > "$out/centralised.log" 2>&1
central_s=$SECONDS

echo "== FedAvg: 3 regions x 10 clients, Dirichlet 0.5, $rounds rounds" >&2
SECONDS=0
"$build/bin/sextant" run "$work/fedavg.yaml" --run-dir "$work/run" > "$out/fedavg.log" 2>&1
fed_s=$SECONDS
sqlite3 -csv "$work/run/state.db" \
  "SELECT round, accuracy, loss, clients, time FROM rounds WHERE region = '' ORDER BY round" \
  > "$out/fedavg-rounds.csv"

/usr/bin/python3 - "$out" "$central_s" "$fed_s" <<'PY'
import csv, re, sys
out, central_s, fed_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
central = []
for line in open(f"{out}/centralised.log"):
    m = re.search(r"epoch=(\d+)\b.*\bval_accuracy=([0-9.]+)", line)
    if m:
        central.append((int(m.group(1)), float(m.group(2))))
with open(f"{out}/centralised.csv", "w") as f:
    f.writelines(f"{e},{a}\n" for e, a in central)
fed = [(int(r[0]), float(r[1])) for r in csv.reader(open(f"{out}/fedavg-rounds.csv"))]
def first(curve, target):
    return next((i for i, a in curve if a >= target), None)
for target in (0.80, 0.85):
    print(f"to {target:.0%}: FedAvg round {first(fed, target)}, centralised epoch {first(central, target)}")
print(f"best: FedAvg {max(a for _, a in fed):.4f} (round {max(fed, key=lambda x: x[1])[0]} of {len(fed)}), "
      f"centralised {max(a for _, a in central):.4f} (epoch {max(central, key=lambda x: x[1])[0]} of {len(central)})")
print(f"wall: FedAvg {fed_s:.0f} s ({fed_s / max(len(fed), 1):.1f} s/round), centralised {central_s:.0f} s")
print("curve (round/epoch: FedAvg, centralised):")
for k in sorted(set([i for i, _ in fed] + [e for e, _ in central])):
    f = dict(fed).get(k); c = dict(central).get(k)
    if k <= 10 or k % 5 == 0:
        print(f"  {k:3d}: {f if f is None else f'{f:.4f}'}  {c if c is None else f'{c:.4f}'}")
PY
