// createPrivateClient (docs/API.md §3.1): the Rust PrivateClient compiled to wasm (tokens with
// their minimum age, OHTTP, cover batches, verification against the ledger). The wallet and the
// vault stay JavaScript objects; Rust reaches them through small adapters.
import { raw } from './wasm.js';
import { hexToBytes, packOpened } from './bytes.js';
import { PrivsvcError, checkProofParams, rust } from './errors.js';
import { fetchAdapter, ledgerReader, readerOf } from './net.js';
import {
  asWallet,
  checkRecord,
  fromBase64,
  fromWire,
  inBrowser,
  KeyVault,
  TAG_BYTES,
  toBase64,
  WorkerVault,
  toWire,
  vaultFromWallet,
} from './core.js';
import { scanCacheAdapter } from './scan_cache.js';
import { browserTokenStore, defaultDataDir, fileTokenStore, isStoreHandle, keepsAnyScanCache, openStore, storeSealer, warmStore } from './store.js';

/** What Rust calls on a wallet. */
function walletAdapter(w) {
  return {
    signTypedData: (json) => w.signTypedData(JSON.stringify(derivationTypedDataFix(JSON.parse(json)))),
    personalSign: (bytes) => w.personalSign(bytes),
  };
}

function derivationTypedDataFix(td) {
  if (td.domain && typeof td.domain.chainId === 'string') td.domain.chainId = Number(BigInt(td.domain.chainId));
  return td;
}

/** What Rust calls on a vault (KeyVault or WorkerVault). */
function vaultAdapter(v) {
  return {
    scopeRecord: (name) => v.scopeRecord(name),
    makeTag: (ref) => v.makeTag(ref),
    // `tags`: one Uint8Array of raw tags (Rust's own copy: a WorkerVault moves its buffer to the
    // worker). The answer is packed (20 bytes for each tag that opens: index, reference), one
    // byte array each way and nothing per tag. A custom vault gets the ledger form (base64
    // strings), as a vault's openTags(tags) (docs/API.md §3.3), and its answer is packed here.
    openTags: async (tags) =>
      v instanceof KeyVault || v instanceof WorkerVault ? v._openTagBytes(tags) : packOpened(await v.openTags(ledgerTags(tags)), tags.length / TAG_BYTES),
    addressOf: (ref) => v.addressOf(ref),
    coverScores: (anchor, candidates) => v.coverScores(anchor, candidates),
    async signEnvelope(ref, head, data, wire) {
      const s = await v.signer(ref);
      return s.signEnvelope({ ...head, data }, wire);
    },
    async signProof(ref, body, chainId) {
      const s = await v.signer(ref);
      return s.signProof(body, chainId);
    },
    encrypt: (ref, data) => v.encrypt(ref, data),
    decrypt: (ref, data) => v.decrypt(ref, data),
    // The built-in vaults derive the scan cache's key; a custom vault gives none (no cache).
    scanCacheKey: () => (v instanceof KeyVault || v instanceof WorkerVault ? v.scanCacheKey() : undefined),
  };
}

function ledgerTags(bytes) {
  const out = [];
  for (let o = 0; o < bytes.length; o += TAG_BYTES) out.push(toBase64(bytes.subarray(o, o + TAG_BYTES)));
  return out;
}

function myRecord(r) {
  const data = hexToBytes(r.data);
  return {
    key: r.key,
    entityKey: r.entityKey,
    owner: r.owner,
    creator: r.creator,
    app: r.app,
    contentType: r.contentType,
    data,
    toText() {
      return new TextDecoder().decode(data);
    },
    toJson() {
      return JSON.parse(new TextDecoder().decode(data));
    },
    attributes: fromWire(r.attributes),
    createdAt: r.createdAt,
    expiresAt: r.expiresAt,
    expSeconds: r.expSeconds,
    encrypted: r.encrypted,
    envelope: r.envelope,
    ref: r.ref,
    // false: written by this device and not verified by a scan yet (docs/PROTOCOL.md §8.3).
    verified: r.verified,
  };
}

/**
 * Creates a client (docs/API.md §3.1): derives the keys from one wallet signature
 * (asked twice and compared) unless a `vault` is given, in a worker when `isolateKeys` (default
 * in browsers; a worker that fails to start rejects, see vaultFromWallet), opens the device
 * store (tokens, pins and the scan cache kept between sessions, sealed under a key from the
 * vault's root), contacts the relayers and starts the session's schedule.
 */
