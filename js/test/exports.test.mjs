// The package's shape: every runtime export is declared in index.d.ts, the constants and
// protocol types are there, no module imports another in a cycle, and the old error name is
// gone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

import * as pkg from 'privsvc';

const root = new URL('../', import.meta.url);
const dts = readFileSync(new URL('index.d.ts', root), 'utf8');

test('every runtime export is declared in index.d.ts', () => {
  const declared = new Set([...dts.matchAll(/^export (?:declare )?(?:const|function|class|type|interface) (\w+)/gm)].map((m) => m[1]));
  const missing = Object.keys(pkg).filter((name) => !declared.has(name));
  assert.deepEqual(missing, []);
});

test('constants and protocol types are exported, the constants from the Rust crates', () => {
  assert.equal(pkg.ENVELOPE_CONTENT_TYPE, 'application/json');
  assert.equal(pkg.BLOCK_TIME_SECONDS, 2);
  assert.equal(pkg.NETWORK_CHAIN_ID, 7738577);
  assert.equal(pkg.API_VERSION, 'privsvc-relayer/1');
  assert.equal(pkg.PRIVSVC_PROJECT, 'privsvc-7f3k');
  assert.equal(pkg.TAG_BYTES, 44);
  assert.equal(pkg.ENVELOPE_VERSION, 2);
  assert.equal(pkg.DEFAULT_TOKEN_MIN_AGE_MS, 60000);
  for (const t of ['SubmitRequest', 'StatusResponse', 'InfoResponse', 'TokenRedemption', 'IssueRequest', 'IssueResponse']) {
    assert.match(dts, new RegExp(`^export (?:interface|type) ${t}\\b`, 'm'), t);
  }
  for (const c of ['ENVELOPE_CONTENT_TYPE', 'BLOCK_TIME_SECONDS']) assert.match(dts, new RegExp(`^export const ${c}:`, 'm'));
  // Not hand-copied: core.js reads them from the wasm module.
  const core = readFileSync(new URL('core.js', root), 'utf8');
  assert.doesNotMatch(core, /export const (NETWORK_CHAIN_ID|TAG_BYTES|API_VERSION|ENVELOPE_VERSION) = ['"\d]/);
});

test('the package modules import each other without a cycle; errors live in errors.js', () => {
  const modules = readdirSync(root).filter((f) => f.endsWith('.js'));
  const imports = new Map();
  for (const m of modules) {
    const text = readFileSync(new URL(m, root), 'utf8');
    imports.set(m, [...text.matchAll(/^(?:import|export)[^'"]*from '\.\/([\w.-]+\.js)'/gm)].map((x) => x[1]));
  }
  const state = new Map();
  const visit = (m, path) => {
    if (state.get(m) === 'done') return;
    assert.notEqual(state.get(m), 'open', `import cycle: ${[...path, m].join(' -> ')}`);
    state.set(m, 'open');
    for (const n of imports.get(m) || []) visit(n, [...path, m]);
    state.set(m, 'done');
  };
  for (const m of modules) visit(m, []);
  assert.deepEqual(imports.get('errors.js'), []);
  for (const f of ['index.js', 'index.d.ts', 'core.js', 'client.js']) {
    assert.doesNotMatch(readFileSync(new URL(f, root), 'utf8'), /ArkognitoError/, f);
  }
  assert.ok(pkg.NoTokenReady.prototype instanceof pkg.PrivsvcError);
});

test('package.json declares viem and the ledger SDK as optional peer dependencies', () => {
  const p = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
  assert.equal(p.peerDependencies['@arkiv-network/sdk'], '^0.8.1');
  assert.match(p.peerDependencies.viem, /^\^2/);
  assert.deepEqual(p.peerDependenciesMeta, { '@arkiv-network/sdk': { optional: true }, viem: { optional: true } });
  for (const f of readdirSync(root).filter((f) => f.endsWith('.js'))) assert.ok(p.files.includes(f), `files lacks ${f}`);
});

test('package.json: browsers and bundlers get index.js, Node.js node.js; no browser module imports a Node.js built-in', () => {
  const p = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
  const entry = p.exports['.'];
  assert.deepEqual(Object.keys(entry), ['types', 'browser', 'node', 'default']);
  assert.equal(entry.browser, './index.js');
  assert.equal(entry.default, './index.js');
  assert.equal(entry.node, './node.js');
  // What a bundler reads for a browser: index.js and worker.js with everything they import.
  const seen = new Set();
  const visit = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(new URL(file, root), 'utf8');
    for (const [, spec] of text.matchAll(/^(?:import|export)\s(?:[^'";]*?\sfrom\s*)?['"]([^'"]+)['"]/gm)) {
      assert.ok(!spec.startsWith('node:') && spec.startsWith('./'), `${file} imports ${spec}`);
      if (!spec.startsWith('./pkg/')) visit(spec.slice(2));
    }
    assert.doesNotMatch(text, /\bimport\(\s*['"]node:/, `${file} imports a Node.js built-in dynamically`);
  };
  visit('index.js');
  visit('worker.js');
  assert.ok(seen.has('worker_ops.js') && seen.has('core.js'));
  assert.ok(!seen.has('node_setup.js') && !seen.has('worker_node.js'));
  // The worker's modules have no top-level await (a bundler's IIFE worker format refuses it).
  for (const f of ['worker.js', 'worker_ops.js']) assert.doesNotMatch(readFileSync(new URL(f, root), 'utf8'), /^(?:\s{0,2}|.*=\s*)await\s/m, f);
});

test('index.js loaded as such in Node.js says to import the package instead', () => {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', "await import('./index.js')"], { cwd: root.pathname, encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /in Node\.js import the package \('privsvc', its node\.js entry\), not index\.js/);
});
