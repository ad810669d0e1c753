// The device store in Node.js (fileTokenStore), without the stack: tokens, key pins and relayer
// pins sealed under a key from the vault's root (the Rust sealing, through the wasm module),
// kept in files 0600 in a 0700 directory named after the key; a part that does not open is
// discarded with a warning, never trusted. The browser store (IndexedDB, Web Locks across tabs)
// is tested in headless Chromium (test/browser/chromium.mjs); sessions over the store in
// rev4.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { browserTokenStore, fileTokenStore, KeyVault, memoryStore, PrivsvcError } from 'privsvc';
// The package's internal opening of a store (createPrivateClient and TokenWallet use it).
import { keepsAnyScanCache, openStore, storeSealer } from '../store.js';

const token = (app, n, epoch = 20000) => ({ app, epoch, nonce: n.toString(16).padStart(64, '0'), signature: 'c2lnbmF0dXJl', obtainedMs: 0 });
const ISSUER = '0x00000000000000000000000000000000000000AA';
const RELAYER = 'https://relayer.example';
const ACCOUNT = '0x00000000000000000000000000000000000000BB';

/** Opens `dir` as `vault`'s store for project `notes` on chain 31337. */
const open = (dir, vault, chainId = 31337) => openStore(fileTokenStore(dir), storeSealer(vault.scanCacheKey(), chainId, 'notes'));

async function quietly(fn) {
  const warnings = [];
  const warn = console.warn;
  console.warn = (m) => warnings.push(String(m));
  try {
    return { value: await fn(), warnings };
  } finally {
    console.warn = warn;
  }
}

test('fileTokenStore keeps tokens, key pins and relayer pins sealed in files 0600 in a 0700 directory named after the key', async () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'privsvc-store-')), 'data');
  const { vault } = KeyVault.random('notes');
  const a = await open(dir, vault);
  const s = a.store;
  assert.match(s.id, /^[0-9a-f]{32}$/);
  s.add([token('notes', 1), token('notes', 2), token('other', 3)]);
  s.add([token('notes', 1)]);
  assert.equal(s.list('notes').length, 2);
  assert.equal(s.keyPin(ISSUER, 'notes', 20000), undefined);
  assert.equal(s.pinKey(ISSUER, 'notes', 20000, 'AAEC'), 'AAEC');
  assert.equal(s.pinKey(ISSUER, 'notes', 20000, 'AwQF'), 'AAEC', 'the first pin wins');
  assert.equal(s.pinRelayer(RELAYER, ACCOUNT), ACCOUNT);
  assert.equal(s.pinRelayer(RELAYER, '0x00000000000000000000000000000000000000CC'), ACCOUNT);
  assert.equal(s.remove('notes', token('notes', 1).nonce), true);
  assert.equal(s.remove('notes', token('notes', 1).nonce), false, 'a token is removed once');
  a.release();

  const storeDir = join(dir, s.id);
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  assert.equal(statSync(storeDir).mode & 0o777, 0o700);
  assert.deepEqual(readdirSync(storeDir).sort(), ['pins.sealed', 'tokens.sealed'], 'no temporary file, and the lock is gone with the last user');
  for (const f of ['pins.sealed', 'tokens.sealed']) {
    assert.equal(statSync(join(storeDir, f)).mode & 0o777, 0o600);
    const bytes = readFileSync(join(storeDir, f));
    assert.equal(bytes.subarray(0, 8).toString('latin1'), 'PSVCDEV1');
    for (const clear of ['notes', 'c2lnbmF0dXJl', 'relayer.example', ACCOUNT.slice(2).toLowerCase()]) assert.ok(!bytes.includes(Buffer.from(clear)), `${f} shows ${clear}`);
  }

  // A later session reads what the first wrote.
  const b = await open(dir, vault);
  assert.deepEqual(b.store.list('notes').map((t) => t.nonce), [token('notes', 2).nonce]);
  assert.equal(b.store.list('other').length, 1);
  assert.equal(b.store.keyPin(ISSUER.toLowerCase(), 'notes', 20000), 'AAEC');
  assert.deepEqual(b.store.relayerPins(), { [RELAYER]: ACCOUNT });
  assert.deepEqual(b.store.discarded, []);
  b.store.prune(20001);
  assert.deepEqual(b.store.list('notes'), []);
  b.release();

  // Another root, or another chain, is another store: it sees none of it.
  const { vault: other } = KeyVault.random('notes');
  const c = await open(dir, other);
  assert.notEqual(c.store.id, s.id);
  assert.deepEqual([c.store.list('other'), c.store.relayerPins()], [[], {}]);
  c.store.add([token('other', 7)]);
  c.release();
  const d = await open(dir, vault, 1);
  assert.notEqual(d.store.id, s.id);
  d.release();

  // Planted (another root's part) and altered (a flipped byte) parts are discarded, with a
  // warning, and start empty; nothing of them is trusted.
  copyFileSync(join(dir, c.store.id, 'tokens.sealed'), join(storeDir, 'tokens.sealed'));
  const pins = readFileSync(join(storeDir, 'pins.sealed'));
  pins[pins.length - 1] ^= 1;
  writeFileSync(join(storeDir, 'pins.sealed'), pins);
  const { value: e, warnings } = await quietly(() => open(dir, vault));
  assert.deepEqual([...e.store.discarded].sort(), ['pins', 'tokens']);
  assert.equal(warnings.length, 2, warnings.join('\n'));
  assert.ok(warnings.every((w) => /does not open under this vault's key; discarding it/.test(w)));
  assert.deepEqual([e.store.list('other'), e.store.relayerPins(), e.store.keyPin(ISSUER, 'notes', 20000)], [[], {}, undefined]);
  assert.deepEqual(readdirSync(storeDir).filter((f) => f.endsWith('.sealed')), [], 'the discarded files are deleted');
  e.release();
});

