// Tag opens per second in Node.js (KeyVault in this thread, WorkerVault in a worker thread):
// 10,000 foreign tags, each fails authentication, as most tags of an app do for one user.
// `node bench/tags.mjs [count]`; the Chromium figure comes from test/browser/chromium.mjs, the
// native one from `cargo run --release -p privsvc-vault --example tag_bench` (same shape).
// Each figure is the best of 5 runs after 3 untimed ones: V8 first runs wasm in its baseline
// tier and optimises hot functions while they run, so the first passes are slower.
import { KeyVault, WorkerVault } from 'privsvc';

const n = Number(process.argv[2] || 10000);
const { vault: other } = KeyVault.random('bench');
const ref = other.newRecord();
const tags = Array.from({ length: n }, () => other.makeTag(ref));
const raw = new Uint8Array(44 * n);
tags.forEach((t, i) => raw.set(Uint8Array.from(atob(t), (c) => c.charCodeAt(0)), 44 * i));
const { vault, recoveryCode } = KeyVault.random('bench');

function rate(ms) {
  return Math.round(n / (ms / 1000));
}

async function best(open) {
  for (let i = 0; i < 3; i++) await open();
  let ms = Infinity;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    const opened = await open();
    ms = Math.min(ms, performance.now() - t0);
    if (opened.length !== n || opened.some((r) => r !== undefined)) throw new Error('a foreign tag opened');
  }
  return rate(ms);
}

const v = process.version;
console.log(`node ${v}: KeyVault ${await best(() => vault.openTags(tags))} tag opens/s (${n} ledger-form tags, best of 5)`);
console.log(`node ${v}: KeyVault ${await best(() => vault.openTags(raw))} tag opens/s (one Uint8Array of raw tags)`);
const worker = await WorkerVault.fromRecoveryCode(recoveryCode, 'bench');
console.log(`node ${v}: WorkerVault ${await best(() => worker.openTags(tags))} tag opens/s (including the message round trip)`);
worker.terminate();
