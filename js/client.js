// createPrivateClient: the client of docs/API.md §3 over the Rust PrivateClient compiled to wasm
// (tokens with their minimum age, OHTTP, cover batches, verification against the ledger). The
// wallet and the vault stay JavaScript objects; Rust reaches them through small adapters.
import { raw } from './wasm.js';
import { hexToBytes } from './bytes.js';
import {
  PrivsvcError,
  NonDeterministicWalletError,
  SmartContractWalletError,
  IssuerEquivocationError,
  NoTokenReady,
  asWallet,
  checkRecord,
  derivationTypedData,
  fromBase64,
  fromWire,
  inBrowser,
  KeyVault,
  ledgerReader,
  TAG_BYTES,
  toBase64,
  WorkerVault,
  toWire,
  vaultFromWallet,
} from './index.js';

/** The public test network's RPC, the default `publicClient`. */
export const DEFAULT_RPC_URL = 'https://rpc.tiramisu.db-chain.testnet.arkiv.network';

// A function, not a constant: index.js and this module import each other.
const classes = () => ({ PrivsvcError, NonDeterministicWalletError, SmartContractWalletError, IssuerEquivocationError, NoTokenReady });

async function rust(promise) {
  try {
    return await promise;
  } catch (e) {
    const cls = classes()[e && e.name] || PrivsvcError;
    throw new cls(e && e.message ? e.message : String(e));
  }
}

/** The RPC URL of a `publicClient` option: a URL, or a client that names its URL. */
export function rpcUrlOf(publicClient) {
  if (publicClient === undefined) return DEFAULT_RPC_URL;
  if (typeof publicClient === 'string') return publicClient;
  const url = publicClient.url || (publicClient.transport && publicClient.transport.url) || (publicClient.publicClient && rpcUrlOf(publicClient.publicClient));
  if (typeof url === 'string') return url;
  throw new PrivsvcError('publicClient must be an RPC URL or a client with a `url` (viem: transport.url)');
}

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
    // `tags`: one Uint8Array of raw tags. The built-in vaults take it as it is; a custom vault
    // gets the ledger form (base64 strings), as `openTags(tags)` of docs/API.md §3.3.
    openTags: (tags) => (v instanceof KeyVault || v instanceof WorkerVault ? v.openTags(tags) : v.openTags(ledgerTags(tags))),
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
  };
}

/**
 * Creates a client (docs/API.md §3.1): derives the keys from one wallet signature
 * (asked twice and compared) unless a `vault` is given, in a worker when `isolateKeys` (default
 * in browsers), contacts the relayers and starts fetching tokens when one requires them.
 */
export async function createPrivateClient(options = {}) {
  const o = { ...options };
  if (!o.app || typeof o.app !== 'string') throw new PrivsvcError('createPrivateClient: `app` is required');
  if (!o.wallet && !o.vault) throw new PrivsvcError('createPrivateClient: give a `wallet` or a `vault`');
  const send = fetchAdapter(o.fetch);
  const tokens = o.tokens;
  if (tokens !== undefined && tokens !== 'auto' && !(tokens && (tokens.sourceOf || isTokenSource(tokens)))) {
    throw new PrivsvcError('`tokens` is "auto", tokenWallet.source() or a TokenSource ({ take(app), putBack(app, token) })');
  }
  const store = o.tokenStore;
  checkTokenStore(store, 'tokenStore');
  const rpcUrl = rpcUrlOf(o.publicClient);
  const wallet = o.wallet ? asWallet(o.wallet) : undefined;
  const isolateKeys = o.isolateKeys === undefined ? inBrowser : o.isolateKeys;
  const vault = o.vault || (await vaultFromWallet(o.wallet, o.app, { isolateKeys, publicClient: rpcUrl, chainId: o.chainId }));
  const rustOptions = {
    app: o.app,
    project: o.project,
    relayers: o.relayers,
    ohttpRelay: o.ohttpRelay,
    rpcUrl,
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
    // In Node.js the session-start prefetch's pending timers would keep the process alive:
    // off unless asked for (TokenWallet.prefetchLater is the explicit way).
    tokenPrefetch: o.tokenPrefetch ?? (inBrowser ? undefined : 0),
    tokenPrefetchWithinMs: o.tokenPrefetchWithinMs,
    trustedRelayersOnly: o.trustedRelayersOnly,
    walletAddress: wallet ? await wallet.address() : undefined,
  };
  const source = tokens && tokens.sourceOf ? await tokens.sourceOf() : undefined;
  const custom = tokens && !tokens.sourceOf && isTokenSource(tokens) ? tokens : undefined;
  const rustStore = rawStore(store);
  // `create` takes its own reference to the store at once: the JS handle is freed right after.
  const created = raw.RawClient.create(
    JSON.stringify(rustOptions),
    wallet ? walletAdapter(wallet) : undefined,
    vaultAdapter(vault),
    rustStore,
    source,
    custom,
    send,
  );
  rustStore.free();
  const inner = await rust(created);
  const project = inner.project;
  return {
    app: o.app,
    project,
    vault,
    publicClient: rpcUrl,
    chainId: inner.chainId,
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
      return JSON.parse(await rust(inner.proveOwnership(entityKey, String(challenge), String(verifier), ttlSeconds)));
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
  };
}