export async function createPrivateClient(options = {}) {
  const o = { ...options };
  if (!o.app || typeof o.app !== 'string') throw new PrivsvcError('createPrivateClient: `app` is required');
  if (!o.wallet && !o.vault) throw new PrivsvcError('createPrivateClient: give a `wallet` or a `vault`');
  const send = fetchAdapter(o.fetch);
  const tokens = o.tokens;
  if (tokens !== undefined && tokens !== 'auto' && !(tokens && (tokens.sourceOf || isTokenSource(tokens)))) {
    throw new PrivsvcError('`tokens` is "auto", tokenWallet.source() or a TokenSource ({ take(app, requestedMs), putBack(app, token) })');
  }
  const store = o.tokenStore;
  checkTokenStore(store, 'tokenStore');
  if (o.memoryStores !== undefined && typeof o.memoryStores !== 'boolean') throw new PrivsvcError('`memoryStores` is true or false');
  if (o.allowWalletRpc !== undefined && typeof o.allowWalletRpc !== 'boolean') throw new PrivsvcError('`allowWalletRpc` is true or false');
  if (o.tokenPrefetch !== undefined || o.tokenPrefetchWithinMs !== undefined) {
    throw new PrivsvcError('`tokenPrefetch` is gone (revision 3): the session refills its token store on its own schedule (`schedule.refillBelow`, `schedule.firstRefillMs`, `schedule.laterRefillMs`); TokenWallet.prefetchLater remains');
  }
  const relayers = relayerOptions(o.relayers);
  const schedule = scheduleOption(o.schedule);
  const reader = readerOf(o.publicClient);
  const wallet = o.wallet ? asWallet(o.wallet) : undefined;
  const walletAddress = wallet ? await wallet.address() : undefined;
  if (o.allowWalletRpc !== true) await refuseWalletRpc(o.publicClient, o.wallet, reader, walletAddress);
  // While the vault starts and the wallet signs: the chain id (the reader keeps it) and the
  // device store's database, which the store and the Rust client wait for after the vault.
  reader.chainId().catch(() => {});
  const storeHandle = deviceStoreHandle(o);
  // Asked before the database is opened: a device store that does not exist yet keeps nothing.
  const resumesNothing = resumesNoScanCache(o, storeHandle);
  if (storeHandle !== undefined) warmStore(storeHandle);
  // A session that certainly resumes no scan cache starts its first listing now: it needs no
  // key (docs/PROTOCOL.md §8.1). Freed unless handed to the Rust client.
  const early = resumesNothing
    .then((none) => (none ? rust(raw.RawFirstListing.start(reader, o.project ?? o.app)) : undefined))
    .catch(() => undefined);
  const dropEarly = () => early.then((l) => l && l.free());
  const isolateKeys = o.isolateKeys === undefined ? inBrowser : o.isolateKeys;
  let vault;
  try {
    vault = o.vault || (await vaultFromWallet(o.wallet, o.app, { isolateKeys, chainId: o.chainId, workerTimeoutMs: o.workerTimeoutMs }));
  } catch (e) {
    dropEarly();
    throw e;
  }
  const rustOptions = {
    app: o.app,
    project: o.project,
    relayers,
    ohttpRelay: o.ohttpRelay,
    delayMs: o.delayMs,
    minAnonymity: o.minAnonymity,
    maxHoldMs: o.maxHoldMs,
    inclusionTimeoutMs: o.inclusionTimeoutMs,
    pollMs: o.pollMs,
    strict: o.strict,
    rarityK: o.rarityK,
    coverBatches: o.coverBatches,
    tokenAttestation: o.tokenAttestation,
    tokenMinAgeMs: o.tokenMinAgeMs,
    tokenMaxRipeMs: o.tokenMaxRipeMs,
    tokenRipeWaitMs: o.tokenRipeWaitMs,
    allowOnDemand: o.allowOnDemand,
    // The session's timers run in Node.js as in browsers; they never keep a process alive.
    schedule,
    seed: seedOption(o.seed),
    trustedRelayersOnly: o.trustedRelayersOnly,
    walletAddress,
    scanCacheResumeBlocks: o.scanCacheResumeBlocks,
  };
  let stores;
  try {
    stores = await deviceStores(o, vault, reader, storeHandle);
  } catch (e) {
    dropEarly();
    throw e;
  }
  let scanCache;
  let source;
  let firstListing;
  try {
    scanCache = scanCacheAdapter(o.scanCache, stores.scanCache);
    source = tokens && tokens.sourceOf ? await tokens.sourceOf() : undefined;
    firstListing = await early;
  } catch (e) {
    dropEarly();
    if (stores.release) stores.release();
    throw e;
  }
  const custom = tokens && !tokens.sourceOf && isTokenSource(tokens) ? boundedSource(tokens) : undefined;
  const rustStore = new raw.RawTokenStore(stores.tokenStore);
  // `create` takes its own reference to the store at once: the JS handle is freed right after.
  const created = raw.RawClient.create(
    JSON.stringify(rustOptions),
    reader,
    wallet ? walletAdapter(wallet) : undefined,
    vaultAdapter(vault),
    rustStore,
    source,
    custom,
    send,
    scanCache,
    firstListing,
  );
  rustStore.free();
  let inner;
  try {
    inner = await rust(created);
  } catch (e) {
    if (stores.release) stores.release();
    throw e;
  }
  const project = inner.project;
  let closed = false;
  return {
    __privsvcClient: true,
    app: o.app,
    project,
    vault,
    publicClient: o.publicClient === undefined ? reader.url : o.publicClient,
    reader,
    chainId: inner.chainId,
    /** What became of the scan cache at start: `{ state: 'off' | 'empty' | 'resumed' | 'discarded', block?, reason? }`. */
    scanCache: JSON.parse(inner.scanCacheState),
    /**
     * Where tokens and pins are kept: `{ kind: 'indexeddb' | 'file' | 'memory' | 'custom', id?,
     * discarded }` (`discarded`: parts that did not open under the vault's key at start).
     */
    deviceStore: stores.info,
    async createEntity({ payload, contentType, attributes = {}, expires, scope, encrypt = false } = {}) {
      const bytes = payload instanceof Uint8Array ? payload : new TextEncoder().encode(String(payload ?? ''));
      const seconds = typeof expires === 'object' && expires !== null ? expires.seconds : expires;
      const params = { contentType, attributes: toWire(attributes), expires: seconds, scope, encrypt };
      return JSON.parse(await rust(inner.createEntity(JSON.stringify(params), bytes)));
    },
    async myEntities({ refresh = false, where } = {}) {
      const w = where === undefined ? undefined : JSON.stringify(toWire(where));
      return JSON.parse(await rust(inner.myEntities(refresh, w))).map(myRecord);
    },
    async proveOwnership(entityKey, { challenge, verifier, ttlSeconds } = {}) {
      checkProofParams('proveOwnership', { challenge, verifier });
      return JSON.parse(await rust(inner.proveOwnership(String(entityKey), challenge, verifier, ttlSeconds)));
    },
    check({ attributes, expires, payload } = {}) {
      return checkRecord({ attributes, expires, payload });
    },
    async checkRarity(attributes, k) {
      return JSON.parse(await rust(inner.checkRarity(JSON.stringify(toWire({ project, ...attributes })), k)));
    },
    async scopeAddress(name) {
      return rust(inner.scopeAddress(name));
    },
    relayers() {
      return JSON.parse(inner.relayers());
    },
    relayerAddresses() {
      return JSON.parse(inner.relayerAddresses());
    },
    /**
     * Tokens a write requested now could spend (obtained before now and at least
     * `tokenMinAgeMs` old). 0: a write goes to a relayer that requires none, or fails with
     * NoTokenReady at once. The session's refills keep the store stocked.
     */
    ripeTokens() {
      return inner.ripeTokens();
    },
    /**
     * Ends the session: its timers (tail, scans, refills, status polls) stop, and the device
     * store is left to the next session once no other client of this page or process uses it.
     */
    close() {
      if (closed) return;
      closed = true;
      inner.free();
      if (stores.release) stores.release();
    },
  };
}

