// coarse, checkRecord, checkRarity and attribute helpers in Node.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { coarse, checkRecord, checkRarity, toWire, fromWire, nameProblem, expiryBucket, PrivsvcError } from 'privsvc';

test('coarse values', () => {
  const t = 1_716_212_345; // 2024-05-20T13:39:05Z
  assert.equal(coarse.day(t), 1_716_163_200);
  assert.equal(coarse.hour(t), 1_716_210_000);
  assert.equal(coarse.day(t * 1000), 1_716_163_200_000);
  const d = coarse.hour(new Date(t * 1000 + 123));
  assert.ok(d instanceof Date);
  assert.equal(d.toISOString(), '2024-05-20T13:00:00.000Z');
  assert.equal(coarse.geo(52.520008), 52.52);
  assert.equal(coarse.geo(13.404954, 1), 13.4);
  assert.equal(coarse.bucket(1234, 100), 1200);
  assert.equal(coarse.bucket(-5, 10), -10);
  assert.throws(() => coarse.day(-1), PrivsvcError);
});

test('checkRecord warns about precise values, odd lifetimes and large payloads', () => {
  const codes = (w) => w.map((x) => x.code);
  assert.deepEqual(codes(checkRecord({ attributes: { seen_at: 1_716_212_345n }, expires: 86400 })), ['timestamp']);
  assert.deepEqual(checkRecord({ attributes: { kind: 'note' }, expires: 86400, payload: 'short' }), []);
  assert.deepEqual(codes(checkRecord({ expires: 5000 })), ['expiry-rounded']);
  assert.deepEqual(codes(checkRecord({ payload: new Uint8Array(13000) })), ['payload-too-large']);
  const w = checkRecord({ attributes: { lat: { type: 'str', value: '52.520008' } } });
  assert.equal(w[0].attribute, 'lat');
  assert.ok(w[0].message.length > 10);
  assert.throws(() => checkRecord({ attributes: { Bad: 'x' } }), PrivsvcError);
});

test('checkRarity counts existing records', () => {
  const existing = [{ colour: 'red' }, { colour: 'red' }, { colour: 'red' }, { colour: 'blue' }];
  assert.deepEqual(checkRarity({ colour: 'red' }, existing, 3), []);
  const w = checkRarity({ colour: 'blue' }, existing, 3);
  assert.equal(w.length, 2);
  assert.ok(w.every((x) => x.code === 'rare-combination'));
  assert.deepEqual(checkRarity({ colour: 'blue' }, existing, 0), []);
});

test('attribute wire form and names', () => {
  const wire = toWire({ kind: 'note', n: 7, big: 18446744073709551615n, huge: 18446744073709551616n });
  assert.deepEqual(wire, {
    kind: { type: 'str', value: 'note' },
    n: { type: 'i32', value: 7 },
    big: { type: 'u64', value: '18446744073709551615' },
    huge: { type: 'u256', value: '18446744073709551616' },
  });
  assert.deepEqual(fromWire(wire).big, 18446744073709551615n);
  assert.throws(() => toWire({ x: 1.5 }), PrivsvcError);
  assert.equal(nameProblem('kind'), undefined);
  assert.ok(nameProblem('Kind'));
  assert.ok(nameProblem('tag'));
  assert.equal(expiryBucket(5000), 86400);
});
