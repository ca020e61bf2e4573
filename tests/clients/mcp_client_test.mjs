// `sextant mcp` driven by the official MCP TypeScript SDK as a client would drive it: over stdio,
// a real `sextant run` started through start_run, real results. Run by mcp_client_test.sh, which
// installs the SDK beside this file (in the build tree). Exits non-zero on the first failure.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const sextant = process.env.SEXTANT_BIN;
const sourceDir = process.env.SEXTANT_SOURCE_DIR;
assert.ok(sextant && sourceDir, 'SEXTANT_BIN and SEXTANT_SOURCE_DIR must be set');

const top = fs.mkdtempSync(path.join(os.tmpdir(), 'sextant-mcp-'));
const root = path.join(top, 'root');
const outside = path.join(top, 'outside');
fs.mkdirSync(root);
fs.mkdirSync(outside);

// A quadratic bowl computed by awk: loss = (x - 0.3)^2 + (n - 2)^2; six trials finish in seconds.
fs.writeFileSync(path.join(root, 'objective.sh'), `#!/bin/sh
awk -v x="$SEXTANT_PARAM_X" -v n="$1" 'BEGIN {
  printf "step=1 loss=%.9f\\n", (x - 0.3) * (x - 0.3) + (n - 2) * (n - 2)
}'
`);
fs.writeFileSync(path.join(root, 'quick.yaml'), `name: quick
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
  n: {type: int, min: 0, max: 4}
search: {sampler: sobol, seed: 5, max_trials: 6, max_concurrent: 2}
trial:
  command: [sh, objective.sh, "\${n}"]
`);
// Each trial sleeps, so that the run is still going when stop_run asks it to stop.
fs.writeFileSync(path.join(root, 'slow.yaml'), `name: slow
objective: {metric: loss}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: random, seed: 1, max_trials: 4, max_concurrent: 1}
trial:
  command: [sh, -c, "sleep 30; echo loss=1"]
`);
// An unknown parameter type on line 4, column 13.
const bad = `name: bad
objective: {metric: loss}
parameters:
  a: {type: floot, min: 0, max: 1}
search: {max_trials: 2}
trial: {command: [sh, objective.sh]}
`;
fs.writeFileSync(path.join(root, 'bad.yaml'), bad);
fs.writeFileSync(path.join(root, 'asktell.yaml'), `name: asktell
objective: {metric: loss}
parameters:
  x: {type: float, min: -1, max: 1}
search: {mode: ask_tell, sampler: sobol, seed: 2, max_trials: 3, max_concurrent: 1}
`);
fs.copyFileSync(path.join(sourceDir, 'examples/simulate/experiment.yaml'),
                path.join(root, 'what-if.yaml'));
fs.writeFileSync(path.join(outside, 'secret.yaml'), 'name: secret\n');
fs.symlinkSync(outside, path.join(root, 'escape'));