/**
 * The `relayers` option for Rust: each a URL or `{ url, address }` (the relayer's account,
 * known out of band: discovery is skipped for it).
 */
function relayerOptions(list) {
  if (list === undefined || list === null) return undefined;
  if (!Array.isArray(list)) throw new PrivsvcError('`relayers` is an array of URLs or { url, address }');
  return list.map((r) => {
    if (typeof r === 'string') return r;
    if (r && typeof r === 'object' && typeof r.url === 'string' && (r.address === undefined || typeof r.address === 'string')) {
      return r.address === undefined ? { url: r.url } : { url: r.url, address: r.address };
    }
    throw new PrivsvcError('each of `relayers` is a URL or { url, address }');
  });
}

/** The `schedule` fields that are `[low, high]` ranges: whole numbers, or numbers for rounds. */
const SCHEDULE_RANGES = ['tailMs', 'statusTailMs', 'firstRefillMs', 'laterRefillMs', 'scanMs', 'fetchAgeBlocks'];
const SCHEDULE_FRACTIONS = ['statusHorizonRounds'];

/**
 * The `schedule` option (SessionSchedule): `tailMs`, `statusTailMs`, `firstRefillMs`,
 * `laterRefillMs`, `scanMs` (ms) and `fetchAgeBlocks` (blocks) as `[low, high]` whole numbers,
 * `statusHorizonRounds` as `[low, high]` numbers, and `refillBelow`; absent fields keep their
 * defaults.
 */
