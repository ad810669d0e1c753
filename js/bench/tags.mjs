// Tag opens per second in Node.js (KeyVault in this thread, WorkerVault in a worker thread):
// 10,000 foreign tags, each fails authentication, as most tags of an app do for one user.
// `node bench/tags.mjs [count]`; the Chromium figure comes from test/browser/chromium.mjs.
import { KeyVault, WorkerVault } from '../index.js';

const n = Number(process.argv[2] || 10000);
const { vault: other } = KeyVault.random('bench');
const ref = other.newRecord();
const tags = Array.from({ length: n }, () => other.makeTag(ref));
const { vault, recoveryCode } = KeyVault.random('bench');

function rate(ms) {
  return Math.round(n / (ms / 1000));
}

vault.openTags(tags.slice(0, 500));
let best = Infinity;
for (let i = 0; i < 3; i++) {
  const t0 = performance.now();
  vault.openTags(tags);
  best = Math.min(best, performance.now() - t0);
}
console.log(`node ${process.version}: KeyVault ${rate(best)} tag opens/s (${n} tags, best of 3)`);

const worker = await WorkerVault.fromRecoveryCode(recoveryCode, 'bench');
await worker.openTags(tags.slice(0, 500));
best = Infinity;
for (let i = 0; i < 3; i++) {
  const t0 = performance.now();
  await worker.openTags(tags);
  best = Math.min(best, performance.now() - t0);
}
console.log(`node ${process.version}: WorkerVault ${rate(best)} tag opens/s (including the message round trip)`);
worker.terminate();
