#!/usr/bin/python3
"""The README and docs/*.md say what Sextant does; this test holds them to it.

  1. Links: every relative link and image of README.md and docs/*.md (outside code) names a file
     or folder that exists, and an anchor (`page.md#section`, `#section`) names a heading of its
     page, as GitHub spells heading anchors.
  2. Experiment blocks: every ```yaml block that is an experiment file (a top-level name: and
     objective: or objectives:, as tests/orchestrator/schema_lockstep.py decides; the blocks are
     found and prepared by its doc_yaml_blocks() and prepare_block()) is accepted by
     `sextant validate`: a block that names its example (`# examples/.../NAME.yaml`) in a copy of
     that example's folder, and must read as that file does; any other in an empty folder, with
     the runs its search.warm_start names made first. A block with a line `# fragment` is
     skipped, and counted in the output.
  3. The README's tour: every command of the ```sh blocks of its "A five-minute tour" section
     runs, as written and in order, in a temporary folder that holds a copy of examples/ and
     build/bin (the binaries under test), and exits 0; what the README says `sextant validate`
     prints is what it prints; the runs end COMPLETED and their reports are written.

usage: docs_test.py --bin-dir BUILD/bin [--source DIR]
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "orchestrator"))
import schema_lockstep as blocks  # noqa: E402  (one implementation of what a block is)

TOUR = "## A five-minute tour"


# --- 1. Links -------------------------------------------------------------------------------------

def without_fences(text):
    """text with its fenced blocks blanked (line numbers kept)."""
    return re.sub(r"^( *)```.*?^\1```", lambda m: "\n" * m.group(0).count("\n"), text,
                  flags=re.S | re.M)


def without_code(text):
    """text with its fenced blocks and inline code spans blanked (line numbers kept)."""
    return re.sub(r"`[^`\n]*`", "", without_fences(text))


def anchors(path):
    """The heading anchors of a markdown file, as GitHub makes them."""
    out, seen = set(), {}
    for line in without_fences(open(path).read()).splitlines():
        m = re.match(r"^#{1,6} +(.*?) *#*$", line)
        if not m:
            continue
        title = m.group(1).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def check_links(source):
    problems, count = [], 0
    for page in blocks.doc_pages(source):
        path = os.path.join(source, page)
        text = without_code(open(path).read())
        for m in re.finditer(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto:, ...
            count += 1
            line = text[:m.start()].count("\n") + 1
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            if not os.path.exists(resolved):
                problems.append(f"{page}:{line}: the link {target} names no file "
                                f"({os.path.relpath(resolved, source)})")
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                problems.append(f"{page}:{line}: the link {target} names no heading of "
                                f"{os.path.relpath(resolved, source)}")
    return count, problems


# --- 2. Experiment blocks -------------------------------------------------------------------------

def validate(sextant, path):
    p = subprocess.run([sextant, "validate", path], capture_output=True, text=True, timeout=60,
                       cwd=os.path.dirname(path))
    return p.returncode, p.stdout + p.stderr


def check_experiment_blocks(source, sextant, workdir):
    problems, checked, fragments = [], 0, []
    for where, page, block, doc in blocks.doc_yaml_blocks(source):
        if not blocks.is_experiment(doc):
            continue
        if blocks.is_marked_fragment(block):
            fragments.append(where)
            continue
        checked += 1
        example = blocks.block_example(source, block)
        if example is not None:
            want = blocks.load12(open(os.path.join(source, example)).read())
            if doc != want:
                problems.append(f"{where}: the block says it is {example}, but it reads "
                                f"otherwise")
        folder = tempfile.mkdtemp(dir=workdir)
        rc, out = validate(sextant, blocks.prepare_block(source, sextant, block, doc, folder))
        if rc != 0:
            problems.append(f"{where}: sextant validate exits {rc}: {out.strip()}")
    return checked, fragments, problems


# --- 3. The README's tour -------------------------------------------------------------------------

def tour_commands(readme):
    start = readme.index(TOUR)
    end = readme.find("\n## ", start + len(TOUR))
    section = readme[start:end if end >= 0 else len(readme)]
    commands = []
    for m in re.finditer(r"^```sh\n(.*?)^```", section, re.S | re.M):
        for line in m.group(1).replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return section, commands


def run_tour(source, bin_dir, workdir):
    readme = open(os.path.join(source, "README.md")).read()
    section, commands = tour_commands(readme)
    problems = []
    if not any(c.startswith("sextant run ") for c in commands):
        return 0, ["the README's tour runs nothing (no `sextant run` in its sh blocks)"]
    home = os.path.join(workdir, "checkout")
    shutil.copytree(os.path.join(source, "examples"), os.path.join(home, "examples"))
    os.makedirs(os.path.join(home, "build"))
    os.symlink(os.path.abspath(bin_dir), os.path.join(home, "build", "bin"))
    said = " ".join(section.split())
    env = dict(os.environ)
    env["PATH"] = "/usr/bin:/bin"  # the tour's own `export PATH=...` must find the binaries
    script = ["set -euo pipefail"]
    for i, c in enumerate(commands):
        script.append(f"echo {shlex.quote('+ ' + c)} >&2; echo '@@ {i}'")
        script.append(c)
    p = subprocess.run(["/bin/bash", "-c", "\n".join(script)], cwd=home, env=env,
                       capture_output=True, text=True, timeout=600)
    outputs = re.split(r"^@@ (\d+)\n", p.stdout, flags=re.M)
    by_command = {int(outputs[i]): outputs[i + 1] for i in range(1, len(outputs) - 1, 2)}
    done = max(by_command) if by_command else -1
    if p.returncode != 0:
        return done + 1, [f"the tour's command `{commands[done]}` exits {p.returncode}:\n"
                          + p.stderr[-3000:]]
    for i, c in enumerate(commands):
        if c.startswith("sextant validate "):
            out = by_command.get(i, "").strip()
            shown = out.split(": ", 1)[1] if ": " in out else out
            if " ".join(shown.split()) not in said:
                problems.append(f"`{c}` prints `{out}`, which the README does not show")
    for c in commands:
        m = re.match(r"sextant run \S+ --run-dir (\S+)$", c)
        if m:
            r = subprocess.run([os.path.join(bin_dir, "sextant"), "results", m.group(1),
                                "--format", "json"], cwd=home, capture_output=True, text=True)
            state = json.loads(r.stdout)["state"] if r.returncode == 0 else r.stderr
            if state != "COMPLETED":
                problems.append(f"`{c}`: the run ends {state}, not COMPLETED")
        m = re.match(r"sextant report \S+ -o (\S+)$", c)
        if m and "</html>" not in open(os.path.join(home, m.group(1))).read():
            problems.append(f"`{c}` writes no HTML page")
    return len(commands), problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(HERE)))
    args = ap.parse_args()
    source = os.path.abspath(args.source)
    bin_dir = os.path.abspath(args.bin_dir)
    sextant = os.path.join(bin_dir, "sextant")
    problems = []
    n_links, p = check_links(source)
    problems += p
    workdir = tempfile.mkdtemp(prefix="docs-test-")
    try:
        n_blocks, fragments, p = check_experiment_blocks(source, sextant, workdir)
        problems += p
        n_commands, p = run_tour(source, bin_dir, workdir)
        problems += p
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"links: {n_links} relative links in {len(blocks.doc_pages(source))} pages")
    print(f"experiment blocks: {n_blocks} validated, {len(fragments)} marked `# fragment` and "
          f"skipped" + "".join(f"\n  fragment: {w}" for w in fragments))
    print(f"tour: {n_commands} commands run")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