function scheduleOption(schedule) {
  if (schedule === undefined || schedule === null) return undefined;
  if (typeof schedule !== 'object') throw new PrivsvcError('`schedule` is an object');
  const out = {};
  for (const [k, v] of Object.entries(schedule)) {
    if (v === undefined) continue;
    if (SCHEDULE_RANGES.includes(k) || SCHEDULE_FRACTIONS.includes(k)) {
      const whole = SCHEDULE_RANGES.includes(k);
      const ok = (x) => (whole ? Number.isSafeInteger(x) : Number.isFinite(x)) && x >= 0;
      if (!Array.isArray(v) || v.length !== 2 || !v.every(ok)) {
        throw new PrivsvcError(`schedule.${k} is [low, high], ${whole ? 'whole numbers' : 'numbers'} (${k.endsWith('Ms') ? 'milliseconds' : k.endsWith('Blocks') ? 'blocks' : 'batching rounds'})`);
      }
      out[k] = v;
    } else if (k === 'refillBelow') {
      if (!Number.isSafeInteger(v) || v < 0) throw new PrivsvcError('schedule.refillBelow is a whole number');
      out[k] = v;
    } else {
      throw new PrivsvcError(`schedule has no \`${k}\` (it has ${[...SCHEDULE_RANGES, ...SCHEDULE_FRACTIONS, 'refillBelow'].join(', ')})`);
    }
  }
  return out;
}

/** The `seed` option as decimal text of a u64 (a number or a bigint). */
function seedOption(seed) {
  if (seed === undefined || seed === null) return undefined;
  let n;
  try {
    n = BigInt(seed);
  } catch {
    n = -1n;
  }
  if (n < 0n || n >= 1n << 64n) throw new PrivsvcError('`seed` is a whole number from 0 to 2^64 - 1');
  return n.toString();
}

/**
 * Live relayers whose `/v1/info` matches their heartbeat: `[{ url, address, bad, info }]`.
 * `fetch` (optional) carries the `/v1/info` calls.
 */
export async function discoverRelayers(publicClient, fetch) {
  return JSON.parse(await rust(raw.rawDiscoverRelayers(readerOf(publicClient), fetchAdapter(fetch))));
}

/**
 * The project's records without payloads, all read at one pinned block (docs/API.md §3.5):
 * `{ block, entities }`, entities in the ledger's JSON form. With `relayers` (addresses), only
 * records those relayers created.
 */
export async function listApp(client, project, relayers) {
  const list = relayers === undefined ? undefined : JSON.stringify(relayers);
  return JSON.parse(await rust(raw.rawListApp(readerOf(client), project, list)));
}

/**
 * Full records (payloads included) of whole batches (docs/API.md §3.5): `batches` is
 * `[{ block, creator }]`; answers the entities in the ledger's JSON form. Batches are combined
 * into few queries, so the RPC sees a set of batches, not which one mattered.
 */
export async function fetchBatches(client, project, batches) {
  const list = batches.map(({ block, creator }) => ({ block: Number(block), creator }));
  return JSON.parse(await rust(raw.rawFetchBatches(readerOf(client), project, JSON.stringify(list))));
}

/** Every live relayer heartbeat on the ledger, newest first, unverified (docs/API.md §3.5). */
export async function heartbeatRelayers(reader) {
  return JSON.parse(await rust(raw.rawHeartbeatRelayers(readerOf(reader))));
}

/**
 * The issuer's key for (`app`, `epoch`) as published on the ledger (docs/API.md §3.6): its
 * SPKI DER bytes. Throws IssuerEquivocationError when the issuer published two keys.
 */
export async function fetchIssuerKey(reader, issuer, app, epoch) {
  const b64 = await rust(raw.rawFetchIssuerKey(readerOf(reader), issuer, app, epoch));
  return fromBase64(b64);
}

/** The UTC day number of `ms` (default now). */
export function epochOf(ms = Date.now()) {
  return raw.rawEpochOf(ms);
}

/** The days whose tokens relayers accept at `ms` (default now): `[today, yesterday]`. */
export function acceptableEpochs(ms = Date.now()) {
  return Array.from(raw.rawAcceptableEpochs(ms));
}

/**
 * Sends one relayer request through an OHTTP relay, encapsulated to the relayer's gateway key
 * (docs/API.md §3.8): `relayUrl` the relay, `target` the relayer's base URL, `gatewayKey` its
 * hex `ohttpKey`; resolves to `{ status, body }` (`body` a `Uint8Array`, the relayer's answer).
 * The relay sees the target and ciphertext only; the relayer sees the request only.
 */
