// Envelope and attribute helpers against the conformance vectors (conformance/core).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  KeyVault,
  PrivsvcError,
  assertNodeSafeNames,
  canonicalAttributes,
  envelopeDigest,
  envelopeSigner,
  fromBase64,
  fromWire,
  padEnvelope,
  parseEnvelope,
  sealEnvelope,
  toBase64,
} from 'privsvc';

const vectors = JSON.parse(readFileSync(new URL('../../conformance/core/envelope.json', import.meta.url), 'utf8'));

test('envelopeSigner opens every sealed vector to its owner and refuses the rejects', () => {
  for (const c of vectors.cases) {
    const opened = envelopeSigner(c.sealed, fromWire(c.attributes));
    assert.equal(opened.signer.toLowerCase(), vectors.owner.toLowerCase(), c.name);
    assert.deepEqual(opened.data, fromBase64(c.body.data), c.name);
    assert.equal(opened.app, c.body.app);
  }
  for (const r of vectors.reject) {
    assert.throws(() => envelopeSigner(r.envelope, fromWire(vectors.cases[0].attributes)), PrivsvcError, r.name);
  }
  // The same envelope over other attribute values recovers another address, never the owner.
  const c = vectors.cases[0];
  const other = envelopeSigner(c.sealed, { ...fromWire(c.attributes), project: 'other' });
  assert.notEqual(other.signer.toLowerCase(), vectors.owner.toLowerCase());
});

test('sealEnvelope with a vault signer opens to that signer; base64 and names are checked', async () => {
  const { vault } = KeyVault.random('demo');
  const signer = vault.signer(vault.newRecord());
  const attributes = { project: 'demo', kind: 'note' };
  const body = { app: 'demo', exp: 3600, hour: 494000, ct: 'text/plain', enc: false, data: new TextEncoder().encode('hi') };
  const sealed = await sealEnvelope(signer, body, attributes);
  assert.equal(sealed.length, 512);
  assert.equal(envelopeSigner(sealed, attributes).signer, signer.address);

  const bytes = Uint8Array.from([0, 1, 2, 250, 255]);
  assert.equal(toBase64(bytes), 'AAEC+v8=');
  assert.deepEqual(fromBase64('AAEC+v8='), bytes);
  assert.throws(() => fromBase64('AAEC+v8'), PrivsvcError);
  assert.throws(() => fromBase64('AA-C'), PrivsvcError);
  assertNodeSafeNames({ kind: 'x', size_2: 1 });
  assert.throws(() => assertNodeSafeNames({ kind: 'x', 'Bad Name': 1 }), /Bad Name/);
});

test('parseEnvelope, envelopeDigest, padEnvelope and canonicalAttributes give the vectors bytes', () => {
  for (const c of vectors.cases) {
    const attributes = fromWire(c.attributes);
    assert.equal(canonicalAttributes(attributes), c.canonicalAttributes, c.name);
    const body = { ...c.body, data: fromBase64(c.body.data) };
    assert.equal(envelopeDigest(body, attributes), c.digest, c.name);
    const parsed = parseEnvelope(c.sealed);
    assert.equal(parsed.sig, c.signature, c.name);
    assert.deepEqual(parsed.data, body.data);
    assert.equal(parsed.hour, c.body.hour);
    assert.equal(padEnvelope(c.sealed.trimEnd()), c.sealed, c.name);
    assert.equal(new TextEncoder().encode(padEnvelope(c.sealed.trimEnd())).length, c.paddedLength);
  }
  for (const r of vectors.reject) assert.throws(() => parseEnvelope(r.envelope), PrivsvcError, r.name);
  assert.throws(() => padEnvelope('x'.repeat(16385)), PrivsvcError);
});
