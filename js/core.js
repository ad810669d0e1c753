// privsvc for browsers and Node.js 22: the client API of docs/API.md §3 over the privsvc-wasm
// bindings.
//
// The cryptography (key derivation, tags, envelopes, proofs, fingerprint checks) is the Rust code
// of the privsvc crates compiled to WebAssembly; this file only adapts wallets, moves values
// between JavaScript and the module, and runs the vault in a worker for `WorkerVault`.
import { raw, isNode, wasmModule } from './wasm.js';
import { platform } from './platform.js';
import { hexToBytes, movable } from './bytes.js';
import { PrivsvcError, NonDeterministicWalletError, SmartContractWalletError, call, checkProofParams, toSpecError } from './errors.js';
import { readerOf } from './net.js';

// ---------------------------------------------------------------------------------------------
// Constants (docs/PROTOCOL.md "Constants and notation"): read from the Rust crates through the
// wasm module, so they cannot drift from what the Rust code checks.

const CONSTANTS = JSON.parse(raw.rawConstants());

/** Chain id of the privsvc network (Arkiv Tiramisu). */
export const NETWORK_CHAIN_ID = CONSTANTS.networkChainId;
/** `purpose` of the key-derivation message. */
export const DERIVATION_PURPOSE = CONSTANTS.derivationPurpose;
/** Bytes of a tag. */
export const TAG_BYTES = CONSTANTS.tagBytes;
/** `project` of system entities. */
export const PRIVSVC_PROJECT = CONSTANTS.privsvcProject;
/** Relayer API version (`version` in `/v1/info`). */
export const API_VERSION = CONSTANTS.apiVersion;
/** Envelope version. */
export const ENVELOPE_VERSION = CONSTANTS.envelopeVersion;
/** Content type of a record entity's payload (the sealed envelope). */
export const ENVELOPE_CONTENT_TYPE = CONSTANTS.envelopeContentType;
/** Ledger block time, seconds. */
export const BLOCK_TIME_SECONDS = CONSTANTS.blockTimeSeconds;
/** Default validity of an ownership proof, seconds. */
export const DEFAULT_PROOF_TTL_SECONDS = CONSTANTS.defaultProofTtlSeconds;
/** Default minimum age of a token before it is spent, ms. */
export const DEFAULT_TOKEN_MIN_AGE_MS = CONSTANTS.defaultTokenMinAgeMs;

// ---------------------------------------------------------------------------------------------
// Small helpers