export async function ohttpCall(relayUrl, target, gatewayKey, { method = 'GET', path, body } = {}, fetch) {
  if (typeof path !== 'string' || !path.startsWith('/')) throw new PrivsvcError('ohttpCall: `path` must start with /');
  let bytes;
  if (body !== undefined) bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body instanceof Uint8Array ? body : new TextEncoder().encode(JSON.stringify(body));
  return rust(raw.rawOhttpCall(relayUrl, target, gatewayKey, method, path, bytes, fetchAdapter(fetch)));
}

/** How long a caller's token source may take to answer `take`, ms: it never waits for a token. */
const TOKEN_TAKE_LIMIT_MS = 1000;

/**
 * A caller's TokenSource as the client calls it: `take(app, requestedMs)` answers within
 * TOKEN_TAKE_LIMIT_MS, else counts as no token (with a warning); a token it hands out later is
 * put back. A source that waits for a token to ripen would spend it the moment it ripens, which
 * tells the issuer when it was issued.
 */
function boundedSource(source) {
  return {
    take(app, requestedMs) {
      let late = false;
      let timer;
      const answer = Promise.resolve(source.take(app, requestedMs));
      const limit = new Promise((resolve) => {
        timer = setTimeout(() => {
          late = true;
          console.warn(`privsvc: the token source did not answer take() within ${TOKEN_TAKE_LIMIT_MS} ms; the write goes on as with no token (a source never waits for a token)`);
          resolve(null);
        }, TOKEN_TAKE_LIMIT_MS);
      });
      answer
        .then((token) => {
          if (late && token) return source.putBack(app, token);
          return undefined;
        })
        .catch(() => {});
      return Promise.race([answer, limit]).finally(() => clearTimeout(timer));
    },
    putBack: (app, token) => source.putBack(app, token),
  };
}

/** Whether `x` is a caller's TokenSource: `take(app)` and `putBack(app, token)`. */
function isTokenSource(x) {
  return x !== null && typeof x === 'object' && typeof x.take === 'function' && typeof x.putBack === 'function';
}

/**
 * The Rust side of a token store: a handle (browserTokenStore, fileTokenStore), a caller's
 * TokenStore (JavaScript objects the Rust code calls), or (memoryStore() or none) a fresh memory
 * store.
 */
function rawStore(store) {
  return new raw.RawTokenStore(store === undefined || store.kind === 'memory' ? undefined : store);
}

/** Refuses a `store` that is none of memoryStore(), browserTokenStore(), fileTokenStore() or a TokenStore. */
function checkTokenStore(store, what) {
  if (store === undefined || store.kind === 'memory' || isStoreHandle(store)) return;
  const methods = ['list', 'add', 'remove', 'prune'];
  if (store === null || typeof store !== 'object' || !methods.every((m) => typeof store[m] === 'function')) {
    throw new PrivsvcError(`${what} must be memoryStore(), browserTokenStore(), fileTokenStore() or a TokenStore with synchronous list(app), add(tokens), remove(app, nonce) and prune(minEpoch)`);
  }
}

/** Whether `v` is one of the package's vaults (they give the key that seals the stores). */
function builtInVault(v) {
  return v instanceof KeyVault || v instanceof WorkerVault;
}

/**
 * The default store handle: IndexedDB in a browser, files under the data directory in Node.js;
 * undefined where neither is available.
 */
function defaultStore() {
  if (inBrowser) return globalThis.indexedDB ? browserTokenStore() : undefined;
  const dir = defaultDataDir();
  return dir === undefined ? undefined : fileTokenStore(dir);
}

/** Whether the session keeps its tokens, pins and scan cache in memory only. */
/**
 * Whether the session certainly resumes no scan cache, so that its first listing may start
 * before the vault (docs/PROTOCOL.md §8.1): it keeps none (`scanCache: false`, or memory stores
 * and no `scanCache`), or its device store keeps no user's scan cache at all. An app's own
 * `scanCache` is only read by the Rust client.
 */
async function resumesNoScanCache(o, handle) {
  if (o.scanCache === false || o.scanCache === null) return true;
  if (o.scanCache !== undefined) return false;
  if (handle === undefined) return true;
  return !(await keepsAnyScanCache(handle));
}

function usesMemoryStores(o) {
  const given = o.tokenStore;
  return (o.memoryStores === true || (given && given.kind === 'memory')) && !isStoreHandle(given);
}