const transport = new StdioClientTransport({
  command: sextant,
  args: ['mcp', '--root', root],
  stderr: 'inherit',
});
const client = new Client({ name: 'sextant-mcp-test', version: '1.0.0' });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function call(name, args) {
  return client.callTool({ name, arguments: args });
}
async function ok(name, args) {
  const r = await call(name, args);
  assert.equal(r.isError, false, `${name} failed: ${r.content?.[0]?.text}`);
  assert.equal(typeof r.structuredContent, 'object', `${name}: no structured content`);
  return r.structuredContent;
}
async function refused(name, args, pattern) {
  const r = await call(name, args);
  assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} was not refused`);
  assert.match(r.content[0].text, pattern);
  return r;
}
async function waitUntilDone(runDir, seconds) {
  const giveUp = Date.now() + seconds * 1000;
  while (Date.now() < giveUp) {
    const s = await ok('run_status', { run_dir: runDir });
    if (s.done) return s;
    await sleep(200);
  }
  assert.fail(`${runDir} did not finish within ${seconds} s`);
}

const steps = [];
async function step(name, body) {
  const started = Date.now();
  await body();
  steps.push(name);
  console.log(`ok - ${name} (${Date.now() - started} ms)`);
}

try {
  await client.connect(transport);

  await step('negotiates the protocol and names itself', async () => {
    assert.equal(client.getServerVersion().name, 'sextant');
    assert.ok(client.getServerCapabilities().tools);
    assert.ok(client.getServerCapabilities().resources);
    await client.ping();
  });

  await step('lists every tool with an object input schema', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['ask', 'list_runs', 'report', 'results', 'run_status', 'simulate',
                             'start_run', 'stop_run', 'tell', 'validate_experiment']);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.ok(t.description.length > 20, t.name);
    }
  });

  await step('validate names the line and column of a bad file, and passes a good one', async () => {
    const badFile = await ok('validate_experiment', { file: 'bad.yaml' });
    assert.equal(badFile.valid, false);
    const e = badFile.errors.find((x) => x.message.includes('floot'));
    assert.ok(e, JSON.stringify(badFile.errors));
    assert.equal(e.line, 4);
    assert.equal(e.column, 13);
    assert.equal(e.text, `bad.yaml:4:13: ${e.message}`);
    const inline = await ok('validate_experiment', { yaml: bad });
    assert.ok(inline.errors.some((x) => x.line === 4 && x.column === 13));
    const good = await ok('validate_experiment', { file: 'quick.yaml' });
    assert.equal(good.valid, true, JSON.stringify(good.errors));
    assert.deepEqual(good.errors, []);
    assert.equal(good.name, 'quick');
  });

  let best;
  await step('start_run returns at once and run_status follows the run to its end', async () => {
    const started = Date.now();
    const run = await ok('start_run', { file: 'quick.yaml', run_dir: 'runs/quick' });
    assert.ok(Date.now() - started < 5000, 'start_run waited for the run');
    assert.ok(run.pid > 0);
    assert.equal(run.run_dir, 'runs/quick');
    const s = await waitUntilDone('runs/quick', 90);
    assert.equal(s.state, 'COMPLETED', JSON.stringify(s));
    assert.equal(s.trials.total, 6);
    assert.equal(s.process.exit_code, 0);
    const r = await ok('results', { run_dir: 'runs/quick' });
    assert.equal(r.experiment, 'quick');
    assert.equal(r.trials.length, 6);
    assert.equal(typeof r.best.value, 'number');
    const values = r.trials.filter((t) => t.state === 'COMPLETED').map((t) => t.value);
    assert.equal(r.best.value, Math.min(...values));
    best = r.best;
  });

  await step('the results.json resource is the results document', async () => {
    const { resources } = await client.listResources();
    const uri = 'sextant://runs/runs/quick/results.json';
    assert.ok(resources.some((x) => x.uri === uri), JSON.stringify(resources));
    const read = await client.readResource({ uri });
    assert.equal(read.contents[0].mimeType, 'application/json');
    const doc = JSON.parse(read.contents[0].text);
    assert.deepEqual(doc.best, best);
    const html = await client.readResource({ uri: 'sextant://runs/runs/quick/report.html' });
    assert.match(html.contents[0].text, /<html/i);
  });

  await step('report writes the HTML file in the run directory', async () => {
    const r = await ok('report', { run_dir: 'runs/quick' });
    assert.equal(r.path, 'runs/quick/report.html');
    assert.ok(fs.statSync(path.join(root, r.path)).size > 1000);
    assert.equal(r.trials, 6);
  });

  await step('list_runs finds the run', async () => {
    const { runs } = await ok('list_runs', {});
    const quick = runs.find((x) => x.run_dir === 'runs/quick');
    assert.ok(quick, JSON.stringify(runs));
    assert.equal(quick.state, 'COMPLETED');
    assert.equal(quick.best_value, best.value);
  });

  await step('paths outside the root are refused', async () => {
    await refused('results', { run_dir: '../outside' }, /'\.\.' is not allowed/);
    await refused('validate_experiment', { file: path.join(outside, 'secret.yaml') },
                  /outside the root/);
    await refused('validate_experiment', { file: 'escape/secret.yaml' }, /symbolic link/);
    await refused('start_run', { file: '/etc/passwd' }, /outside the root/);
    await refused('results', { run_dir: 'runs/none' }, /not a Sextant run directory/);
    await assert.rejects(
        client.readResource({ uri: 'sextant://runs/../outside/results.json' }), /not allowed/);
    assert.ok(!fs.existsSync(path.join(outside, 'runs')));
  });

  await step('stop_run interrupts a live run as Ctrl-C would', async () => {
    await ok('start_run', { file: 'slow.yaml', run_dir: 'runs/slow' });
    const giveUp = Date.now() + 30000;
    while (!(await ok('run_status', { run_dir: 'runs/slow' })).trials?.by_state?.RUNNING) {
      assert.ok(Date.now() < giveUp, 'the slow run never started a trial');
      await sleep(200);
    }
    const stopped = await ok('stop_run', { run_dir: 'runs/slow', wait_seconds: 20 });
    assert.equal(stopped.stopped, true);
    assert.equal(stopped.state, 'INTERRUPTED');
    const s = await waitUntilDone('runs/slow', 10);
    assert.equal(s.process.exit_code, 130);
    await refused('stop_run', { run_dir: 'runs/slow' }, /not running/);
  });

  await step('ask and tell drive an ask/tell run to its end', async () => {
    await ok('start_run', { file: 'asktell.yaml', run_dir: 'runs/asktell' });
    let told = 0;
    const giveUp = Date.now() + 60000;
    while (told < 3) {
      assert.ok(Date.now() < giveUp, `told ${told} of 3`);
      const s = await call('ask', { run_dir: 'runs/asktell', n: 1, wait_seconds: 2 });
      if (s.isError) {  // the run has not made its store or its address yet
        await sleep(200);
        continue;
      }
      for (const t of s.structuredContent.trials) {
        const x = t.params.x;
        const r = await ok('tell', { run_dir: 'runs/asktell', trial: t.trial,
                                     value: (x - 0.3) * (x - 0.3) });
        assert.equal(r.trial, t.trial);
        told++;
      }
    }
    const s = await waitUntilDone('runs/asktell', 30);
    assert.equal(s.state, 'COMPLETED');
    assert.equal(s.trials.by_state.COMPLETED, 3);
  });

  await step('simulate forecasts on virtual time into a run directory', async () => {
    const r = await ok('simulate', { file: 'what-if.yaml', run_dir: 'runs/what-if' });
    assert.equal(r.run_dir, 'runs/what-if');
    assert.equal(typeof r.best.value, 'number');
    assert.match(r.forecast, /best value/);
  });

  await client.close();
  console.log(`all ${steps.length} steps passed`);
} catch (e) {
  console.error(e);
  await client.close().catch(() => {});
  process.exitCode = 1;
} finally {
  fs.rmSync(top, { recursive: true, force: true });
}
