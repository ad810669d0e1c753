// browserTokenStore() without Web Locks (as in Node.js 22, where localStorage exists behind
// --experimental-webstorage and navigator.locks does not): one process, tokens and pins
// persisted in the one localStorage item. The cross-tab mode is tested in headless Chromium
// (test/browser/chromium.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { browserTokenStore, memoryStore, PrivsvcError } from 'privsvc';

/** A Storage over a Map (what Node.js's --experimental-webstorage provides). */
function storage() {
  const m = new Map();
  return {
    get length() {
      return m.size;
    },
    key: (i) => [...m.keys()][i] ?? null,
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => m.set(k, String(v)),
    removeItem: (k) => m.delete(k),
    map: m,
  };
}

const token = (app, n, epoch = 20000) => ({ app, epoch, nonce: n.toString(16).padStart(64, '0'), signature: 'c2ln', obtainedMs: 0 });

test('without Web Locks the browser store keeps tokens, key pins and relayer pins in its localStorage item', async () => {
  const ls = storage();
  globalThis.localStorage = ls;
  try {
    assert.equal(globalThis.navigator?.locks, undefined);
    const a = browserTokenStore('t');
    await a.ready();
    assert.equal(a.slot, 'privsvc:tokens:t');
    assert.equal(a.crossTab, false);
    a.add([token('notes', 1), token('notes', 2), token('other', 3)]);
    a.add([token('notes', 1)]);
    assert.equal(a.list('notes').length, 2);
    const issuer = '0x00000000000000000000000000000000000000AA';
    assert.equal(a.keyPin(issuer, 'notes', 20000), undefined);
    assert.equal(a.pinKey(issuer, 'notes', 20000, 'AAAA'), 'AAAA');
    assert.equal(a.pinKey(issuer, 'notes', 20000, 'BBBB'), 'AAAA', 'the first pin wins');
    assert.equal(a.pinRelayer('https://r.example', '0x01'), '0x01');
    assert.equal(a.pinRelayer('https://r.example', '0x02'), '0x01');
    // Another instance (a reload) sees all of it: persisted, not in memory.
    const b = browserTokenStore('t');
    assert.equal(b.keyPin(issuer.toLowerCase(), 'notes', 20000), 'AAAA');
    assert.deepEqual(b.relayerPins(), { 'https://r.example': '0x01' });
    assert.equal(b.list('notes').length, 2);
    assert.equal(b.remove('notes', token('notes', 1).nonce), true);
    assert.equal(a.remove('notes', token('notes', 1).nonce), false, 'a token is removed once');
    b.prune(20001);
    assert.deepEqual(a.list('notes'), []);
    const item = JSON.parse(ls.getItem('privsvc:tokens:t'));
    assert.equal(item.v, 2);
    assert.deepEqual(Object.keys(item.relayerPins), ['https://r.example']);
    // The old form, a bare array of tokens, is read as the tokens.
    ls.setItem('privsvc:tokens', JSON.stringify([token('notes', 9, 20001)]));
    assert.equal(browserTokenStore().list('notes').length, 1);
    assert.throws(() => browserTokenStore('a#b'), PrivsvcError);
    assert.equal(memoryStore().kind, 'memory');
  } finally {
    delete globalThis.localStorage;
  }
  assert.throws(() => browserTokenStore(), PrivsvcError);
});

test('fileTokenStore (Node.js) keeps tokens, key pins and relayer pins in a private file', async () => {
  const { mkdtempSync, statSync, readdirSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { fileTokenStore } = await import('privsvc');
  const dir = join(mkdtempSync(join(tmpdir(), 'privsvc-file-store-')), 'store');
  const file = join(dir, 'tokens.json');
  const a = fileTokenStore(file);
  await a.ready();
  assert.equal(a.kind, 'file');
  assert.equal(a.slot, file);
  a.add([token('notes', 1), token('notes', 2), token('other', 3)]);
  const issuer = '0x00000000000000000000000000000000000000AA';
  assert.equal(a.pinKey(issuer, 'notes', 20000, 'AAAA'), 'AAAA');
  assert.equal(a.pinRelayer('http://relayer.example', '0x00000000000000000000000000000000000000BB'), '0x00000000000000000000000000000000000000BB');
  assert.equal(a.pinRelayer('http://relayer.example', '0x00000000000000000000000000000000000000CC'), '0x00000000000000000000000000000000000000BB');
  assert.equal(a.remove('notes', token('notes', 1).nonce), true);
  // Another instance (a later session) reads what the first wrote.
  const b = fileTokenStore(file);
  assert.deepEqual(b.list('notes').map((t) => t.nonce), [token('notes', 2).nonce]);
  assert.equal(b.keyPin(issuer, 'notes', 20000), 'AAAA');
  assert.deepEqual(b.relayerPins(), { 'http://relayer.example': '0x00000000000000000000000000000000000000BB' });
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  assert.deepEqual(readdirSync(dir), ['tokens.json'], 'no temporary file left behind');
  assert.throws(() => fileTokenStore(''), PrivsvcError);
});
