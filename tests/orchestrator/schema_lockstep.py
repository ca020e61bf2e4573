#!/usr/bin/python3
"""schema/experiment.schema.json in lockstep with the loader (orchestrator/core/experiment_loader.cc).

Checks, with Debian's python3-jsonschema (Draft202012Validator) and python3-yaml:
  1. the schema is a valid draft 2020-12 schema, and `sextant schema` prints it byte for byte;
  2. every experiment under examples/ begins with the yaml-language-server modeline that points at
     the schema, is valid under the schema, and `sextant validate` accepts it;
  3. every yaml block of README.md and docs/*.md that is an experiment file (a top-level name: and
     objective: or objectives:) begins with the modeline (its path relative to the page), is
     valid under the schema, and `sextant validate` accepts it or refuses it only for checks the
     schema cannot express (INEXPRESSIBLE below); every other block (a fragment) uses only keys
     the schema knows. The blocks are found, and the folder each is validated in is made, by
     doc_yaml_blocks() and prepare_block() below, which tests/docs/docs_test.py shares;
  4. a deterministic corpus of mutations of valid experiments (wrong types, unknown keys, missing
     keys, out-of-range values, bad enums, at every level including federation and resources,
     plus cases for each conditional rule) is judged by the schema and by `sextant validate`:
     each must be refused by both or accepted by both. A mutation the loader refuses only for
     checks listed in INEXPRESSIBLE (comparisons between values, references, files) is counted
     apart, by rule, and does not fail the test. Every other disagreement is listed and fails it.

YAML is read with the YAML 1.2 core schema (as yaml-cpp reads numbers and the yaml-language-server
reads files by default): `1e-5` is a number, `yes` and `2024-01-01` are text.

usage: schema_lockstep.py --sextant BUILD/bin/sextant [--source DIR] [--exhaustive] [-v]
  --exhaustive  every probe value at every leaf (a few thousand mutations; for development)
"""

import argparse
import concurrent.futures
import copy
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import jsonschema
    import yaml
except ImportError as e:
    sys.exit(f"schema_lockstep: {e}; install python3-jsonschema and python3-yaml "
             "(scripts/install-deps)")

MODELINE = "# yaml-language-server: $schema="


# --- YAML 1.2 core schema on PyYAML -------------------------------------------------------------

# libyaml's parser where python3-yaml has it (Debian's does): the corpus is parsed a few thousand
# times.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class Yaml12Loader(_SafeLoader):
    """PyYAML's SafeLoader with the YAML 1.2 core schema's implicit types (no yes/no, octal 010,
    sexagesimal, timestamps or 1.1 floats)."""


Yaml12Loader.yaml_implicit_resolvers = {}
for _tag, _regexp, _first in [
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
     r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+0123456789."),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
]:
    Yaml12Loader.add_implicit_resolver(_tag, re.compile(_regexp), list(_first))


def _int12(loader, node):
    v = loader.construct_scalar(node)
    if v.startswith("0o"):
        return int(v[2:], 8)
    if v.startswith("0x"):
        return int(v[2:], 16)
    return int(v, 10)


def _float12(loader, node):
    v = loader.construct_scalar(node).lower()
    if v.endswith(".inf"):
        return float("-inf") if v.startswith("-") else float("inf")
    if v.endswith(".nan"):
        return float("nan")
    return float(v)


Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _int12)
Yaml12Loader.add_constructor("tag:yaml.org,2002:float", _float12)


def load12(text):
    return yaml.load(text, Loader=Yaml12Loader)


class Dumper(_SafeDumper):
    def ignore_aliases(self, data):
        return True


def dump(doc):
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=1000)


# --- What the schema cannot express --------------------------------------------------------------

# (rule, error path regex, message regex): a loader error matching one of these is a check that
# JSON Schema cannot express (see the schema's top-level $comment). The path is the dotted key
# path the loader puts before ": " in its message.
INEXPRESSIBLE = [
    ("min < max", r"", r"must be less than max \(min"),
    ("constraint min <= max", r"^constraints\[", r"must not exceed max"),
    ("step <= max - min", r"^parameters\.", r"must be at most max - min"),
    ("min_instances <= max_instances", r"^resources\.pools\[", r"must be <= max_instances"),
    ("enqueue entries <= max_trials", r"^search\.enqueue$", r"configurations, but search.max_trials"),
    ("enqueue values against the parameters", r"^search\.enqueue\[", r""),
    ("when: names a parameter and its value", r"^parameters\.[^.]+\.when",
     r"no parameter named|cannot depend on itself|is a float; a condition|is not one of|"
     r"is not an integer in|conditions form a cycle"),
    ("${name} names a parameter", r"^trial\.", r"names no parameter"),
    ("distinct categorical values as text", r"^parameters\.", r"duplicate value"),
    ("distinct objective metrics", r"^objectives\[", r"is already an objective"),
    ("distinct pool names", r"^resources\.pools\[", r"duplicate pool"),
    ("distinct region names", r"^federation\.regions\[", r"duplicate region"),
    ("clients against the regions' total", r"^federation\.(min_clients|clients_per_round)$",
     r"the total number of clients"),
    ("secure sampling takes 2 clients of every region", r"^federation\.clients_per_round$",
     r"samples at least 2 clients in each region"),
    ("buffered clients_per_round >= buffer_size", r"^federation\.clients_per_round$",
     r"cannot fill a buffer of buffer_size"),
    ("a search's simulate keys against a federated run's", r"^simulate\.",
     r"applies to a plain federated run's forecast|does not apply to a plain federated run"),
    ("a federated run's pools place every participant", r"^(federation\.(regions\[|global_region)|resources\.|budget\.)",
     r"has no pool that can host|is not a region of the federation|prices transfer from|"
     r"is billed for the instances|the local or the slurm provider|less than one round's cost|"
     r"prices no transfer|applies to a federated run|unknown region"),
    ("buffer_size >= 2 per region", r"^federation\.(buffer_size|mode)$",
     r"need buffer_size >= 2 per region"),
    ("stragglers name existing clients", r"^federation\.stragglers\.clients\[",
     r"is not a client of the federation"),
    ("the catalog's regions, instances, markets and prices", r"^(resources|budget)\.",
     r"unknown region|unknown instance type|sells no|cannot hold one trial|"
     r"less than one billing increment|cannot read catalog|the catalog .* has errors"),
    # JSON has one number 2: 2.0 and 1e3 are whole numbers to the schema, text to the loader.
    ("a seed written with a fraction or an exponent (2.0, 1e3)", r"^(search|simulate)\.seed$",
     r"expected a non-negative integer, got '[-+]?[0-9]*\.?[0-9]*([eE][-+]?[0-9]+)?'"),
    ("a name written as a number with a fraction or an exponent (1.0, 1e3)", r"^name$",
     r"invalid name '[-+]?[0-9]*\.?[0-9]*([eE][-+]?[0-9]+)?'"),
    ("warm_start runs exist and share the objectives", r"^search\.warm_start\.runs\[", r""),
    ("model.file is a safetensors file", r"^federation\.model\.file$", r""),
    ("data_dir folders exist and differ", r"^federation\.data_dir$",
     r"does not exist|the same folder"),
    ("seconds_per_unit_expression parses over the parameters",
     r"^simulate\.seconds_per_unit_expression$", r""),
]

