// The vault worker's operations (`WorkerVault`): one RawKeyVault per worker, asked by message. It
// never sends the root, a derived key or the derivation signature back. worker.js (browsers) and
// worker_node.js (Node.js) load the wasm module and pass each message to `handle`.
import * as raw from './pkg/privsvc_wasm.js';
import { movable } from './bytes.js';

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
  // The first message: the answer tells the page the worker runs and its wasm module loaded.
  start: () => true,
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
  // `packed`: the tags as one string or one Uint8Array (core.js packTags); a packed answer.
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

/**
 * Answers one request `{ id, op, args }` through `reply(message, moving)` with
 * `{ id, ok, value | error }`; `moving` is the transfer list: the buffer of a byte answer (each is
 * a fresh copy out of wasm memory) moves to the caller instead of being copied.
 */
export function handle(msg, reply) {
  const { id, op, args } = msg || {};
  const fn = Object.hasOwn(ops, op) ? ops[op] : undefined;
  try {
    if (!fn) throw Object.assign(new Error(`unknown vault operation ${String(op)}`), { name: 'PrivsvcError' });
    const value = fn(...(args || []));
    reply({ id, ok: true, value }, movable(value));
  } catch (e) {
    reply({ id, ok: false, error: { name: e && e.name, message: e && e.message ? e.message : String(e) } });
  }
}

/** Answers a request that arrived when the wasm module could not be loaded. */
export function refuse(msg, reply, e) {
  const message = `the vault worker could not load its WebAssembly module: ${e && e.message ? e.message : String(e)}`;
  reply({ id: msg && msg.id, ok: false, error: { name: 'PrivsvcError', message } });
}
