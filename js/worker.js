// The vault worker of `WorkerVault`: holds one RawKeyVault and answers requests; it never sends
// the root, a derived key or the derivation signature back. Runs as a module Web Worker in
// browsers and as a `worker_threads` worker in Node.js.
import { raw, isNode } from './wasm.js';

let vault = null;

function need() {
  if (!vault) throw Object.assign(new Error('the vault worker holds no keys yet'), { name: 'PrivsvcError' });
  return vault;
}

function replace(next) {
  if (vault) vault.free();
  vault = next;
}

function withSigner(ref, fn) {
  const s = need().signer(ref);
  try {
    return fn(s);
  } finally {
    s.free();
  }
}

const ops = {
  fromSignature(signature, app) {
    replace(raw.RawKeyVault.fromSignature(signature, app));
  },
  random(app) {
    const r = raw.RawKeyVault.random(app);
    const code = r.recoveryCode;
    replace(r.takeVault());
    r.free();
    return code;
  },
  fromRecoveryCode(code, app) {
    replace(raw.RawKeyVault.fromRecoveryCode(code, app));
  },
  newRecord: () => need().newRecord(),
  scopeRecord: (name) => need().scopeRecord(name),
  makeTag: (ref) => need().makeTag(ref),
  // `packed`: the tags as one string or one Uint8Array (index.js packTags); a packed answer.
  openTags: (packed) =>
    typeof packed === 'string' ? need().openTagTexts(packed) : need().openTagBytes(packed),
  addressOf: (ref) => need().addressOf(ref),
  encrypt: (ref, data) => need().encrypt(ref, data),
  decrypt: (ref, data) => need().decrypt(ref, data),
  coverScores: (anchor, candidates) => need().coverScores(anchor, candidates),
  scanCacheKey: () => need().scanCacheKey(),
  signEnvelope: (ref, body, attributes) =>
    withSigner(ref, (s) => s.signEnvelope(body.app, body.exp, body.hour, body.ct, !!body.enc, body.data, attributes)),
  signProof: (ref, body, chainId) => withSigner(ref, (s) => s.signProof(body, chainId)),
  ownershipProof: (ref, entityKey, challenge, verifier, ttl, chainId, now) =>
    withSigner(ref, (s) => raw.rawSignOwnershipProof(s, entityKey, challenge, verifier, ttl, chainId, now)),
};

function handle(msg, reply) {
  const { id, op, args } = msg || {};
  const fn = Object.hasOwn(ops, op) ? ops[op] : undefined;
  try {
    if (!fn) throw Object.assign(new Error(`unknown vault operation ${String(op)}`), { name: 'PrivsvcError' });
    reply({ id, ok: true, value: fn(...(args || [])) });
  } catch (e) {
    reply({ id, ok: false, error: { name: e && e.name, message: e && e.message ? e.message : String(e) } });
  }
}

if (isNode) {
  const { parentPort } = await import('node:worker_threads');
  parentPort.on('message', (m) => handle(m, (r) => parentPort.postMessage(r)));
  parentPort.postMessage({ ready: true });
} else {
  self.onmessage = (ev) => handle(ev.data, (r) => self.postMessage(r));
  self.postMessage({ ready: true });
}