ERROR_LINE = re.compile(r"^.*?:(\d+):(\d+): (.*)$")


def inexpressible_rule(errors):
    """The rule every loader error falls under, or None when one does not fall under any."""
    rules = set()
    for message in errors:
        path, _, text = message.partition(": ")
        if not text:
            path, text = "", message
        for rule, path_re, text_re in INEXPRESSIBLE:
            if re.search(path_re, path) and re.search(text_re, text):
                rules.add(rule)
                break
        else:
            return None
    return " + ".join(sorted(rules))


# --- The judges ----------------------------------------------------------------------------------

def _is_number_text(value):
    if not isinstance(value, str):
        return False
    try:
        float(value)
        return True
    except ValueError:
        pass
    try:
        int(value, 16 if value.lower().startswith(("0x", "-0x", "+0x")) else 10)
        return True
    except ValueError:
        return False


class Judges:
    def __init__(self, sextant, schema, workdir):
        self.sextant = sextant
        self.validator = jsonschema.Draft202012Validator(schema)
        self.workdir = workdir
        self.count = 0

    def schema_errors(self, doc):
        return sorted(
            "/".join(str(p) for p in e.absolute_path) + ": " + e.message
            for e in self.validator.iter_errors(doc))

    def only_quoted_numbers(self, text):
        """True when every schema error of text is at a number written as quoted text ("50",
        "0x10"), which the loader reads as a number and the schema refuses by design."""
        docs = [d for d in yaml.load_all(text, Loader=Yaml12Loader) if d is not None]
        errors = [e for d in docs for e in self.validator.iter_errors(d)]
        return bool(errors) and all(_is_number_text(e.instance) for e in errors)

    def loader(self, path):
        """(accepted, [error messages]) from `sextant validate`."""
        p = subprocess.run([self.sextant, "validate", path], capture_output=True, text=True,
                           timeout=60)
        if p.returncode not in (0, 2):
            raise RuntimeError(f"sextant validate {path}: exit {p.returncode}: {p.stderr}")
        errors = []
        for line in p.stderr.splitlines():
            m = ERROR_LINE.match(line)
            if m and ": warning: " not in line:
                errors.append(m.group(3))
        return p.returncode == 0, errors

    def judge(self, text, name):
        """Writes text as an experiment file in the work directory (where the stand-in files are)
        and returns (schema errors, loader accepted, loader errors)."""
        path = os.path.join(self.workdir, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(text)
        # An editor checks each document of a file on its own; the loader allows one.
        docs = [d for d in yaml.load_all(text, Loader=Yaml12Loader) if d is not None]
        errors = [e for d in docs for e in self.schema_errors(d)]
        accepted, loader_errors = self.loader(path)
        return errors, accepted, loader_errors


# --- Stand-ins for the files experiments name ----------------------------------------------------

def write_safetensors(path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + struct.pack("<2f", 0.5, -0.5))


def prepare_files(folder, doc):
    """Creates what the loader opens for doc in folder: federation.model.file (a tiny safetensors
    file) and every client's federation.data_dir, when they are missing. Examples get them from
    their own prepare scripts."""
    fed = doc.get("federation") if isinstance(doc, dict) else None
    if not isinstance(fed, dict):
        return
    model = fed.get("model")
    if isinstance(model, dict) and isinstance(model.get("file"), str):
        path = os.path.join(folder, model["file"])
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_safetensors(path)
    template = fed.get("data_dir")
    if isinstance(template, str):
        for region in fed.get("regions") or []:
            if not isinstance(region, dict) or not isinstance(region.get("clients"), int):
                continue
            for i in range(min(region["clients"], 64)):
                d = template.replace("{region}", str(region.get("name"))).replace("{index}", str(i))
                os.makedirs(os.path.join(folder, d), exist_ok=True)


# --- The valid experiments the corpus mutates ----------------------------------------------------

BASES = {
    "search": """
name: lockstep-search
objective: {metric: loss, goal: minimize, target: 0.1}
constraints:
  - {metric: latency_ms, min: 1, max: 20}
parameters:
  x0: {type: float, min: -5, max: 10}
  x1: {type: float, min: 0, max: 15, step: 0.5}
  lr: {type: float, min: 1.0e-5, max: 0.1, log: true, grid_points: 4}
  layers: {type: int, min: 1, max: 8, step: 1}
  width: {type: int, min: 16, max: 256, log: true}
  opt: {type: categorical, values: [sgd, adam]}
  momentum: {type: float, min: 0.5, max: 0.99, when: {opt: sgd}}
search:
  sampler: bayesian
  scheduler: asha
  fidelity: {name: epoch, min: 1, max: 27, reduction_factor: 3}
  seed: 1
  max_trials: 30
  max_concurrent: 4
  initial_design: 5
  asha_mode: promotion
  cost_aware: true
  mode: commands
  max_failed_trials: 10
  max_failed_in_a_row: 3
  enqueue:
    - {x0: 1.5, x1: 2.0, lr: 0.001, layers: 2, width: 32, opt: adam}
trial:
  command: [python3, objective.py, "--x0=${x0}", "--lr=${lr}"]
  timeout: 10m
  env: {OMP_NUM_THREADS: "1", LR: "${lr}"}
  working_dir: .
  max_restarts: 1
budget: {max_cost: 50.0, max_wall_time: 2h, currency: USD}
resources:
  provider: simulated
  idle_timeout: 5m
  placement: {policy: mixed, preemption_cooldown: 10m}
  per_trial: {gpus: 1, gpu_memory_gb: 40, cpus: 8, checkpoints: true}
  pools:
    - {name: us-spot, region: us-east-1, instance: gpu.1x, market: spot, min_instances: 0, max_instances: 8}
    - {name: eu-od, region: eu-west-1, instance: gpu.1x, market: on_demand}
simulate:
  seconds_per_unit: 10m
  seconds_per_trial: 10m
  seconds_per_unit_expression: "60 + 0.5 * width"
  attempt_overhead: 30s
  objective: branin
  noise: 0.01
  checkpoint_every: 1
  checkpoint_time: 20s
  boot_time: 60s
  seed: 7
  tick: 10s
""",
    "multi": """
name: lockstep-multi
objectives:
  - {metric: val_accuracy, goal: maximize, reference: 0.5}
  - {metric: cost, goal: minimise}
parameters:
  hidden: {type: int, min: 16, max: 128}
  lr: {type: float, min: 0.001, max: 0.1, log: true}
  batch: {type: categorical, values: [32, 64, 128]}
search:
  sampler: nsga2
  scheduler: hyperband
  fidelity: {name: epoch, min: 1, max: 9}
  max_trials: 20
  max_concurrent: 2
trial:
  builtin:
    model: mlp
    dataset: synthetic
    epochs: 9
    gpus: 0
    args: {hidden: "${hidden}", threads: "1", lr: "${lr}"}
budget: {max_cost: 10}
resources:
  provider: local
  pools:
    - {name: cpu, region: us-east-1, instance: cpu.small, market: on_demand, max_instances: 2}
""",
    "ask_tell": """
name: lockstep-ask
objective: {metric: loss}
parameters:
  x: {type: float, min: 0, max: 1}
  n: {type: int, min: 1, max: 4}
search: {mode: ask_tell, lease: 10m, sampler: tpe, max_trials: 50, max_concurrent: 4}
trial: {max_restarts: 2}
""",
    "federated": """
name: lockstep-fed
objective: {metric: val_accuracy, goal: maximize}
federation:
  regions:
    - {name: east, clients: 3}
    - {name: west, clients: 2}
  rounds: 5
  clients_per_round: 0.8
  local_epochs: 1
  local_batch_size: 32
  local_lr: 0.05
  proximal_mu: 0.01
  aggregation: fedavg
  server_optimizer: fedadam
  server_lr: 0.5
  min_clients: 2
  max_failed_rounds: 3
  round_deadline: 5m
  eval_every: 1
  partition: dirichlet
  dirichlet_alpha: 0.5
  secure_aggregation: true
  seed: 1
  examples_per_client: 1000
  validation_examples: 2000
  hide_region_sums: true
  update_compression: int8
  client_selection: random
  dp: {noise_multiplier: 1.1, clip_norm: 1.0, delta: 1.0e-5, target_epsilon: 8, noise: distributed}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, epochs: 1}
""",
    "robust": """
name: lockstep-robust
objective: {metric: val_accuracy, goal: maximize}
parameters: {}
federation:
  regions:
    - {name: east, clients: 3}
    - {name: west, clients: 1}
  secure_aggregation: false
  aggregation: multi_krum
  trim_fraction: 0.2
  byzantine_clients: 1
  krum_selected: 2
  update_compression: fp16
  client_selection: fastest
  stragglers: {clients: [east/0, west/0], slowdown: 5}
  partition: shards
trial: {builtin: {model: cnn, epochs: 1}}
""",
    "own": """
name: lockstep-own
objective: {metric: val_accuracy, goal: maximize}
federation:
  regions:
    - {name: east, clients: 2}
    - {name: west, clients: 1}
  secure_aggregation: false
  data: own
  data_dir: sites/{region}-{index}
  model: {file: init.safetensors}
  client_command: [/usr/bin/python3, client.py]
  evaluate_command: [/usr/bin/python3, evaluate.py]
""",
    "buffered": """
name: lockstep-buffered
objective: {metric: val_accuracy, goal: maximize}
federation:
  regions:
    - {name: east, clients: 4}
    - {name: west, clients: 4}
  mode: buffered
  buffer_size: 4
  max_staleness: 8
  staleness_weighting: constant
  server_lr: 0.8
  stragglers: {clients: [east/1], slowdown: 3}
trial: {builtin: {model: mlp, epochs: 1}}
""",
    "tuning": """
name: lockstep-tuning
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.001, max: 0.1, log: true}
  server_optimizer: {type: categorical, values: [fedavg, fedadam]}
search: {sampler: random, scheduler: asha, fidelity: {name: round, min: 1, max: 9}, max_trials: 8}
federation:
  regions: [{name: east, clients: 2}]
  rounds: 9
trial: {builtin: {model: mlp, epochs: 1}}
""",
}

# Values put in place of each scalar: wrong types, edges of the ranges the loader checks, and
# values of other keys' enums. In the default run each leaf gets PROBES_PER_LEAF of them, chosen
# by rotation so that every probe lands on many kinds of leaf; --exhaustive gives it all.
PROBES = [
    {"k": "v"}, {}, [1, 2], None, "abc", True, "True", "y", "on", "1e3", "0x10", -1, 0, 0.25, 0.5, 1, 2, 2.5, 3, 1025, 30001,
    2147483648, 9.5e15, "", "10m", "-5s", "0s", "yes", "maybe", "own", "fedavg", "minimize",
    "float", "spot", "x" * 65, "Upper", "a b", "east/9", "{other}",
]
PROBES_PER_LEAF = 2
DROPPED = object()


def walk(node, path=()):
    """Yields (path, node) for every node, parents first."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, path + (i,))


def replaced(doc, path, value):
    out = copy.deepcopy(doc)
    if not path:
        return value
    parent = out
    for p in path[:-1]:
        parent = parent[p]
    if value is DROPPED:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def label(path):
    return ".".join(str(p) for p in path) or "(root)"


def generic_mutations(base_name, doc, exhaustive):
    """Mutations at every node of doc: each key dropped, an unknown key added to each mapping,
    each list emptied and cut to its first element, each scalar replaced by probes."""
    leaf = 0
    for path, node in walk(doc):
        where = f"{base_name}:{label(path)}"
        if isinstance(node, dict):
            for k in node:
                yield f"{where}: drop {k}", replaced(doc, path + (k,), DROPPED)
            grown = dict(node)
            grown["unknown_key"] = 1
            yield f"{where}: add unknown_key", replaced(doc, path, grown)
        elif isinstance(node, list):
            yield f"{where}: empty list", replaced(doc, path, [])
            if len(node) > 1:
                yield f"{where}: first element only", replaced(doc, path, node[:1])
            yield f"{where}: first element twice", replaced(doc, path, [node[0]] + node)
        else:
            picks = (range(len(PROBES)) if exhaustive else
                     [(leaf * 5 + j * 9) % len(PROBES) for j in range(PROBES_PER_LEAF)])
            for i in picks:
                yield f"{where} = {json.dumps(PROBES[i])}", replaced(doc, path, PROBES[i])
            leaf += 1


def base(name):
    return load12(BASES[name])


def patch(base_name, **changes):
    """BASES[name] with changes at paths whose keys are joined by '__' (list indices as digits);
    DROPPED removes the key."""
    doc = base(base_name)
    for dotted, value in changes.items():
        path = [int(p) if p.isdigit() else p for p in dotted.split("__")]
        parent = doc
        for p in path[:-1]:
            parent = parent.setdefault(p, {}) if isinstance(parent, dict) else parent[p]
        if value is DROPPED:
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = value
    return doc


def targeted_mutations():
    """Cases for each rule between keys that the schema expresses (and a few it cannot, to keep
    the INEXPRESSIBLE list honest), both accepted and refused. Keys are joined by '__'."""
    ask = {"mode": "ask_tell", "max_trials": 5}
    cases = [
        ("objective and objectives", patch("search", objectives=[{"metric": "a"}, {"metric": "b"}])),
        ("neither objective nor objectives", patch("search", objective=DROPPED)),
        ("one objectives entry", patch("multi", objectives=[{"metric": "val_accuracy"}])),
        ("five objectives", patch("multi", objectives=[{"metric": f"m{i}"} for i in range(5)])),
        ("nsga2 with one objective", patch("search", search__sampler="nsga2", search__cost_aware=DROPPED)),
        ("cost_aware with tpe", patch("search", search__sampler="tpe")),
        ("cost_aware without a sampler", patch("search", search__sampler=DROPPED)),
        ("cost_aware: yes with bayesian", patch("search", search__cost_aware="yes")),
        ("cost_aware: no with tpe", patch("search", search__cost_aware="no", search__sampler="tpe")),
        ("cost_aware with objectives", patch("multi", search__sampler="bayesian", search__cost_aware=True)),
        ("median with objectives", patch("multi", search__scheduler="median")),
        ("median with one objective", patch("search", search__scheduler="median")),
        ("cost objective, local provider, no pools", patch("multi", resources=DROPPED)),
        ("cost objective, local provider, empty pools", patch("multi", resources__pools=[])),
        ("cost objective, simulated provider", patch("multi", resources={"provider": "simulated"})),
        ("cost objective in a federated search", patch("multi", resources=DROPPED, federation={"regions": [{"name": "east", "clients": 2}]}, trial={"builtin": {"model": "mlp"}}, search={"sampler": "nsga2"}, parameters={"local_lr": {"type": "float", "min": 0.01, "max": 0.1}})),
        ("federated search tuning a key the federation lacks", patch("multi", resources=DROPPED, federation={"regions": [{"name": "east", "clients": 2}]}, trial={"builtin": {"model": "mlp"}}, search={"sampler": "nsga2"})),
        ("scheduler without fidelity", patch("search", search__fidelity=DROPPED)),
        ("scheduler none without fidelity", patch("search", search__fidelity=DROPPED, search__scheduler="none")),
        ("lease in commands mode", patch("search", search__lease="10m")),
        ("lease 0 in ask_tell", patch("ask_tell", search__lease=0)),
        ("lease 0s in ask_tell", patch("ask_tell", search__lease="0s")),
        ("lease 0.5s in ask_tell", patch("ask_tell", search__lease="0.5s")),
        ("lease 1h30m in ask_tell", patch("ask_tell", search__lease="1h30m")),
        ("lease '90' in ask_tell", patch("ask_tell", search__lease="90")),
        ("lease 10 m in ask_tell", patch("ask_tell", search__lease="10 m")),
        ("max_failed_trials in ask_tell", patch("ask_tell", search__max_failed_trials=3)),
        ("ask_tell with trial.command", patch("ask_tell", trial={"command": ["x"]})),
        ("ask_tell without trial", patch("ask_tell", trial=DROPPED)),
        ("ask_tell with resources.pools", patch("ask_tell", resources={"pools": []})),
        ("ask_tell with resources.provider", patch("ask_tell", resources={"provider": "local"})),
        ("ask_tell with federation", patch("tuning", search=ask)),
        ("commands mode without trial", patch("search", trial=DROPPED)),
        ("trial with command and builtin", patch("search", trial__builtin={"model": "mlp"})),
        ("trial with neither command nor builtin", patch("search", trial__command=DROPPED)),
        ("trial.command as one string", patch("search", trial__command="python3 objective.py")),
        ("env name with a dash", patch("search", trial__env={"A-B": "1"})),
        ("env value a number", patch("search", trial__env={"A": 1})),
        ("builtin.args unknown option", patch("multi", trial__builtin__args={"hiddn": "1"})),
        ("log with min 0", patch("search", parameters__lr__min=0)),
        ("log: no with min 0", patch("search", parameters__lr__min=0, parameters__lr__log="no")),
        ("log: on with min 0", patch("search", parameters__lr__min=0, parameters__lr__log="on")),
        ("log: Y with min 0", patch("search", parameters__lr__min=0, parameters__lr__log="Y")),
        ("log: maybe", patch("search", parameters__lr__log="maybe")),
        ("float log with step", patch("search", parameters__lr__step=0.01)),
        ("int log with step 2", patch("search", parameters__width__step=2)),
        ("int log with step 1", patch("search", parameters__width__step=1)),
        ("int with min 1.0", patch("search", parameters__layers__min=1.0)),
        ("int with min 1.5", patch("search", parameters__layers__min=1.5)),
        ("int step 0.5", patch("search", parameters__layers__step=0.5)),
        ("float step 0", patch("search", parameters__x1__step=0)),
        ("categorical with min", patch("search", parameters__opt__min=0)),
        ("categorical without values", patch("search", parameters__opt__values=DROPPED)),
        ("categorical with one value", patch("search", parameters__opt__values=["sgd"])),
        ("categorical values as numbers", patch("multi", parameters__batch__values=[16, 32.5, True])),
        ("categorical values repeated", patch("multi", parameters__batch__values=[32, 32])),
        ("float with values", patch("search", parameters__x0__values=["a", "b"])),
        ("float without max", patch("search", parameters__x0__max=DROPPED)),
        ("parameter named 1x", patch("ask_tell", parameters={"1x": {"type": "float", "min": 0, "max": 1}})),
        ("parameter type loguniform", patch("ask_tell", parameters__x__type="loguniform")),
        ("parameter with low/high", patch("ask_tell", parameters__x={"type": "float", "low": 0, "high": 1})),
        ("grid_points 1", patch("search", parameters__lr__grid_points=1)),
        ("when with a list value", patch("search", parameters__momentum__when={"opt": ["sgd"]})),
        ("when null", patch("search", parameters__momentum__when=None)),
        ("empty when", patch("search", parameters__momentum__when={})),
        ("when on a missing parameter", patch("search", parameters__momentum__when={"opt2": "sgd"})),
        ("min > max", patch("search", parameters__x0__min=20)),
        ("enqueue of 21 without max_trials", patch("ask_tell", search={"enqueue": [{"x": 0.5, "n": 1}] * 21})),
        ("enqueue of 20 without max_trials", patch("ask_tell", search={"enqueue": [{"x": 0.5, "n": 1}] * 20})),
        ("enqueue of 31 with max_trials 30", patch("search", search__enqueue=[{"x0": 1, "x1": 1, "lr": 0.01, "layers": 1, "width": 16, "opt": "adam"}] * 31)),
        ("enqueue entry a list", patch("search", search__enqueue=[[1]])),
        ("warm_start without runs", patch("search", search__warm_start={})),
        ("warm_start with no runs", patch("search", search__warm_start={"runs": []})),
        ("warm_start on a missing run", patch("search", search__warm_start={"runs": ["runs/none"]})),
        ("reduction_factor 1.5", patch("search", search__fidelity__reduction_factor=1.5)),
        ("fidelity min 0", patch("search", search__fidelity__min=0)),
        ("branin without x1", patch("search", parameters__x1=DROPPED, search__enqueue=DROPPED)),
        ("branin with a categorical x1", patch("search", parameters__x1={"type": "categorical", "values": ["a", "b"]}, search__enqueue=DROPPED)),
        ("curve without x1", patch("search", parameters__x1=DROPPED, search__enqueue=DROPPED, simulate__objective="curve")),
        ("tick 0", patch("search", simulate__tick=0)),
        ("tick 0.0s", patch("search", simulate__tick="0.0s")),
        ("tick 1e-3", patch("search", simulate__tick=1e-3)),
        ("boot_time 0", patch("search", simulate__boot_time=0)),
        ("duration -5", patch("search", trial__timeout=-5)),
        ("duration 1h30m", patch("search", trial__timeout="1h30m")),
        ("duration 250ms", patch("search", trial__timeout="250ms")),
        ("duration 1.5h", patch("search", trial__timeout="1.5h")),
        ("duration 10min", patch("search", trial__timeout="10min")),
        ("duration 1d", patch("search", trial__timeout="1d")),
        ("goal maximise", patch("search", objective__goal="maximise")),
        ("goal max", patch("search", objective__goal="max")),
        ("direction instead of goal", patch("search", objective={"metric": "loss", "direction": "minimize"})),
        ("name of 64 characters", patch("ask_tell", name="x" * 64)),
        ("name of 65 characters", patch("ask_tell", name="x" * 65)),
        ("name 2024", patch("ask_tell", name=2024)),
        ("name with a dot", patch("ask_tell", name="a.b")),
        ("n_trials at the top", patch("ask_tell", n_trials=5)),
        ("pool min_instances 2 without max_instances", patch("search", resources__pools__1__min_instances=2)),
        ("pool min_instances 1 without max_instances", patch("search", resources__pools__1__min_instances=1)),
        ("pool min_instances 9 over max_instances 8", patch("search", resources__pools__0__min_instances=9)),
        ("pool name with a slash", patch("search", resources__pools__0__name="us/spot")),
        ("pool name starting with a dot", patch("search", resources__pools__0__name=".x")),
        ("pool region unknown to the catalog", patch("search", resources__pools__0__region="mars-1")),
        ("pools a mapping", patch("search", resources__pools={"name": "x"})),
        ("per_trial gpus 1025", patch("search", resources__per_trial__gpus=1025)),
        ("per_trial gpus 9 (no instance holds it)", patch("search", resources__per_trial__gpus=9)),
        ("placement policy cheapest", patch("search", resources__placement__policy="cheapest")),
        ("constraint without max or min", patch("search", constraints=[{"metric": "m"}])),
        ("constraints empty", patch("search", constraints=[])),
        ("constraint min over max", patch("search", constraints=[{"metric": "m", "min": 5, "max": 1}])),
        ("plain federation without parameters", patch("federated")),
        ("plain federation, parameters null", patch("federated", parameters=None)),
        ("plain federation, parameters a list", patch("federated", parameters=[])),
        ("search without parameters", patch("search", parameters=DROPPED, search__enqueue=DROPPED, simulate__objective="curve", simulate__seconds_per_unit_expression=DROPPED, trial__command=["x"], trial__env=DROPPED)),
        ("search with empty parameters", patch("ask_tell", parameters={})),
        ("federated search without parameters", patch("tuning", parameters=DROPPED)),
        ("own model without trial", patch("own")),
        ("own model with a search and no trial", patch("own", parameters={"x": {"type": "float", "min": 0, "max": 1}}, search={"max_trials": 2})),
        ("no regions", patch("federated", federation__regions=DROPPED)),
        ("empty regions", patch("federated", federation__regions=[])),
        ("hide_region_sums with one region", patch("federated", federation__regions=[{"name": "east", "clients": 3}])),
        ("hide_region_sums without secure aggregation", patch("federated", federation__secure_aggregation=False, federation__dp__noise="central")),
        ("hide_region_sums: no without secure aggregation", patch("federated", federation__secure_aggregation="off", federation__dp__noise="central", federation__hide_region_sums="no")),
        ("fp16 under secure aggregation", patch("federated", federation__update_compression="fp16")),
        ("fp16 without secure aggregation", patch("federated", federation__update_compression="fp16", federation__secure_aggregation="no", federation__hide_region_sums=False, federation__dp__noise="central")),
        ("robust rule under secure aggregation", patch("robust", federation__secure_aggregation=DROPPED, federation__update_compression="int8")),
        ("median without secure aggregation", patch("robust", federation__aggregation="median")),
        ("dp with median", patch("robust", federation__aggregation="median", federation__dp={"noise_multiplier": 1, "clip_norm": 1})),
        ("dp without clip_norm", patch("federated", federation__dp__clip_norm=DROPPED)),
        ("dp delta 1", patch("federated", federation__dp__delta=1)),
        ("distributed noise without secure aggregation", patch("robust", federation__aggregation="fedavg", federation__dp={"noise_multiplier": 1, "clip_norm": 1, "noise": "distributed"})),
        ("central noise without secure aggregation", patch("robust", federation__aggregation="fedavg", federation__dp={"noise_multiplier": 1, "clip_norm": 1})),
        ("secure aggregation with a region of 1 client", patch("robust", federation__secure_aggregation=True, federation__aggregation="fedavg", federation__update_compression="none")),
        ("trim_fraction 0.5", patch("robust", federation__trim_fraction=0.5)),
        ("clients_per_round over the clients", patch("federated", federation__clients_per_round=9)),
        ("min_clients over the clients", patch("federated", federation__min_clients=9)),
        ("buffered with clients_per_round below buffer_size", patch("buffered", federation__clients_per_round=2)),
        ("buffered with clients_per_round at buffer_size", patch("buffered", federation__clients_per_round=4)),
        ("buffered with round_deadline", patch("buffered", federation__round_deadline="1m")),
        ("buffered with dp", patch("buffered", federation__dp={"noise_multiplier": 1, "clip_norm": 1})),
        ("buffered with client_selection fastest", patch("buffered", federation__client_selection="fastest")),
        ("buffered with client_selection random", patch("buffered", federation__client_selection="random")),
        ("buffered secure with buffer_size 1", patch("buffered", federation__buffer_size=1)),
        ("buffered secure with buffer_size 3 over 2 regions", patch("buffered", federation__buffer_size=3)),
        ("buffered plaintext with buffer_size 1", patch("buffered", federation__buffer_size=1, federation__secure_aggregation=False)),
        ("buffered secure with hide_region_sums", patch("buffered", federation__hide_region_sums=True)),
        ("buffered plaintext with krum", patch("buffered", federation__secure_aggregation=False, federation__aggregation="krum")),
        ("buffer_size in sync mode", patch("buffered", federation__mode="sync")),
        ("max_staleness in sync mode", patch("buffered", federation__mode=DROPPED, federation__buffer_size=DROPPED, federation__staleness_weighting=DROPPED)),
        ("hide_region_sums with client_selection fastest", patch("federated", federation__client_selection="fastest")),
        ("stragglers on a missing client", patch("buffered", federation__stragglers__clients=["east/9"])),
        ("stragglers client without an index", patch("buffered", federation__stragglers__clients=["east"])),
        ("stragglers slowdown 0.5", patch("buffered", federation__stragglers__slowdown=0.5)),
        ("stragglers without clients", patch("buffered", federation__stragglers__clients=DROPPED)),
        ("data own without model", patch("own", federation__model=DROPPED, federation__evaluate_command=DROPPED, trial={"command": ["x"]})),
        ("data own without client_command", patch("own", federation__client_command=DROPPED)),
        ("data own with partition", patch("own", federation__partition="iid")),
        ("data fashion-mnist with data_dir", patch("own", federation__data="fashion-mnist")),
        ("data_dir without data", patch("own", federation__data=DROPPED)),
        ("data_dir with another placeholder", patch("own", federation__data_dir="sites/{name}")),
        ("data_dir shared by clients", patch("own", federation__data_dir="sites/{region}-0")),
        ("model without client_command", patch("robust", federation__model={"file": "init.safetensors"})),
        ("model file missing", patch("own", federation__model__file="missing.safetensors")),
        ("evaluate_command without model", patch("robust", federation__evaluate_command=["x"])),
        ("evaluate_command empty", patch("own", federation__evaluate_command=[])),
        ("catalog missing", patch("search", resources__catalog="missing-catalog.yaml")),
        ("expression over an unknown name", patch("search", simulate__seconds_per_unit_expression="60 * depth")),
        ("budget max_cost 0", patch("search", budget__max_cost=0)),
        ("budget max_cost below one increment", patch("search", budget__max_cost=0.0001)),
        ("a second YAML document", None),
        ("search.seed 2.0", patch("search", search__seed=2.0)),
    ]
    return cases + [
        # Where the schema is stricter than the loader, on purpose (its $comment says so).
        ("max_cost as quoted text", patch("search", budget__max_cost="50")),
        ("max_trials as quoted text", patch("search", search__max_trials="30")),
    ]


QUOTED_NUMBER = "a number written as quoted text"


# --- The checks ----------------------------------------------------------------------------------

def check_schema_and_binary(source, sextant, schema_text):
    problems = []
    schema = json.loads(schema_text)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        problems.append(f"schema/experiment.schema.json is not a valid draft 2020-12 schema: {e}")
    printed = subprocess.run([sextant, "schema"], capture_output=True, timeout=60)
    if printed.returncode != 0 or printed.stdout != schema_text.encode():
        problems.append("`sextant schema` does not print schema/experiment.schema.json byte for "
                        "byte (rebuild: it is embedded at build time)")
    return schema, problems


def is_experiment(doc):
    return isinstance(doc, dict) and "name" in doc and ("objective" in doc or "objectives" in doc)


def check_examples(source, judges):
    problems, checked = [], 0
    schema_path = os.path.join(source, "schema", "experiment.schema.json")
    for folder, _, files in sorted(os.walk(os.path.join(source, "examples"))):
        for f in sorted(files):
            if not f.endswith((".yaml", ".yml")):
                continue
            path = os.path.join(folder, f)
            rel = os.path.relpath(path, source)
            text = open(path).read()
            doc = load12(text)
            if not is_experiment(doc):
                if text.startswith(MODELINE):
                    problems.append(f"{rel}: not an experiment file, but has the schema modeline")
                continue
            checked += 1
            want = MODELINE + os.path.relpath(schema_path, folder)
            if text.splitlines()[0] != want:
                problems.append(f"{rel}: the first line must be `{want}`")
            for e in judges.schema_errors(doc):
                problems.append(f"{rel}: schema: {e}")
            # In a copy of its folder, with stand-ins for what its prepare scripts would write.
            copy_dir = tempfile.mkdtemp(dir=judges.workdir)
            shutil.copytree(folder, copy_dir, dirs_exist_ok=True)
            prepare_files(copy_dir, doc)
            accepted, errors = judges.loader(os.path.join(copy_dir, f))
            if not accepted:
                problems.append(f"{rel}: sextant validate refuses it: {errors}")
    if checked == 0:
        problems.append("no experiment files found under examples/")
    return checked, problems


# --- The yaml blocks of the docs (shared with tests/docs/docs_test.py) ---------------------------

FRAGMENT = "# fragment"  # a line of an experiment block that is not meant to be validated alone
EXAMPLE_LINE = re.compile(r"^# (examples/\S+\.ya?ml)\s*$", re.M)


def doc_pages(source):
    """README.md and every docs/*.md, as paths relative to source, README first."""
    docs = os.path.join(source, "docs")
    pages = sorted(f"docs/{f}" for f in os.listdir(docs) if f.endswith(".md")) \
        if os.path.isdir(docs) else []
    return ["README.md"] + pages


def doc_yaml_blocks(source):
    """Every ```yaml block of the pages of doc_pages(), fenced at any indent (inside a list item
    too): (where "PAGE:LINE", page, block text without its indent, the block read as YAML 1.2)."""
    for page in doc_pages(source):
        text = open(os.path.join(source, page)).read()
        for m in re.finditer(r"^( *)```yaml\n(.*?)^\1```", text, re.S | re.M):
            line = text[:m.start()].count("\n") + 1
            indent = len(m.group(1))
            block = "".join(l[indent:] + "\n" for l in m.group(2).splitlines())
            yield f"{page}:{line}", page, block, load12(block)


def is_marked_fragment(block):
    """True when an experiment block says, by a line `# fragment`, that it is not a whole file."""
    return any(l.strip() == FRAGMENT for l in block.splitlines())


def block_example(source, block):
    """The example file an experiment block says it shows (a line `# examples/.../NAME.yaml`),
    as a path relative to source, or None."""
    m = EXAMPLE_LINE.search(block)
    return m.group(1) if m and os.path.isfile(os.path.join(source, m.group(1))) else None


def prepare_block(source, sextant, block, doc, folder):
    """Writes an experiment block into folder as a file `sextant validate` can judge, with what it
    opens: a block that names its example (block_example) goes into a copy of that example's
    folder under the example's file name; any other into folder/experiment.yaml, with
    prepare_files() and, for each relative search.warm_start run that is missing, a one-trial
    run measuring the block's objectives made there first. Returns the file's path."""
    example = block_example(source, block)
    if example is not None:
        shutil.copytree(os.path.join(source, os.path.dirname(example)), folder, dirs_exist_ok=True)
        path = os.path.join(folder, os.path.basename(example))
    else:
        prepare_files(folder, doc)
        make_warm_start_runs(sextant, folder, doc)
        path = os.path.join(folder, "experiment.yaml")
    with open(path, "w") as f:
        f.write(block)
    return path


def make_warm_start_runs(sextant, folder, doc):
    search = doc.get("search") if isinstance(doc, dict) else None
    warm = search.get("warm_start") if isinstance(search, dict) else None
    runs = warm.get("runs") if isinstance(warm, dict) else None
    objectives = doc.get("objectives") or [doc.get("objective")]
    metrics = [o["metric"] for o in objectives if isinstance(o, dict) and "metric" in o
               and o["metric"] not in ("cost", "trial_seconds")]
    for run in runs if isinstance(runs, list) else []:
        if not isinstance(run, str) or os.path.isabs(run) or \
                os.path.exists(os.path.join(folder, run)):
            continue
        source_doc = {"name": "warm-start-source", "parameters": {"p": {
                          "type": "float", "min": 0, "max": 1}},
                      "search": {"max_trials": 1},
                      "trial": {"command": ["sh", "-c", "echo " + " ".join(
                          f"{m}=1" for m in metrics)]}}
        if "objectives" in doc:
            source_doc["objectives"] = doc["objectives"]
        else:
            source_doc["objective"] = doc["objective"]
        exp = os.path.join(folder, "warm-start-source.yaml")
        with open(exp, "w") as f:
            f.write(dump(source_doc))
        p = subprocess.run([sextant, "run", exp, "--run-dir", os.path.join(folder, run)],
                           capture_output=True, text=True, timeout=120, cwd=folder)
        if p.returncode != 0:
            raise RuntimeError(f"making the warm_start run {run}: exit {p.returncode}: {p.stderr}")


def check_docs(source, judges):
    problems, experiments, fragments = [], 0, 0
    schema_path = os.path.join(source, "schema", "experiment.schema.json")
    for where, page, block, doc in doc_yaml_blocks(source):
        if not is_experiment(doc):
            fragments += 1
            for e in unknown_keys(judges.validator.schema, doc):
                problems.append(f"{where} (a fragment): {e}")
            continue
        experiments += 1
        want = MODELINE + os.path.relpath(schema_path, os.path.join(source, os.path.dirname(page)))
        if block.splitlines()[0] != want:
            problems.append(f"{where}: an experiment block's first line must be `{want}`")
        for e in judges.schema_errors(doc):
            problems.append(f"{where}: schema: {e}")
        folder = tempfile.mkdtemp(dir=judges.workdir)
        accepted, errors = judges.loader(prepare_block(source, judges.sextant, block, doc, folder))
        if not accepted and inexpressible_rule(errors) is None:
            problems.append(f"{where}: sextant validate refuses it for a check the schema "
                            f"could express: {errors}")
    return experiments, fragments, problems


def unknown_keys(schema, doc):
    """Keys of doc (a fragment of an experiment) that the schema does not know, found by walking
    `properties`, `additionalProperties` and `items` through $refs."""
    defs = schema["$defs"]

    def resolve(s):
        while isinstance(s, dict) and "$ref" in s and "properties" not in s:
            s = defs[s["$ref"].split("/")[-1]]
        return s

    out = []

    def visit(node, s, path):
        s = resolve(s)
        if not isinstance(s, dict):
            return
        if isinstance(node, dict):
            props = s.get("properties")
            for k, v in node.items():
                if props is not None and k in props:
                    visit(v, props[k], path + [k])
                elif isinstance(s.get("additionalProperties"), dict):
                    visit(v, s["additionalProperties"], path + [k])
                elif props is not None and s.get("additionalProperties") is False:
                    out.append(f"unknown key {'.'.join(path + [str(k)])}")
        elif isinstance(node, list) and "items" in s:
            for i, v in enumerate(node):
                visit(v, s["items"], path + [str(i)])

    visit(doc, schema, [])
    return out


def check_corpus(judges, exhaustive, verbose, jobs):
    cases = []
    for name in BASES:
        cases.append((f"{name}: as written", base(name), True))
    for name in BASES:
        cases += [(d, doc, None) for d, doc in generic_mutations(name, base(name), exhaustive)]
    for d, doc in targeted_mutations():
        cases.append((d, doc, None))
    texts = []
    seen = set()
    for d, doc, must_accept in cases:
        text = (dump(base("ask_tell")) + "---\nname: second\n") if doc is None else dump(doc)
        if text in seen:
            continue
        seen.add(text)
        texts.append((d, text, must_accept))
    for _, doc, _ in cases:
        if doc is not None:
            prepare_files(judges.workdir, doc)

    def run(i):
        d, text, _ = texts[i]
        return judges.judge(text, f"m{i:05d}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run, range(len(texts))))

    problems, inexpressible, stricter = [], {}, {}
    agree_accept = agree_refuse = 0
    for (d, text, must_accept), (schema_errors, accepted, loader_errors) in zip(texts, results):
        schema_ok = not schema_errors
        if must_accept and not (schema_ok and accepted):
            problems.append(f"{d}: a base experiment must be valid: schema {schema_errors}, "
                            f"loader {loader_errors}")
            continue
        if schema_ok == accepted:
            agree_accept += accepted
            agree_refuse += not accepted
            if verbose:
                print(f"agree ({'accept' if accepted else 'refuse'}): {d}")
            continue
        rule = inexpressible_rule(loader_errors) if schema_ok else None
        if rule is not None:
            inexpressible.setdefault(rule, []).append(d)
            continue
        if not schema_ok and judges.only_quoted_numbers(text):
            stricter.setdefault(QUOTED_NUMBER, []).append(d)
            continue
        problems.append(
            f"DISAGREE {d}\n    schema: {'accepts' if schema_ok else schema_errors}\n"
            f"    loader: {'accepts' if accepted else loader_errors}\n"
            + "".join(f"    | {l}\n" for l in text.splitlines()))
    return len(texts), agree_accept, agree_refuse, inexpressible, stricter, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sextant", required=True)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    ap.add_argument("--exhaustive", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    sextant = os.path.abspath(args.sextant)
    schema_text = open(os.path.join(args.source, "schema", "experiment.schema.json")).read()

    schema, problems = check_schema_and_binary(args.source, sextant, schema_text)
    workdir = tempfile.mkdtemp(prefix="schema-lockstep-")
    try:
        judges = Judges(sextant, schema, workdir)
        write_safetensors(os.path.join(workdir, "init.safetensors"))
        n_examples, p = check_examples(args.source, judges)
        problems += p
        n_docs, n_fragments, p = check_docs(args.source, judges)
        problems += p
        total, accepted, refused, inexpressible, stricter, p = check_corpus(
            judges, args.exhaustive, args.verbose, args.jobs)
        problems += p
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"examples: {n_examples} experiment files; README.md and docs/*.md: {n_docs} "
          f"experiment blocks, {n_fragments} fragments")
    print(f"corpus: {total} experiments ({len(BASES)} valid bases and their mutations): "
          f"{accepted} accepted by both, {refused} refused by both, "
          f"{sum(len(v) for v in inexpressible.values())} refused by the loader alone for checks "
          f"the schema cannot express, {sum(len(v) for v in stricter.values())} refused by the "
          f"schema alone by design, {len([x for x in p if x.startswith('DISAGREE')])} "
          f"disagreements")
    for rule, ds in sorted(inexpressible.items()):
        print(f"  inexpressible ({rule}): {len(ds)}" +
              ("".join(f"\n    {d}" for d in ds) if args.verbose else ""))
    for rule, ds in sorted(stricter.items()):
        print(f"  the schema stricter by design ({rule}): {len(ds)}" +
              ("".join(f"\n    {d}" for d in ds) if args.verbose else ""))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