function bytesOf(data, what) {
  if (data instanceof Uint8Array) return data;
  if (typeof data === 'string') return new TextEncoder().encode(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  throw new PrivsvcError(`${what} must be a Uint8Array or a string`);
}

function hexOf(bytes) {
  let s = '0x';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

// Tags cross into wasm (and into the vault worker) as one string or one byte array, not one
// string each: see RawKeyVault.openTagTexts / openTagBytes.
const NON_ASCII = /[^\x00-\x7f]/;
const OPENED_BYTES = 20;

/**
 * Tags for the vault: `{ packed, at, count }`. `packed` is the well-formed ledger-form tags
 * joined (60 ASCII characters each) or, for a Uint8Array, the raw tags concatenated (44 bytes
 * each); `at[i]` is where the i-th packed tag sits in `tags` (null: the identity).
 */
function packTags(tags) {
  if (tags instanceof Uint8Array) {
    if (tags.length % TAG_BYTES !== 0) throw new PrivsvcError('tags: a Uint8Array of 44 bytes per tag');
    return { packed: tags, at: null, count: tags.length / TAG_BYTES };
  }
  // Only the length here (the vault decodes strictly); the joined text must be ASCII for its
  // 60-byte framing in wasm, checked once on the whole text and tag by tag only when it is not.
  let texts = [];
  let at = [];
  for (let i = 0; i < tags.length; i++) {
    const t = String(tags[i]);
    if (t.length === 60) {
      texts.push(t);
      at.push(i);
    }
  }
  let packed = texts.join('');
  if (NON_ASCII.test(packed)) {
    const keep = texts.map((t) => !NON_ASCII.test(t));
    at = at.filter((_, j) => keep[j]);
    texts = texts.filter((_, j) => keep[j]);
    packed = texts.join('');
  }
  return { packed, at: at.length === tags.length ? null : at, count: tags.length };
}

/** The vault's packed answer (u32 LE index, 16-byte reference per opened tag) as one entry per tag. */
function unpackOpened(answer, at, count) {
  const out = new Array(count).fill(undefined);
  for (let o = 0; o + OPENED_BYTES <= answer.length; o += OPENED_BYTES) {
    const i = (answer[o] | (answer[o + 1] << 8) | (answer[o + 2] << 16) | (answer[o + 3] << 24)) >>> 0;
    out[at ? at[i] : i] = hexOf(answer.subarray(o + 4, o + OPENED_BYTES)).slice(2);
  }
  return out;
}

/** Opens packed tags with a RawKeyVault (worker.js does the same in the vault worker). */
function openPacked(rawVault, packed) {
  return typeof packed === 'string' ? rawVault.openTagTexts(packed) : rawVault.openTagBytes(packed);
}

/** Constant-time comparison of two equal-length strings (signatures). */
function sameSecret(a, b) {
  const x = String(a).toLowerCase();
  const y = String(b).toLowerCase();
  let diff = x.length ^ y.length;
  const n = Math.max(x.length, y.length);
  for (let i = 0; i < n; i++) diff |= (x.charCodeAt(i) | 0) ^ (y.charCodeAt(i) | 0);
  return diff === 0;
}

function nowSeconds() {
  return Math.floor(Date.now() / 1000);
}

/** `true` in browsers (and Web Workers), `false` in Node.js. */
export const inBrowser = !isNode;

// ---------------------------------------------------------------------------------------------
// Expiry and attributes

/** Relative lifetimes, in seconds, as the Arkiv SDK's ExpirationTime builds them. */
export const ExpirationTime = Object.freeze({
  fromSeconds: (n) => n,
  fromMinutes: (n) => n * 60,
  fromHours: (n) => n * 3600,
  fromDays: (n) => n * 86400,
  fromWeeks: (n) => n * 604800,
  fromMonths: (n) => n * 2592000,
});

/** Seconds of an `expires` value (a number of seconds or an object with `seconds`). */
export function expirySeconds(expires) {
  const s = typeof expires === 'object' && expires !== null ? expires.seconds : expires;
  if (typeof s !== 'number' || !Number.isSafeInteger(s) || s <= 0) {
    throw new PrivsvcError(`expires must be a positive whole number of seconds, got ${String(expires)}`);
  }
  return s;
}

/** The lifetime rounded up to 1 h, 1 d, 7 d, 30 d or 90 d. */
export function expiryBucket(seconds) {
  return call(() => raw.rawExpiryBucket(seconds));
}

/** Why `name` is not a valid attribute name (a sentence), or `undefined`. */
export function nameProblem(name) {
  return raw.rawNameProblem(String(name));
}

/** Throws PrivsvcError naming the first attribute with an invalid name (docs/PROTOCOL.md §2). */
export function assertNodeSafeNames(attributes = {}) {
  for (const name of Object.keys(attributes)) {
    const problem = nameProblem(name);
    if (problem !== undefined) throw new PrivsvcError(`invalid attribute name ${JSON.stringify(name)}: ${problem}`);
  }
}

/** Standard base64 with padding of `bytes`. */
export function toBase64(bytes) {
  let text = '';
  for (const b of bytesOf(bytes, 'bytes')) text += String.fromCharCode(b);
  return btoa(text);
}

/** The bytes of standard base64 `text`; throws PrivsvcError on anything else. */
export function fromBase64(text) {
  if (typeof text !== 'string' || !/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(text)) {
    throw new PrivsvcError('not standard base64 with padding');
  }
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/**
 * Seals an envelope (docs/PROTOCOL.md §3): `signer` (a vault's `signer(ref)`) signs `body`
 * (`{ app, exp, hour, ct, enc, data }`) over `attributes` with the record's one-time owner key;
 * answers the padded envelope text.
 */
export async function sealEnvelope(signer, body, attributes) {
  return signer.signEnvelope(body, attributes);
}

/**
 * Parses a sealed envelope without recovering its signer: `{ v, app, exp, hour, ct, enc, types,
 * data, sig }` (data a Uint8Array). Throws PrivsvcError when it is malformed or not padded.
 */
export function parseEnvelope(envelope) {
  const body = JSON.parse(call(() => raw.rawParseEnvelope(bytesOf(envelope, 'envelope'))));
  return { ...body, data: fromBase64(body.data) };
}

/**
 * The digest a record's one-time owner signs (docs/PROTOCOL.md §3), `0x` hex: `body` is
 * `{ app, exp, hour, ct, enc, data }` and its types are those of `attributes`.
 */
export function envelopeDigest(body, attributes) {
  const b = { app: body.app, exp: body.exp, hour: body.hour, ct: body.ct, enc: !!body.enc, data: toBase64(bytesOf(body.data, 'data')) };
  return call(() => raw.rawEnvelopeDigest(JSON.stringify(b), JSON.stringify(toWire(attributes))));
}

/** `text` right-padded with spaces to 512, 1024, 4096 or 16384 bytes (PrivsvcError beyond). */
export function padEnvelope(text) {
  return call(() => raw.rawPadEnvelope(String(text)));
}

/** The RFC 8785 JSON of `attributes` in their wire form (what the envelope digest covers). */
export function canonicalAttributes(attributes) {
  return call(() => raw.rawCanonicalAttributes(JSON.stringify(toWire(attributes))));
}

/**
 * Opens an envelope read from the ledger: its body (`{ app, exp, hour, ct, enc, data }`, data a
 * Uint8Array) and `signer`, the owner address that signed it over `attributes` (the entity's).
 * Throws PrivsvcError when it is malformed or its types differ from the attributes.
 */
export function envelopeSigner(envelope, attributes) {
  const opened = JSON.parse(call(() => raw.rawOpenEnvelope(bytesOf(envelope, 'envelope'), JSON.stringify(toWire(attributes)))));
  return { ...opened, data: hexToBytes(opened.data) };
}

const I32_MIN = -2147483648;
const I32_MAX = 2147483647;
const U64_MAX = (1n << 64n) - 1n;

function wireValue(name, v) {
  if (typeof v === 'string') return { type: 'str', value: v };
  if (typeof v === 'number') {
    if (Number.isInteger(v) && v >= I32_MIN && v <= I32_MAX) return { type: 'i32', value: v };
    throw new PrivsvcError(
      `attribute ${name}: ${v} is not a 32-bit integer; pass a bigint for u64/u256 values or { type, value }`,
    );
  }
  if (typeof v === 'bigint') {
    if (v < 0n) throw new PrivsvcError(`attribute ${name}: negative bigints are not allowed`);
    return { type: v <= U64_MAX ? 'u64' : 'u256', value: v.toString() };
  }
  if (v && typeof v === 'object' && typeof v.type === 'string') {
    const value = v.type === 'u64' || v.type === 'u256' ? String(v.value) : v.value;
    return { type: v.type, value };
  }
  throw new PrivsvcError(`attribute ${name}: unsupported value ${String(v)}`);
}

/**
 * Attributes in their wire form `{ name: { type, value } }`. Strings are `str`, integer numbers
 * `i32`, bigints `u64` (or `u256` above 2^64 - 1); `{ type, value }` is taken as given.
 */
export function toWire(attributes = {}) {
  const out = {};
  for (const [name, v] of Object.entries(attributes)) out[name] = wireValue(name, v);
  return out;
}

/** Plain values of wire attributes: `str` and `i32` as such, `u64`/`u256` as bigints. */
export function fromWire(wire = {}) {
  const out = {};
  for (const [name, { type, value }] of Object.entries(wire)) {
    out[name] = type === 'u64' || type === 'u256' ? BigInt(value) : value;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Fingerprinting (docs/API.md §3.7)

function timeIn(d, floor) {
  if (d instanceof Date) return new Date(call(() => floor(d.getTime())));
  return call(() => floor(d));
}

/** Coarser replacement values for precise ones. */
export const coarse = Object.freeze({
  /** The day of `d` (a Date, or Unix seconds or milliseconds: same kind back). */
  day: (d) => timeIn(d, raw.rawCoarseDay),
  /** The hour of `d` (a Date, or Unix seconds or milliseconds: same kind back). */
  hour: (d) => timeIn(d, raw.rawCoarseHour),
  /** A coordinate rounded to `decimals` decimals (2: about 1 km). */
  geo: (x, decimals = 2) => raw.rawCoarseGeo(x, decimals),
  /** `x` floored to a multiple of `step`. */
  bucket: (x, step) => call(() => raw.rawCoarseBucket(x, step)),
});

/** Fingerprinting warnings of one record: `[{ code, attribute, message }]`. */
export function checkRecord({ attributes, expires, payload } = {}) {
  const wire = attributes === undefined ? undefined : JSON.stringify(toWire(attributes));
  const seconds = expires === undefined ? undefined : expirySeconds(expires);
  const data = payload === undefined ? undefined : bytesOf(payload, 'payload');
  return JSON.parse(call(() => raw.rawCheckRecord(wire, seconds, data)));
}

/** The `rare-combination` warnings of `attributes` against the `existing` records' attributes. */
export function checkRarity(attributes, existing, k = 3) {
  const list = JSON.stringify(existing.map((a) => toWire(a)));
  return JSON.parse(call(() => raw.rawCheckRarity(JSON.stringify(toWire(attributes)), list, k)));
}

// ---------------------------------------------------------------------------------------------
// Wallets: an EIP-1193 provider or a viem-like wallet client

/**
 * The wallet interface privsvc uses, over an EIP-1193 provider (`request({ method, params })`)
 * or a viem wallet client (`signTypedData`, `signMessage`, `account` or `getAddresses`).
 */
export function asWallet(wallet) {
  if (wallet && wallet.__privsvcWallet) return wallet;
  if (wallet && typeof wallet.request === 'function' && typeof wallet.signTypedData !== 'function') {
    const w = wallet;
    let account;
    const address = async () => {
      if (account) return account;
      let list = await w.request({ method: 'eth_accounts' });
      if (!list || list.length === 0) list = await w.request({ method: 'eth_requestAccounts' });
      if (!list || list.length === 0) throw new PrivsvcError('the wallet exposes no account; connect it first');
      account = list[0];
      return account;
    };
    return {
      __privsvcWallet: true,
      address,
      async signTypedData(json) {
        return w.request({ method: 'eth_signTypedData_v4', params: [await address(), json] });
      },
      async personalSign(message) {
        return w.request({ method: 'personal_sign', params: [hexOf(message), await address()] });
      },
    };
  }
  if (wallet && typeof wallet.signTypedData === 'function') {
    const w = wallet;
    const address = async () => {
      if (w.account && w.account.address) return w.account.address;
      const list = await w.getAddresses();
      if (!list || list.length === 0) throw new PrivsvcError('the wallet client has no account');
      return list[0];
    };
    return {
      __privsvcWallet: true,
      address,
      async signTypedData(json) {
        const td = JSON.parse(json);
        const { EIP712Domain: _domain, ...types } = td.types;
        return w.signTypedData({
          account: w.account || (await address()),
          domain: td.domain,
          types,
          primaryType: td.primaryType,
          message: td.message,
        });
      },
      async personalSign(message) {
        return w.signMessage({ account: w.account || (await address()), message: { raw: message } });
      },
    };
  }
  throw new PrivsvcError(
    'a wallet is an EIP-1193 provider (request({ method, params })) or a viem-like wallet client (signTypedData, signMessage)',
  );
}

/**
 * An EIP-1193 provider over an in-memory key: the dev wallet of the devnet page and of tests.
 * Never use it for real funds. `key` is 32 bytes in hex; omitted, a random key.
 */
export function devWallet(key) {
  const w = key === undefined ? raw.RawLocalWallet.random() : call(() => raw.RawLocalWallet.fromKey(key));
  const address = w.address;
  return {
    address,
    isDevWallet: true,
    async request({ method, params = [] }) {
      switch (method) {
        case 'eth_accounts':
        case 'eth_requestAccounts':
          return [address];
        case 'eth_signTypedData_v4': {
          const json = typeof params[1] === 'string' ? params[1] : JSON.stringify(params[1]);
          return call(() => w.signTypedData(json));
        }
        case 'personal_sign': {
          const msg = params[0];
          const bytes = typeof msg === 'string' && msg.startsWith('0x') ? hexToBytes(msg) : bytesOf(msg, 'message');
          return call(() => w.personalSign(bytes));
        }
        default:
          throw Object.assign(new Error(`dev wallet: method ${method} not supported`), { code: 4200 });
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Vaults (docs/API.md §3.3)

/** Typed data with `domain.chainId` as a number, the form wallets expect. */
function typedDataObject(json) {
  const td = JSON.parse(json);
  if (td.domain && typeof td.domain.chainId === 'string') td.domain.chainId = Number(BigInt(td.domain.chainId));
  return td;
}

/** `derivationTypedData(app, chainId?)`: the key-derivation message as EIP-712 typed data. */
export function derivationTypedData(app, chainId) {
  return typedDataObject(call(() => raw.rawDerivationTypedData(app, chainId)));
}

/** `proofTypedData(body, chainId?)`: an ownership proof as EIP-712 typed data. */
export function proofTypedData(body, chainId) {
  return typedDataObject(call(() => raw.rawProofTypedData(JSON.stringify(body), chainId)));
}

/**
 * Asks the wallet for the derivation signature twice and returns it once checked: two different
 * signatures give `NonDeterministicWalletError`, a signature that does not recover (plain ECDSA)
 * to the wallet's address `SmartContractWalletError`, which is how a contract wallet is refused.
 * No RPC is asked for the wallet's code (PROTOCOL, revision 3: no call names the wallet), so an
 * EIP-7702 delegated account, whose key still signs, passes.
 */
async function signDerivation(wallet, app, opts = {}) {
  const w = asWallet(wallet);
  const address = await w.address();
  const typed = JSON.stringify(derivationTypedData(app, opts.chainId));
  const first = await w.signTypedData(typed);
  const second = await w.signTypedData(typed);
  if (!sameSecret(first, second)) {
    throw new NonDeterministicWalletError(
      'the wallet gave two different signatures for the same derivation message; privsvc needs a deterministic (RFC 6979) signer',
    );
  }
  let signer;
  try {
    signer = raw.rawDerivationSigner(first, app, opts.chainId);
  } catch {
    signer = '';
  }
  if (signer.toLowerCase() !== String(address).toLowerCase()) {
    throw new SmartContractWalletError(
      'the derivation signature does not recover to the wallet address: smart-contract wallets are not supported (use an externally owned account, or a random-root vault)',
    );
  }
  return first;
}

/** Signer of a record in a `KeyVault`: `address`, `signEnvelope`, `signProof`. */
class LocalSigner {
  #raw;
  constructor(rawSigner) {
    this.#raw = rawSigner;
    /** The record's one-time owner address. */
    this.address = rawSigner.address;
  }
  /** Seals an envelope: `body` `{ app, exp, hour, ct, enc, data }`, wire or plain attributes. */
  signEnvelope(body, attributes) {
    const wire = JSON.stringify(toWireMaybe(attributes));
    return call(() => this.#raw.signEnvelope(body.app, body.exp, body.hour, body.ct, !!body.enc, bytesOf(body.data, 'data'), wire));
  }
  /** Signs an ownership proof body; the signature in hex. */
  signProof(body, chainId) {
    return call(() => this.#raw.signProof(JSON.stringify(body), chainId));
  }
  /** @internal */
  _ownershipProof(p, now) {
    return call(() =>
      raw.rawSignOwnershipProof(this.#raw, p.entityKey, p.challenge, p.verifier, p.ttlSeconds, p.chainId, now),
    );
  }
}

function toWireMaybe(attributes = {}) {
  const vals = Object.values(attributes);
  if (vals.length > 0 && vals.every((v) => v && typeof v === 'object' && 'type' in v && 'value' in v)) return attributes;
  return toWire(attributes);
}

/** The user's keys for one app, held in this thread (docs/API.md §3.3). */
export class KeyVault {
  #raw;
  /** @internal use the static constructors. */
  constructor(rawVault) {
    this.#raw = rawVault;
  }
  /** Asks the wallet for the derivation signature (twice, compared) and derives the vault. */
  static async fromWallet(wallet, app, opts = {}) {
    return KeyVault.fromSignature(await signDerivation(wallet, app, opts), app);
  }
  /** Returns only the checked derivation signature (as secret as the keys). */
  static async signDerivation(wallet, app, opts = {}) {
    return signDerivation(wallet, app, opts);
  }
  /** The vault of a derivation signature already held. */
  static fromSignature(signature, app) {
    return new KeyVault(call(() => raw.RawKeyVault.fromSignature(signature, app)));
  }
  /** A random-root vault: `{ vault, recoveryCode }`. */
  static random(app) {
    const r = raw.RawKeyVault.random(app);
    const recoveryCode = r.recoveryCode;
    const vault = new KeyVault(r.takeVault());
    r.free();
    return { vault, recoveryCode };
  }
  /** Restores a random-root vault from its 24-word recovery code. */
  static fromRecoveryCode(code, app) {
    return new KeyVault(call(() => raw.RawKeyVault.fromRecoveryCode(code, app)));
  }
  /** The app the keys are derived for. */
  get app() {
    return this.#raw.app;
  }
  /** `false`: the keys are in this thread (see WorkerVault). */
  get isolated() {
    return false;
  }
  /** A fresh random record reference (hex). */
  newRecord() {
    return this.#raw.newRecord();
  }
  /** The reference of scope `name`. */
  scopeRecord(name) {
    return this.#raw.scopeRecord(name);
  }
  /** A tag for `ref` in its ledger form (base64). */
  makeTag(ref) {
    return call(() => this.#raw.makeTag(ref));
  }
  /**
   * For each tag, its reference when this vault made it, else `undefined`. `tags` is an array of
   * ledger-form tags (base64) or one Uint8Array of raw tags, 44 bytes each.
   */
  openTags(tags) {
    const { packed, at, count } = packTags(tags);
    return unpackOpened(call(() => openPacked(this.#raw, packed)), at, count);
  }
  /**
   * @internal The client's form of openTags: raw tags (44 bytes each) in, the packed answer out
   * (20 bytes for each tag that opens: its index, u32 little-endian, then its reference).
   */
  _openTagBytes(tags) {
    return call(() => this.#raw.openTagBytes(tags));
  }
  /** The one-time owner address of `ref`. */
  addressOf(ref) {
    return call(() => this.#raw.addressOf(ref));
  }
  /** The signer of `ref`. */
  signer(ref) {
    return new LocalSigner(call(() => this.#raw.signer(ref)));
  }
  /** Encrypts `data` for `ref`: nonce(12) || ciphertext. */
  encrypt(ref, data) {
    return call(() => this.#raw.encrypt(ref, bytesOf(data, 'data')));
  }
  /** Decrypts a payload encrypted for `ref`. */
  decrypt(ref, data) {
    return call(() => this.#raw.decrypt(ref, bytesOf(data, 'data')));
  }
  /** Cover scores (docs/PROTOCOL.md §8.4), 32 bytes per candidate. */
  coverScores(anchor, candidates) {
    return call(() => this.#raw.coverScores(anchor, candidates));
  }

  /**
   * The key that seals the client's scan cache (32 bytes, derived from the root; it derives
   * nothing else).
   * @internal
   */
  scanCacheKey() {
    return call(() => this.#raw.scanCacheKey());
  }
  /** Wipes the keys (the vault is unusable afterwards). */
  free() {
    this.#raw.free();
  }
}

// ---------------------------------------------------------------------------------------------
// WorkerVault: the same vault in a dedicated worker

/** How long a new vault worker may take to answer its first message (load its wasm module), ms. */
const DEFAULT_WORKER_TIMEOUT_MS = 30000;

/**
 * Why a vault worker failed, from its `error` event: a script that threw has a message; a
 * script that did not load (missing, wrong MIME type, served unbundled by a bundler) has none.
 */
function workerFailure(ev) {
  if (ev && ev.message) return ev.message;
  if (ev instanceof Error) return String(ev);
  return 'its script did not load or run (a missing file, a wrong MIME type, or a bundler that copied worker.js unbundled: see "Using it with a bundler" in the package README)';
}

/**
 * Starts the package's vault worker (a module Web Worker in browsers, `worker_threads` in
 * Node.js) and waits for its answer to a first message: a worker that fails to start or does
 * not answer within `timeoutMs` rejects with a PrivsvcError saying why.
 */
async function startWorker({ timeoutMs = DEFAULT_WORKER_TIMEOUT_MS } = {}) {
  let post;
  let stop;
  // Node.js: the worker keeps the process alive only while a request is pending.
  let hold = () => {};
  let release = () => {};
  const pending = new Map();
  let nextId = 0;
  let failed = null;
  const onMessage = (msg) => {
    const p = pending.get(msg && msg.id);
    if (!p) return;
    pending.delete(msg.id);
    if (pending.size === 0) release();
    if (msg.ok) p.resolve(msg.value);
    else p.reject(toSpecError(msg.error));
  };
  const fail = (err) => {
    failed = failed || err;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
    release();
  };
  const onError = (e) => fail(new PrivsvcError(`the vault worker failed: ${workerFailure(e)}`));
  if (platform.isNode) {
    const w = platform.startWorker();
    w.on('message', onMessage);
    w.on('error', onError);
    w.on('exit', (code) => fail(new PrivsvcError(`the vault worker exited (code ${code})`)));
    hold = () => w.ref();
    release = () => w.unref();
    post = (m, moving) => w.postMessage(m, moving);
    stop = () => w.terminate();
  } else {
    // One expression, as bundlers recognise it: they bundle worker.js as a worker of its own.
    const w = new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'privsvc-vault' });
    w.onmessage = (ev) => onMessage(ev.data);
    w.onmessageerror = () => onError(new Error('a message from the vault worker could not be read'));
    w.onerror = (ev) => {
      if (ev.preventDefault) ev.preventDefault();
      onError(ev);
    };
    post = (m, moving) => w.postMessage(m, moving);
    stop = () => w.terminate();
  }
  // `moving`: buffers handed to the worker rather than copied (postMessage's transfer list).
  const askMoving = (op, moving, ...args) => {
    if (failed) return Promise.reject(failed);
    const id = ++nextId;
    return new Promise((resolve, reject) => {
      if (pending.size === 0) hold();
      pending.set(id, { resolve, reject });
      post({ id, op, args }, moving);
    });
  };
  const ask = (op, ...args) => askMoving(op, [], ...args);
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new PrivsvcError(`the vault worker did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    // A browser's worker gets the page's compiled module (worker.js); Node's loads its file.
    await Promise.race([platform.isNode ? ask('start') : ask('start', wasmModule), late]);
  } catch (e) {
    stop();
    fail(e);
    throw e;
  } finally {
    clearTimeout(timer);
  }
  return {
    ask,
    askMoving,
    terminate() {
      stop();
      fail(new PrivsvcError('the vault worker has been terminated; create a new vault to continue'));
    },
  };
}

/** Signer of a record in a `WorkerVault`: holds only the reference, the key stays in the worker. */
class WorkerSigner {
  #worker;
  #ref;
  constructor(worker, ref, address) {
    this.#worker = worker;
    this.#ref = ref;
    /** The record's one-time owner address. */
    this.address = address;
  }
  /** Seals an envelope in the worker. */
  signEnvelope(body, attributes) {
    return this.#worker.ask('signEnvelope', this.#ref, { ...body, data: bytesOf(body.data, 'data') }, JSON.stringify(toWireMaybe(attributes)));
  }
  /** Signs an ownership proof body in the worker. */
  signProof(body, chainId) {
    return this.#worker.ask('signProof', this.#ref, JSON.stringify(body), chainId);
  }
  /** @internal */
  _ownershipProof(p, now) {
    return this.#worker.ask('ownershipProof', this.#ref, p.entityKey, p.challenge, p.verifier, p.ttlSeconds, p.chainId, now);
  }
}

/** The user's keys in a dedicated worker: the page never holds the root (docs/API.md §3.3). */
export class WorkerVault {
  #worker;
  #app;
  /** @internal use the static constructors. */
  constructor(worker, app) {
    this.#worker = worker;
    this.#app = app;
  }
  /**
   * Starts the package's worker without keys: load them with `loadWallet`, `loadSignature`,
   * `loadRandom` or `loadRecoveryCode` (until then every operation rejects). The static
   * constructors below do both steps. Rejects with a PrivsvcError saying why when the worker
   * fails to start or does not answer within `timeoutMs` (default 30000).
   */
  static async spawn({ timeoutMs } = {}) {
    return new WorkerVault(await startWorker({ timeoutMs }), undefined);
  }
  /** Keys in a worker, from the wallet's checked derivation signature (same checks as KeyVault). */
  static async fromWallet(wallet, app, opts = {}) {
    const signature = await signDerivation(wallet, app, opts);
    return WorkerVault.fromSignature(signature, app, opts);
  }
  /** Keys in a worker from a derivation signature already held. */
  static async fromSignature(signature, app, { timeoutMs } = {}) {
    return WorkerVault.#spawnWith(timeoutMs, (v) => v.loadSignature(signature, app));
  }
  /** A random root in a worker: `{ vault, recoveryCode }`. */
  static async random(app, { timeoutMs } = {}) {
    let recoveryCode;
    const vault = await WorkerVault.#spawnWith(timeoutMs, async (v) => {
      recoveryCode = await v.loadRandom(app);
    });
    return { vault, recoveryCode };
  }
  /** Restores a random root in a worker. */
  static async fromRecoveryCode(code, app, { timeoutMs } = {}) {
    return WorkerVault.#spawnWith(timeoutMs, (v) => v.loadRecoveryCode(code, app));
  }
  static async #spawnWith(timeoutMs, load) {
    const v = await WorkerVault.spawn({ timeoutMs });
    try {
      await load(v);
    } catch (e) {
      v.terminate();
      throw e;
    }
    return v;
  }
  /**
   * Loads the keys of `app` from the wallet's derivation signature (asked twice and checked, as
   * `KeyVault.fromWallet`); replaces any keys the worker held.
   */
  async loadWallet(wallet, app, opts = {}) {
    await this.loadSignature(await signDerivation(wallet, app, opts), app);
  }
  /** Loads the keys of `app` from a derivation signature already held. */
  async loadSignature(signature, app) {
    await this.#worker.ask('fromSignature', signature, app);
    this.#app = app;
  }
  /** Loads a fresh random root for `app`; resolves to its 24-word recovery code. */
  async loadRandom(app) {
    const recoveryCode = await this.#worker.ask('random', app);
    this.#app = app;
    return recoveryCode;
  }
  /** Loads the random root of `app` from its 24-word recovery code. */
  async loadRecoveryCode(code, app) {
    await this.#worker.ask('fromRecoveryCode', code, app);
    this.#app = app;
  }
  /** The app the keys are derived for (`undefined` until keys are loaded). */
  get app() {
    return this.#app;
  }
  /** `true`: the keys are in a worker, not in this thread (a name that survives minification). */
  get isolated() {
    return true;
  }
  /** A fresh random record reference. */
  newRecord() {
    return this.#worker.ask('newRecord');
  }
  /** The reference of scope `name`. */
  scopeRecord(name) {
    return this.#worker.ask('scopeRecord', name);
  }
  /** A tag for `ref`. */
  makeTag(ref) {
    return this.#worker.ask('makeTag', ref);
  }
  /** For each tag, its reference when this vault made it, else `undefined` (as KeyVault.openTags). */
  async openTags(tags) {
    const { packed, at, count } = packTags(tags);
    return unpackOpened(await this.#worker.ask('openTags', packed), at, count);
  }
  /**
   * @internal KeyVault._openTagBytes in the worker. `tags` must be the caller's own copy: its
   * buffer moves to the worker (no copy), and this thread's view of it is left empty.
   */
  _openTagBytes(tags) {
    return this.#worker.askMoving('openTags', movable(tags), tags);
  }
  /** The one-time owner address of `ref`. */
  addressOf(ref) {
    return this.#worker.ask('addressOf', ref);
  }
  /** The signer of `ref` (its key stays in the worker). */
  async signer(ref) {
    return new WorkerSigner(this.#worker, ref, await this.#worker.ask('addressOf', ref));
  }
  /** Encrypts `data` for `ref`. */
  encrypt(ref, data) {
    return this.#worker.ask('encrypt', ref, bytesOf(data, 'data'));
  }
  /** Decrypts a payload encrypted for `ref`. */
  decrypt(ref, data) {
    return this.#worker.ask('decrypt', ref, bytesOf(data, 'data'));
  }
  /** Cover scores (docs/PROTOCOL.md §8.4). */
  coverScores(anchor, candidates) {
    return this.#worker.ask('coverScores', anchor, candidates);
  }

  /**
   * The scan cache's key, from the worker (as KeyVault.scanCacheKey).
   * @internal
   */
  scanCacheKey() {
    return this.#worker.ask('scanCacheKey');
  }
  /** Stops the worker and with it the keys. */
  terminate() {
    this.#worker.terminate();
  }
}

/**
 * A vault for `app` from a wallet: in a worker when `isolateKeys` (default: in browsers), else
 * in this thread. A worker that fails to start rejects with a PrivsvcError saying why; the keys
 * never move into this thread unless `isolateKeys` is `false`.
 */
export async function vaultFromWallet(wallet, app, { isolateKeys = inBrowser, workerTimeoutMs, ...opts } = {}) {
  if (isolateKeys) {
    // Started before the wallet is asked: a worker that cannot start costs the user no signature.
    const vault = await WorkerVault.spawn({ timeoutMs: workerTimeoutMs });
    try {
      await vault.loadWallet(wallet, app, opts);
    } catch (e) {
      vault.terminate();
      throw e;
    }
    return vault;
  }
  return KeyVault.fromSignature(await signDerivation(wallet, app, opts), app);
}

// ---------------------------------------------------------------------------------------------
// Ownership proofs (docs/API.md §3.4)

/** Signs an ownership proof with a record's signer; the proof object (Rust client's JSON form). */
export async function signOwnershipProof(signer, { entityKey, challenge, verifier, ttlSeconds, chainId, now } = {}) {
  if (!signer || typeof signer._ownershipProof !== 'function') {
    throw new PrivsvcError('signOwnershipProof needs a signer from vault.signer(ref)');
  }
  checkProofParams('signOwnershipProof', { challenge, verifier });
  const json = await signer._ownershipProof(
    { entityKey, challenge, verifier, ttlSeconds, chainId },
    now === undefined ? nowSeconds() : now,
  );
  return JSON.parse(json);
}

/**
 * Verifies an ownership proof with the Rust verifier: window, challenge, verifier, chain and
 * signature, then the entity on the ledger of `client` (a `publicClient` value, see
 * `ledgerReader`, or a private client): its owner is the signer and it is a valid record of the
 * signer. Returns
 * `{ ok: true }` or `{ ok: false, reason }`.
 */
export async function verifyOwnershipProof(proof, { challenge, verifier, client, now } = {}) {
  checkProofParams('verifyOwnershipProof', { challenge, verifier });
  const reader = readerOf(client);
  let reason;
  try {
    reason = await raw.rawVerifyOwnershipProof(JSON.stringify(proof), challenge, verifier, reader, now);
  } catch (e) {
    return { ok: false, reason: `cannot check the proof: ${e.message}` };
  }
  return reason === '' ? { ok: true } : { ok: false, reason };
}

// ---------------------------------------------------------------------------------------------
// Lower-level helpers used by relayers (docs/API.md §3.6 and §3.8)

/** The RFC 9474 suite tokens use. */
export function tokenSuite() {
  return raw.rawTokenSuite();
}

/** Checks an issuer key (SPKI DER bytes or standard base64): `{ spki }` with its canonical DER. */
export function importIssuerKey(spki) {
  const bytes = typeof spki === 'string' ? fromBase64(spki) : bytesOf(spki, 'spki');
  return Object.freeze({ spki: call(() => raw.rawImportIssuerKey(bytes)) });
}

/**
 * Verifies a token redemption `{ epoch, nonce, signature }` for `app` under `key`
 * (importIssuerKey's, or SPKI bytes): answers its token id (hex), which a relayer records as
 * spent; throws PrivsvcError when it does not verify. Whether its day is accepted and whether
 * it was spent before is the relayer's business.
 */
export function verifyToken(key, token, app = token && token.app) {
  const spki = key && key.spki instanceof Uint8Array ? key.spki : bytesOf(key, 'key');
  if (typeof app !== 'string') throw new PrivsvcError('verifyToken needs the app the token is for');
  const t = { epoch: token.epoch, nonce: token.nonce, signature: token.signature };
  return call(() => raw.rawVerifyToken(spki, app, JSON.stringify(t)));
}

/** The token id of a prepared token message: SHA-256, hex. */
export function tokenId(prepared) {
  return raw.rawTokenId(bytesOf(prepared, 'prepared'));
}

/** The text a wallet signs (personal_sign) for an issue request at `ts` (Unix ms). */
export function issuanceMessage(req, ts) {
  return call(() => raw.rawIssuanceMessage(JSON.stringify(req), ts));
}

/**
 * The gateway side of Oblivious HTTP (docs/API.md §3.8): `publicKey` (the `ohttpKey` to
 * publish) and `open(message)`, which answers the request `{ method, path, headers, body }`
 * and `seal(response)` for its answer (`{ status, headers?, body? }`, once).
 */
export class OhttpGateway {
  #raw;
  constructor(rawGateway) {
    this.#raw = rawGateway;
  }
  /** The gateway whose key comes from `seed` (at least 32 bytes). */
  static fromSeed(seed) {
    return new OhttpGateway(call(() => raw.RawOhttpGateway.fromSeed(bytesOf(seed, 'seed'))));
  }
  /** The key configuration, hex. */
  get publicKey() {
    return this.#raw.publicKey;
  }
  /** Opens an encapsulated request; throws PrivsvcError when it does not open. */
  open(message) {
    const opened = call(() => this.#raw.open(bytesOf(message, 'message')));
    return {
      request: opened.request,
      seal: ({ status = 200, headers = [], body = new Uint8Array() } = {}) =>
        call(() => opened.seal(status, JSON.stringify(Array.isArray(headers) ? headers : Object.entries(headers)), bytesOf(body, 'body'))),
    };
  }
}