/** The device store's handle a session opens (`deviceStores`), or undefined for none. */
function deviceStoreHandle(o) {
  if (usesMemoryStores(o)) return undefined;
  return isStoreHandle(o.tokenStore) ? o.tokenStore : defaultStore();
}

/**
 * The stores of a session (docs/PROTOCOL.md §8.7) in the device store `handle`
 * (`deviceStoreHandle`): `{ tokenStore, scanCache, info }`, where
 * `tokenStore` is the object the Rust client calls (undefined: memory) and `scanCache` the
 * device store's scan cache (undefined: none unless the app gave one). By default the device
 * store is opened under the vault's key: tokens, key pins, relayer pins and the scan cache.
 * `memoryStores: true` (or `tokenStore: memoryStore()`) keeps everything in memory. A caller's
 * own TokenStore is used as given; the pins it does not keep and the scan cache come from the
 * device store.
 */
async function deviceStores(o, vault, reader, handle) {
  const given = o.tokenStore;
  if (usesMemoryStores(o)) {
    return { tokenStore: given && given.kind !== 'memory' ? given : undefined, scanCache: undefined, info: { kind: given && given.kind !== 'memory' ? 'custom' : 'memory', discarded: [] } };
  }
  let sealer;
  if (handle !== undefined && builtInVault(vault)) sealer = storeSealer(await vault.scanCacheKey(), await reader.chainId(), o.project ?? o.app);
  if (sealer === undefined) {
    if (isStoreHandle(given)) throw new PrivsvcError('tokenStore: a browserTokenStore() or fileTokenStore() is sealed under a key from the vault, which an app\'s own vault does not give: use a KeyVault or WorkerVault, or memoryStores: true');
    console.warn(`privsvc: ${handle === undefined ? 'no place for the device store (no IndexedDB, or no $PRIVSVC_DATA_DIR, $XDG_DATA_HOME or $HOME)' : 'the vault gives no store key'}: tokens, pins and the scan cache are kept in memory for this session only`);
    return { tokenStore: given, scanCache: undefined, info: { kind: given ? 'custom' : 'memory', discarded: [] } };
  }
  // The store keeps the sealer (and frees one it does not need).
  const { store: opened, release } = await openStore(handle, sealer);
  const info = { kind: handle.kind === 'browser' ? 'indexeddb' : 'file', id: opened.id, discarded: [...opened.discarded] };
  if (given === undefined || isStoreHandle(given)) return { tokenStore: opened, scanCache: opened.scanCache(), info, release };
  // A caller's store keeps the tokens (and the pins it has methods for); the rest is the device store's.
  const keeps = (...names) => names.every((n) => typeof given[n] === 'function');
  const pick = (names, from) => Object.fromEntries(names.map((n) => [n, (...a) => from[n](...a)]));
  const keyPins = ['keyPin', 'pinKey'];
  const relayerPins = ['relayerPin', 'pinRelayer', 'unpinRelayer', 'relayerPins'];
  const composite = {
    ...pick(['list', 'add', 'remove', 'prune'], given),
    ...pick(keyPins, keeps(...keyPins) ? given : opened),
    ...(keeps('relayerPin', 'pinRelayer') ? pick(relayerPins.filter((n) => typeof given[n] === 'function'), given) : pick(relayerPins, opened)),
  };
  return { tokenStore: composite, scanCache: opened.scanCache(), info: { ...info, kind: 'custom' }, release };
}

/** The EIP-1193 provider a wallet or public client option is, when it is one. */
function providerOf(x) {
  return x && typeof x === 'object' && typeof x.request === 'function' && typeof x.signTypedData !== 'function' && !x.transport ? x : undefined;
}

/**
 * Refuses a `publicClient` that is the wallet's own provider (docs/PROTOCOL.md §8.1): the
 * wallet's RPC would see every read of the session beside the wallet's address. Detected: the
 * same object as the wallet; `window.ethereum`; a wallet client; and any client or provider
 * other than an RPC URL that answers `eth_accounts` with the wallet's account (a viem public
 * client over `custom(provider)` with the wallet client's provider). `allowWalletRpc: true`
 * skips this.
 */