/**
 * Live relayers whose `/v1/info` matches their heartbeat: `[{ url, address, bad, info }]`.
 * `fetch` (optional) carries the `/v1/info` calls.
 */
export async function discoverRelayers(publicClient, fetch) {
  return JSON.parse(await rust(raw.rawDiscoverRelayers(rpcUrlOf(publicClient), fetchAdapter(fetch))));
}

/**
 * The project's records without payloads, all read at one pinned block (docs/API.md §3.5):
 * `{ block, entities }`, entities in the ledger's JSON form. With `relayers` (addresses), only
 * records those relayers created.
 */
export async function listApp(client, project, relayers) {
  const list = relayers === undefined ? undefined : JSON.stringify(relayers);
  return JSON.parse(await rust(raw.rawListApp(rpcUrlOf(client), project, list)));
}

/**
 * Full records (payloads included) of whole batches (docs/API.md §3.5): `batches` is
 * `[{ block, creator }]`; answers the entities in the ledger's JSON form. Batches are combined
 * into few queries, so the RPC sees a set of batches, not which one mattered.
 */
export async function fetchBatches(client, project, batches) {
  const list = batches.map(({ block, creator }) => ({ block: Number(block), creator }));
  return JSON.parse(await rust(raw.rawFetchBatches(rpcUrlOf(client), project, JSON.stringify(list))));
}

/** Every live relayer heartbeat on the ledger, newest first, unverified (docs/API.md §3.5). */
export async function heartbeatRelayers(reader) {
  return JSON.parse(await rust(raw.rawHeartbeatRelayers(rpcUrlOf(reader))));
}

/**
 * The issuer's key for (`app`, `epoch`) as published on the ledger (docs/API.md §3.6): its
 * SPKI DER bytes. Throws IssuerEquivocationError when the issuer published two keys.
 */