test('a store handle opens once per user, is shared in a process, and refuses another user', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'privsvc-store-'));
  const { vault } = KeyVault.random('notes');
  const h = fileTokenStore(dir);
  assert.throws(() => h.list('notes'), (e) => e instanceof PrivsvcError && /not open yet/.test(e.message));
  assert.deepEqual(h.stored('notes'), []);
  const one = await openStore(h, storeSealer(vault.scanCacheKey(), 31337, 'notes'));
  const two = await open(dir, vault);
  assert.equal(one.store, two.store, 'the clients of one process share the open store');
  h.add([token('notes', 1)]);
  assert.equal(two.store.list('notes').length, 1);
  assert.deepEqual(readdirSync(join(dir, h.id)).sort(), ['.lock-node', 'tokens.sealed']);
  await assert.rejects(openStore(h, storeSealer(KeyVault.random('notes').vault.scanCacheKey(), 31337, 'notes')), /open for another vault/);
  one.release();
  assert.ok(readdirSync(join(dir, h.id)).includes('.lock-node'), 'held while a user is left');
  two.release();
  await new Promise((r) => setTimeout(r, 20));
  assert.ok(!readdirSync(join(dir, h.id)).includes('.lock-node'));
  assert.equal(memoryStore().kind, 'memory');
  assert.throws(() => browserTokenStore(), (e) => e instanceof PrivsvcError && /IndexedDB/.test(e.message));
  assert.throws(() => fileTokenStore(''), PrivsvcError);
});

test('a file store tells, without a key, whether it keeps any user\'s scan cache (a session without one lists before its vault)', async () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'privsvc-store-')), 'data');
  assert.equal(await keepsAnyScanCache(fileTokenStore(dir)), false, 'no directory yet');
  const { vault } = KeyVault.random('notes');
  const a = await open(dir, vault);
  assert.equal(await keepsAnyScanCache(fileTokenStore(dir)), false, 'tokens and pins are not a scan cache');
  await a.store.scanCache().save(new Uint8Array([1, 2, 3]));
  a.release();
  assert.equal(await keepsAnyScanCache(fileTokenStore(dir)), true, 'a scan cache of some user');
});