async function refuseWalletRpc(publicClient, walletOption, reader, walletAddress) {
  if (publicClient === undefined || typeof publicClient === 'string' || reader.url !== undefined) return;
  const refuse = (why) => {
    throw new PrivsvcError(
      `publicClient is the wallet's own provider (${why}): the wallet's RPC would see every read of this session beside the wallet's address. Give an RPC URL or a public client over http(url), or allowWalletRpc: true to accept it (a privacy risk, docs/API.md §3.1)`,
    );
  };
  if (publicClient === walletOption) refuse('the same object is given as wallet and publicClient');
  const injected = globalThis.ethereum;
  if (injected !== undefined && (publicClient === injected || providerOf(publicClient) === injected)) refuse('window.ethereum');
  if (typeof publicClient.signTypedData === 'function' || (publicClient.account && publicClient.account.address)) refuse('a wallet client');
  if (walletAddress === undefined) return;
  let accounts;
  try {
    accounts = await reader.request({ method: 'eth_accounts', params: [] });
  } catch {
    return;
  }
  const mine = String(walletAddress).toLowerCase();
  if (Array.isArray(accounts) && accounts.some((a) => String(a).toLowerCase() === mine)) refuse("it answers eth_accounts with the wallet's account");
}

/** Unix seconds of `value` (a number, bigint or decimal/0x text), else undefined. */
function secondsOf(value) {
  if (value === undefined || value === null) return undefined;
  try {
    const n = Number(BigInt(value));
    return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Verifies a ledger entity as a privsvc record (docs/API.md §3.4): `entity` in the ledger's
 * JSON form (a row of `listApp`, `fetchBatches` or `arkiv_query`) with key, owner, creator,
 * payload and attributes. Returns `{ ok: true, record, unchecked }` or `{ ok: false, code,
 * reason }`.
 *
 * `verifyRecord(entity, { app, relayers })` works as it is: every check that needs no ledger
 * is made (envelope, signature, owner, app, attributes, lifetime, creator), and `unchecked`
 * lists, as `{ code, reason }`, those it could not make: `creation-window` (a copied envelope
 * republished after its window is refused only with the creation block's time) and `copy`
 * (a later entity of the same owner with the same envelope is told apart only by reading the
 * owner's other entities). To make them too, give one of:
 * - `reader` (alias `publicClient`): an RPC URL, a viem public client (any transport,
 *   `custom(window.ethereum)` included) or an EIP-1193 provider; the block's time and the
 *   owner's entities are read from it (a verifier may: it is not the user);
 * - `createdTimestamp`: Unix seconds of that block, when the caller already knows it (also taken
 *   from `entity.createdTimestamp` when the row carries it): the creation window is checked.
 * A private client given as `client` is never used to read: its reader is the user's, and a
 * lookup of the user's own record by its owner would name it to the RPC.
 *
 * A refusal is `{ ok: false, code, reason }`: `code` for programs (`copy`, `republished`,
 * `wrong-owner`, `signature-mismatch`, `untrusted-creator`, `creation-time-unknown`, `ledger`,
 * ...), `reason` for people; a copy carries `original`, the key of the record it copies.
 */
export async function verifyRecord(entity, { app, relayers, owner, createdTimestamp, reader, publicClient, client } = {}) {
  if (!entity || typeof entity !== 'object') throw new PrivsvcError('verifyRecord: `entity` must be a ledger row (an object)');
  let ts = secondsOf(createdTimestamp ?? entity.createdTimestamp);
  // A private client is the user's own: its reader is never asked about the user's record
  // (the RPC would see the user look up their own record). Only a reader or publicClient
  // given for it is used; without one, the checks that need the ledger are named in
  // `unchecked`.
  const source = reader ?? publicClient ?? (client && client.__privsvcClient ? undefined : client);
  if (ts === undefined && source !== undefined) {
    const block = secondsOf(entity.createdAt);
    if (block === undefined) return { ok: false, code: 'creation-time-unknown', reason: 'the entity has no createdAt block number, so its creation time cannot be read' };
    try {
      ts = await readerOf(source).blockTimestamp(block);
    } catch (e) {
      return { ok: false, code: 'ledger', reason: `cannot read the time of the entity's creation block ${block}: ${e.message}` };
    }
    if (ts === undefined) return { ok: false, code: 'creation-time-unknown', reason: `the ledger has no block ${block} (the entity's createdAt), so its creation time is unknown` };
  }
  const args = [JSON.stringify(entity), JSON.stringify({ app, relayers, owner, createdTimestamp: ts })];
  // With a reader, the Rust verify_record_on_ledger also refuses a copy: an earlier entity of
  // the same owner carries the same envelope (`code: "copy"`, `original`: that entity's key).
  const answer = JSON.parse(source === undefined ? raw.rawVerifyRecord(...args) : await rust(raw.rawVerifyRecordOnLedger(...args, readerOf(source))));
  if (!answer.ok) return answer;
  const r = answer.record;
  const data = hexToBytes(r.data);
  return { ok: true, record: { ...r, data, attributes: fromWire(r.attributes), toText: () => new TextDecoder().decode(data) }, unchecked: answer.unchecked ?? [] };
}

/**
 * Client-side token handling (docs/API.md §3.6): fetch tokens with the wallet ahead of time,
 * keep them in a store, and give a client a source to spend them from (`tokens: w.source()`).
 * `reader` is the ledger (a `publicClient` value, see `ledgerReader`); `issuer` the issuer's
 * address and `issuerUrl` its base URL (a relayer's info `issuer` and `issuerUrl`).
 * `ohttpRelay`: every issuer call goes through this OHTTP relay, encapsulated to the gateway
 * key that the issuer's own heartbeat on the ledger names (so the issuer never sees the
 * client's address), as a client's issuer calls do when it has an `ohttpRelay`. `fetch` carries
 * the issuer (or relay) calls, as the client's `fetch` option.
 */
export class TokenWallet {
  #ready;
  #store;
  #handle;
  constructor({ wallet, reader, issuer, issuerUrl, store, vault, project, allowOnDemand, attestation, minAgeMs, maxRipeMs, ohttpRelay, fetch } = {}) {
    checkTokenStore(store, 'store');
    if (ohttpRelay !== undefined && typeof ohttpRelay !== 'string') throw new PrivsvcError('TokenWallet: `ohttpRelay` must be the relay URL');
    if (vault !== undefined && !builtInVault(vault)) throw new PrivsvcError('TokenWallet: `vault` is a KeyVault or WorkerVault (its key seals the store)');
    const rpc = readerOf(reader);
    const send = fetchAdapter(fetch);
    const w = asWallet(wallet);
    this.#store = rawStore(store);
    this.#handle = store;
    const rawStoreHandle = this.#store;
    this.#ready = (async () => {
      if (isStoreHandle(store) && store.id === undefined) {
        // A sealed store opens under the key of the user's vault (a client may have opened it).
        const opening = store.ready();
        if (vault !== undefined) {
          const sealer = storeSealer(await vault.scanCacheKey(), await rpc.chainId(), project ?? vault.app);
          if (sealer === undefined) throw new PrivsvcError('TokenWallet: the vault gives no store key');
          await openStore(store, sealer);
        } else {
          await opening;
          if (store.id === undefined) throw new PrivsvcError('TokenWallet: a browserTokenStore() or fileTokenStore() opens under the key of the user\'s vault: give `vault` (or give the store to createPrivateClient first)');
        }
      }
      const options = {
        issuer,
        issuerUrl,
        walletAddress: await w.address(),
        allowOnDemand,
        attestation,
        minAgeMs,
        maxRipeMs,
        ohttpRelay,
      };
      try {
        return new raw.RawTokenWallet(JSON.stringify(options), rpc, walletAdapter(w), rawStoreHandle, send);
      } catch (e) {
        throw new PrivsvcError(e.message);
      }
    })();
  }
  /** Fetches `count` tokens for `app` now: `{ count, remaining }`. */
  async acquire(app, count, attestation) {
    const w = await this.#ready;
    return JSON.parse(await rust(w.acquire(app, count, attestation)));
  }
  /** Fetches `count` tokens at a random moment within `withinMs` (default 6 hours). */
  async prefetchLater(app, count, withinMs) {
    (await this.#ready).prefetchLater(app, count, withinMs);
  }
  /** Unspent tokens of `app` for a day relayers accept now (synchronous; 0 until the store is open). */
  available(app) {
    if (isStoreHandle(this.#handle) && this.#handle.id === undefined) return 0;
    try {
      return this.#store.available(app);
    } catch (e) {
      throw new PrivsvcError(e.message);
    }
  }
  /**
   * The token source for `createPrivateClient({ tokens })`; also a TokenSource itself:
   * `take(app)` resolves to one ripe token `{ epoch, nonce, signature }` removed from the store
   * (or null), `putBack(app, token)` returns a token that no relayer saw.
   */
  source() {
    // A RawTokenSource moves into the client that is given it: each use gets its own.
    const fresh = async () => (await this.#ready).source();
    const inner = fresh();
    inner.catch(() => {});
    return Object.freeze({
      sourceOf: fresh,
      /**
       * One token obtained before `requestedMs` (Unix ms, when the write was requested;
       * default now) and ripe, or null at once: it never waits for a token to ripen.
       */
      async take(app, requestedMs) {
        const ms = typeof requestedMs === 'number' && Number.isFinite(requestedMs) ? requestedMs : undefined;
        const t = await rust((await inner).take(String(app), ms));
        return t === null ? null : JSON.parse(t);
      },
      async putBack(app, token) {
        await rust((await inner).putBack(String(app), JSON.stringify({ epoch: token.epoch, nonce: token.nonce, signature: token.signature })));
      },
    });
  }
}