export async function fetchIssuerKey(reader, issuer, app, epoch) {
  const b64 = await rust(raw.rawFetchIssuerKey(rpcUrlOf(reader), issuer, app, epoch));
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

function named(name, message, extra) {
  const e = new Error(message);
  e.name = name;
  return Object.assign(e, extra);
}

/**
 * The `fetch` option (docs/API.md §3.1) as the function the wasm client calls for relayer,
 * relay and issuer requests: redirects are never followed (`redirect: "manual"`: a redirected
 * request is not even sent), each request has a time limit, and a body over the limit is
 * refused. Without a `fetch` option the platform fetch goes through the same adapter.
 */
function fetchAdapter(fetchFn = (url, init) => globalThis.fetch(url, init)) {
  if (typeof fetchFn !== 'function') throw new PrivsvcError('`fetch` must be a fetch function');
  return async (method, url, headers, body, timeoutMs, maxBody) => {
    const res = await fetchFn(url, {
      method,
      headers: Object.fromEntries(headers),
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (res.type === 'opaqueredirect' || res.redirected) {
      throw named('Redirected', 'the server answered with a redirect, which privsvc does not follow');
    }
    const header = (name) => (res.headers && typeof res.headers.get === 'function' ? res.headers.get(name) : null);
    const declared = Number(header('content-length'));
    if (declared > maxBody) throw named('TooLarge', 'answer too large', { size: declared });
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.length > maxBody) throw named('TooLarge', 'answer too large', { size: bytes.length });
    return { status: res.status, contentType: header('content-type') ?? undefined, body: bytes };
  };
}

/** Whether `x` is a caller's TokenSource: `take(app)` and `putBack(app, token)`. */
function isTokenSource(x) {
  return x !== null && typeof x === 'object' && typeof x.take === 'function' && typeof x.putBack === 'function';
}

/**
 * The Rust side of a token store: browserTokenStore()'s localStorage item, a caller's
 * TokenStore, or (memoryStore() or none) a fresh memory store.
 */
function rawStore(store) {
  const custom = store !== undefined && store.kind !== 'memory' && store.kind !== 'browser';
  return new raw.RawTokenStore(store && store.kind === 'browser' ? store.slot : undefined, custom ? store : undefined);
}

/** Refuses a `store` that is none of memoryStore(), browserTokenStore() or a TokenStore. */
function checkTokenStore(store, what) {
  if (store === undefined || store.kind === 'memory' || store.kind === 'browser') return;
  const methods = ['list', 'add', 'remove', 'prune'];
  if (store === null || typeof store !== 'object' || !methods.every((m) => typeof store[m] === 'function')) {
    throw new PrivsvcError(`${what} must be memoryStore(), browserTokenStore() or a TokenStore with synchronous list(app), add(tokens), remove(app, nonce) and prune(minEpoch)`);
  }
}

/**
 * Verifies a ledger entity as a privsvc record (docs/API.md §3.4): `entity` in the ledger's
 * JSON form with key, owner, creator, payload and attributes. The republish rule needs the
 * creation block's time: give `createdTimestamp` (Unix seconds), or a `client` (RPC URL or
 * client) to read it. Returns `{ ok: true, record }` or `{ ok: false, reason }`.
 */
export async function verifyRecord(entity, { app, relayers, owner, createdTimestamp, client } = {}) {
  let ts = createdTimestamp;
  if (ts === undefined && client !== undefined && entity && entity.createdAt !== undefined) {
    const reader = ledgerReaderOf(client);
    const block = await reader.request({ method: 'eth_getBlockByNumber', params: [`0x${BigInt(entity.createdAt).toString(16)}`, false] });
    if (block && block.timestamp !== undefined) ts = Number(BigInt(block.timestamp));
  }
  const answer = JSON.parse(raw.rawVerifyRecord(JSON.stringify(entity), JSON.stringify({ app, relayers, owner, createdTimestamp: ts })));
  if (!answer.ok) return answer;
  const r = answer.record;
  const data = hexToBytes(r.data);
  return { ok: true, record: { ...r, data, attributes: fromWire(r.attributes), toText: () => new TextDecoder().decode(data) } };
}

function ledgerReaderOf(client) {
  return ledgerReader(rpcUrlOf(client && client.publicClient !== undefined ? client.publicClient : client));
}

/**
 * Client-side token handling (docs/API.md §3.6): fetch tokens with the wallet ahead of time,
 * keep them in a store, and give a client a source to spend them from (`tokens: w.source()`).
 * `reader` is the ledger (RPC URL or client); `issuer` the issuer's address and `issuerUrl` its
 * base URL (a relayer's info `issuer` and `issuerUrl`).
 */
export class TokenWallet {
  #ready;
  #store;
  constructor({ wallet, reader, issuer, issuerUrl, store, allowOnDemand, attestation, minAgeMs } = {}) {
    checkTokenStore(store, 'store');
    this.#store = rawStore(store);
    const w = asWallet(wallet);
    this.#ready = (async () => {
      const options = {
        rpcUrl: rpcUrlOf(reader),
        issuer,
        issuerUrl,
        walletAddress: await w.address(),
        allowOnDemand,
        attestation,
        minAgeMs,
      };
      try {
        return new raw.RawTokenWallet(JSON.stringify(options), walletAdapter(w), this.#store, fetchAdapter());
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
  /** Unspent tokens of `app` for a day relayers accept now (synchronous). */
  available(app) {
    try {
      return this.#store.available(app);
    } catch (e) {
      throw new PrivsvcError(e.message);
    }
  }
  /** The token source for `createPrivateClient({ tokens })`. */
  source() {
    return Object.freeze({ sourceOf: async () => (await this.#ready).source() });
  }
}
