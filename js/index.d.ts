// TypeScript declarations of the privsvc JS package (docs/API.md §3).

/** Chain id of the privsvc network. */
export const NETWORK_CHAIN_ID: 7738577;
/** `purpose` of the key-derivation message. */
export const DERIVATION_PURPOSE: 'privsvc key v1';
/** Bytes of a tag. */
export const TAG_BYTES: 44;
/** `project` of system entities. */
export const PRIVSVC_PROJECT: 'privsvc-7f3k';
/** Relayer API version. */
export const API_VERSION: 'privsvc-relayer/1';
/** Envelope version (docs/PROTOCOL.md §3, revision 2; the original specification says 1). */
export const ENVELOPE_VERSION: 2;
/** Content type of a record entity's payload (the sealed envelope). */
export const ENVELOPE_CONTENT_TYPE: 'application/json';
/** Ledger block time, seconds. */
export const BLOCK_TIME_SECONDS: 2;
/** Default validity of an ownership proof, seconds. */
export const DEFAULT_PROOF_TTL_SECONDS: 300;
/** Default minimum age of a token before it is spent, ms. */
export const DEFAULT_TOKEN_MIN_AGE_MS: 60000;
/**
 * The options of every fetch the package makes itself (relayer, OHTTP relay, issuer, ledger
 * reads to an RPC URL), besides method, headers, body and signal.
 */
export const FETCH_INIT: {
  readonly redirect: 'manual';
  readonly referrerPolicy: 'no-referrer';
  readonly credentials: 'omit';
  readonly cache: 'no-store';
};
/** The public test network's RPC (default `publicClient`). */
export const DEFAULT_RPC_URL: string;
/** True in browsers and Web Workers, false in Node.js. */
export const inBrowser: boolean;

/**
 * Base class of privsvc errors: no relayer available, every relayer failed, a `strict`
 * refusal, invalid attribute names, an unknown record in `proveOwnership`, a bad option.
 */
export class PrivsvcError extends Error {
  /** Stable code for programs: `PRIVSVC`, or the subclass's code. */
  readonly code: 'PRIVSVC' | 'NON_DETERMINISTIC_WALLET' | 'SMART_CONTRACT_WALLET' | 'ISSUER_EQUIVOCATION' | 'NO_TOKEN_READY';
}
/** The wallet gave two different derivation signatures. */
export class NonDeterministicWalletError extends PrivsvcError {
  readonly code: 'NON_DETERMINISTIC_WALLET';
}
/** The wallet is a contract account. */
export class SmartContractWalletError extends PrivsvcError {
  readonly code: 'SMART_CONTRACT_WALLET';
}
/** The issuer published two keys for one app and day. */
export class IssuerEquivocationError extends PrivsvcError {
  readonly code: 'ISSUER_EQUIVOCATION';
}
/**
 * A write found no token it may spend (obtained before the write was requested and at least
 * `tokenMinAgeMs` old) and no relayer that requires none; thrown at once, without asking the
 * issuer (unless `allowOnDemand`). Retry once `client.ripeTokens()` is above 0.
 */
export class NoTokenReady extends PrivsvcError {
  readonly code: 'NO_TOKEN_READY';
}

/** Hex string with `0x`. */
export type Hex = `0x${string}`;
/** A record reference: 32 hex characters. */
export type RecordRef = string;

/**
 * An EIP-1193 provider: an injected wallet (`window.ethereum`), viem's `custom(...)` source, a
 * viem client. privsvc calls `request({ method, params })` with the methods it needs
 * (`eth_accounts`, `eth_requestAccounts`, `eth_signTypedData_v4`, `personal_sign`; reads:
 * `eth_*` and `arkiv_*`). Its argument is typed `any` so that a provider typed by its RPC schema
 * (viem's `EIP1193RequestFn<Schema>`, wagmi's) fits as it is, with no cast.
 */
export interface Eip1193Provider {
  request(args: any, options?: any): Promise<any>;
}
/**
 * The parts of a viem wallet client privsvc uses (viem's `WalletClient`, wagmi's
 * `useWalletClient()` data). privsvc calls `signTypedData({ account, domain, types,
 * primaryType, message })` and `signMessage({ account, message: { raw } })`; the arguments are
 * typed `any` so that viem's generic signatures fit as they are.
 */
export interface ViemLikeWalletClient {
  account?: { readonly address: Hex } | undefined;
  getAddresses?(): Promise<readonly Hex[]>;
  signTypedData(args: any): Promise<Hex>;
  signMessage(args: any): Promise<Hex>;
}
/** A wallet: an EIP-1193 provider or a viem-like wallet client. */
export type WalletLike = Eip1193Provider | ViemLikeWalletClient;
/**
 * Where ledger reads go: an RPC URL (privsvc's own fetch, FETCH_INIT); a viem public client
 * (over `http(url)`: that URL with privsvc's fetch; over any other transport, `custom(...)`
 * included: the client's `request`); an EIP-1193 provider; or a `ledgerReader`.
 */
export type PublicClientLike = string | Eip1193Provider | ViemLikePublicClient | LedgerReader;
/** The parts of a viem public client privsvc uses (viem's `PublicClient`, wagmi's `usePublicClient()`). */
export interface ViemLikePublicClient {
  transport: { readonly type?: string; readonly url?: string | undefined };
  request(args: any, options?: any): Promise<any>;
}

/** An in-memory dev wallet (EIP-1193); never for real funds. */
export function devWallet(key?: Hex): Eip1193Provider & { address: Hex; isDevWallet: true };

/** Attribute values: string (`str`), integer number (`i32`), bigint (`u64`/`u256`), or typed. */
export type AttributeValue = string | number | bigint | { type: 'str' | 'i32' | 'u64' | 'u256'; value: string | number | bigint };
export type AttributeInputs = Record<string, AttributeValue>;
export type WireAttributes = Record<string, { type: 'str' | 'i32' | 'u64' | 'u256'; value: string | number }>;
export function toWire(attributes?: AttributeInputs): WireAttributes;
export function fromWire(wire?: WireAttributes): Record<string, string | number | bigint>;
export function nameProblem(name: string): string | undefined;

/** Lifetimes in seconds. */
export const ExpirationTime: {
  fromSeconds(n: number): number;
  fromMinutes(n: number): number;
  fromHours(n: number): number;
  fromDays(n: number): number;
  fromWeeks(n: number): number;
  fromMonths(n: number): number;
};
export function expirySeconds(expires: number | { seconds: number }): number;
export function expiryBucket(seconds: number): number;

export type WarningCode =
  | 'timestamp' | 'precise-location' | 'postal-code' | 'free-text'
  | 'expiry-rounded' | 'expiry-too-long' | 'payload-too-large' | 'rare-combination';
export interface CheckWarning {
  code: WarningCode;
  attribute: string | null;
  message: string;
}
export function checkRecord(record?: { attributes?: AttributeInputs; expires?: number; payload?: Uint8Array | string }): CheckWarning[];
export function checkRarity(attributes: AttributeInputs, existing: AttributeInputs[], k?: number): CheckWarning[];
export const coarse: {
  day<T extends Date | number>(d: T): T;
  hour<T extends Date | number>(d: T): T;
  geo(x: number, decimals?: number): number;
  bucket(x: number, step: number): number;
};

export interface EnvelopeBodyInput {
  app: string;
  exp: number;
  hour: number;
  ct: string;
  enc: boolean;
  data: Uint8Array;
}
export interface OwnershipProofBody {
  entityKey: Hex;
  challenge: string;
  verifier: string;
  notBefore: number;
  notAfter: number;
}
/** An ownership proof (the Rust client's JSON form). */
export interface OwnershipProof extends OwnershipProofBody {
  chainId: number;
  owner: Hex;
  signature: Hex;
}
/** A record's signer: only its address and two signing operations. */
export interface Signer {
  readonly address: Hex;
  signEnvelope(body: EnvelopeBodyInput, attributes: AttributeInputs | WireAttributes): string | Promise<string>;
  signProof(body: OwnershipProofBody, chainId?: number): Hex | Promise<Hex>;
}
/**
 * Options of the key derivation. A contract wallet is refused because its derivation signature
 * does not recover to its address; no RPC is asked for the wallet's code.
 */
export interface DeriveOptions {
  /** EIP-712 chainId of the derivation message (default NETWORK_CHAIN_ID). */
  chainId?: number;
}
/** What every vault provides. */
export interface Vault {
  /** The app the keys are derived for (`undefined`: a WorkerVault whose keys are not loaded yet). */
  readonly app: string | undefined;
  /**
   * `true` when the keys live in a worker, not in the page's thread (`WorkerVault`); `false` for
   * `KeyVault`. A property, not `constructor.name`, so that it reads the same in a minified bundle.
   */
  readonly isolated?: boolean;
  newRecord(): RecordRef | Promise<RecordRef>;
  scopeRecord(name: string): RecordRef | Promise<RecordRef>;
  makeTag(ref: RecordRef): string | Promise<string>;
  openTags(tags: string[]): (RecordRef | undefined)[] | Promise<(RecordRef | undefined)[]>;
  addressOf(ref: RecordRef): Hex | Promise<Hex>;
  signer(ref: RecordRef): Signer | Promise<Signer>;
  encrypt(ref: RecordRef, data: Uint8Array | string): Uint8Array | Promise<Uint8Array>;
  decrypt(ref: RecordRef, data: Uint8Array): Uint8Array | Promise<Uint8Array>;
}
/** Keys in the current thread. */
export class KeyVault implements Vault {
  static fromWallet(wallet: WalletLike, app: string, opts?: DeriveOptions): Promise<KeyVault>;
  static signDerivation(wallet: WalletLike, app: string, opts?: DeriveOptions): Promise<Hex>;
  static fromSignature(signature: Hex, app: string): KeyVault;
  static random(app: string): { vault: KeyVault; recoveryCode: string };
  static fromRecoveryCode(code: string, app: string): KeyVault;
  readonly app: string;
  /** Always `false`: the keys are in this thread. */
  readonly isolated: false;
  newRecord(): RecordRef;
  scopeRecord(name: string): RecordRef;
  makeTag(ref: RecordRef): string;
  /** Ledger-form tags, or one Uint8Array of raw tags (44 bytes each; throws otherwise). */
  openTags(tags: string[] | Uint8Array): (RecordRef | undefined)[];
  addressOf(ref: RecordRef): Hex;
  signer(ref: RecordRef): Signer;
  encrypt(ref: RecordRef, data: Uint8Array | string): Uint8Array;
  decrypt(ref: RecordRef, data: Uint8Array): Uint8Array;
  coverScores(anchor: Uint8Array, candidates: Uint8Array): Uint8Array;
  free(): void;
}
/** Keys in a dedicated worker (Web Worker or worker_threads). */
export class WorkerVault implements Vault {
  /**
   * The bundled worker without keys: load them with `loadWallet`, `loadSignature`,
   * `loadRandom` or `loadRecoveryCode` (every other operation rejects until then).
   */
  static spawn(options?: WorkerOptions): Promise<WorkerVault>;
  /** Loads the keys of `app` from the wallet (derivation signature asked twice and checked). */
  loadWallet(wallet: WalletLike, app: string, opts?: DeriveOptions): Promise<void>;
  /** Loads the keys of `app` from a derivation signature already held. */
  loadSignature(signature: Hex, app: string): Promise<void>;
  /** Loads a fresh random root for `app`; resolves to its 24-word recovery code. */
  loadRandom(app: string): Promise<string>;
  /** Loads the random root of `app` from its recovery code. */
  loadRecoveryCode(code: string, app: string): Promise<void>;
  static fromWallet(wallet: WalletLike, app: string, opts?: DeriveOptions & WorkerOptions): Promise<WorkerVault>;
  static fromSignature(signature: Hex, app: string, options?: WorkerOptions): Promise<WorkerVault>;
  static random(app: string, options?: WorkerOptions): Promise<{ vault: WorkerVault; recoveryCode: string }>;
  static fromRecoveryCode(code: string, app: string, options?: WorkerOptions): Promise<WorkerVault>;
  /** The app the keys are derived for (`undefined` until keys are loaded). */
  readonly app: string | undefined;
  /** Always `true`: the keys are in the worker. */
  readonly isolated: true;
  newRecord(): Promise<RecordRef>;
  scopeRecord(name: string): Promise<RecordRef>;
  makeTag(ref: RecordRef): Promise<string>;
  /** Ledger-form tags, or one Uint8Array of raw tags (44 bytes each; rejects otherwise). */
  openTags(tags: string[] | Uint8Array): Promise<(RecordRef | undefined)[]>;
  addressOf(ref: RecordRef): Promise<Hex>;
  signer(ref: RecordRef): Promise<Signer>;
  encrypt(ref: RecordRef, data: Uint8Array | string): Promise<Uint8Array>;
  decrypt(ref: RecordRef, data: Uint8Array): Promise<Uint8Array>;
  coverScores(anchor: Uint8Array, candidates: Uint8Array): Promise<Uint8Array>;
  terminate(): void;
}
/**
 * How a `WorkerVault` starts: the worker must answer its first message (its wasm module loaded)
 * within `timeoutMs` (default 30000), else the start rejects with a PrivsvcError.
 */
export interface WorkerOptions {
  timeoutMs?: number;
}
/**
 * A vault from a wallet: in a worker when `isolateKeys` (default in browsers), else in this
 * thread. A worker that fails to start rejects with a PrivsvcError saying why; the keys never
 * fall back into this thread.
 */
export function vaultFromWallet(
  wallet: WalletLike,
  app: string,
  opts?: DeriveOptions & { isolateKeys?: boolean; workerTimeoutMs?: number },
): Promise<KeyVault | WorkerVault>;
export function asWallet(wallet: WalletLike): unknown;
export function derivationTypedData(app: string, chainId?: number): object;
export function proofTypedData(body: OwnershipProofBody, chainId?: number): object;

export function signOwnershipProof(
  signer: Signer,
  params: { entityKey: Hex; challenge: string; verifier: string; ttlSeconds?: number; chainId?: number; now?: number },
): Promise<OwnershipProof>;
export function verifyOwnershipProof(
  proof: OwnershipProof,
  expect: { challenge: string; verifier: string; client: PublicClientLike | PrivateClient; now?: number },
): Promise<{ ok: true } | { ok: false; reason: string }>;

/** A minimal JSON-RPC ledger reader (what `ledgerReader` makes). */
export interface LedgerReader {
  /** The RPC URL when privsvc sends the reads itself. */
  readonly url?: string;
  /** One JSON-RPC call: its result. */
  request(args: { method: string; params?: unknown[] }): Promise<any>;
  /** One JSON-RPC call as the wasm client makes it: the answer's JSON text. */
  rpc(method: string, paramsJson: string): Promise<string>;
  chainId(): Promise<number>;
  getCode(address: Hex): Promise<Hex>;
  /** Unix seconds of block `number`, or undefined when the ledger has no such block. */
  blockTimestamp(number: number | bigint): Promise<number | undefined>;
  entity(key: Hex): Promise<any | undefined>;
}
/** A ledger reader over `publicClient`; `fetch` carries the reads to an RPC URL. */
export function ledgerReader(publicClient: PublicClientLike, fetch?: typeof globalThis.fetch): LedgerReader;

/** A stored, unspent token. */
export interface StoredToken {
  app: string;
  epoch: number;
  nonce: string;
  signature: string;
  obtainedMs: number;
}
/**
 * A caller's own token store: four synchronous methods over stored tokens (for example over a
 * file in Node.js with `fs.*Sync`). `remove` answers whether the token was there and must be
 * durable before it returns; `prune` drops tokens of days before `minEpoch`.
 */
export interface CustomTokenStore {
  list(app: string): StoredToken[];
  add(tokens: StoredToken[]): void;
  remove(app: string, nonce: string): boolean;
  prune(minEpoch: number): void;
}
/**
 * A sealed store (the device store, docs/PROTOCOL.md §8.7): `browserTokenStore()` (IndexedDB)
 * or `fileTokenStore(dir)` (Node.js). Tokens, issuer-key pins, relayer pins and the scan cache,
 * each part sealed under a key derived from the vault's root; a part that does not open is
 * discarded with a warning. It opens with the first client (or TokenWallet with a `vault`) it is
 * given to; its token methods throw until then.
 */
export interface SealedTokenStore extends CustomTokenStore {
  readonly kind: 'browser' | 'file';
  /** Whether tabs coordinate (Web Locks present; always false for files). */
  readonly crossTab: boolean;
  /** The store's id once open (32 hex characters, derived from the key: it names no wallet). */
  readonly id: string | undefined;
  /** The parts discarded when the store opened (`tokens`, `pins`, `lease`): they did not open under the vault's key. */
  readonly discarded: string[];
  /** Resolves once the store is open (at once when nothing opens it yet). */
  ready(): Promise<void>;
  /** Resolves once every change so far is written. */
  flush(): Promise<void>;
  /** The tokens this instance holds (its lease in a browser tab), read-only; of `app` when given. */
  stored(app?: string): StoredToken[];
  /** The issuer key pinned for (issuer, app, epoch), SPKI DER in base64. */
  keyPin(issuer: Hex, app: string, epoch: number): string | undefined;
  /** Pins a key unless one is pinned; the pinned key. */
  pinKey(issuer: Hex, app: string, epoch: number, spkiBase64: string): string;
  /** The relayer account pinned for `url`. */
  relayerPin(url: string): Hex | undefined;
  /** Pins `address` for `url` unless one is pinned; the pinned address. */
  pinRelayer(url: string, address: Hex): Hex;
  /** Removes the pin of `url` (a relayer that really moved to another account); whether there was one. */
  unpinRelayer(url: string): boolean;
  /** Every relayer pin. */
  relayerPins(): Record<string, Hex>;
}
/** `browserTokenStore(name?)`: IndexedDB, tabs coordinated with Web Locks (a token is handed out once). */
export interface BrowserTokenStore extends SealedTokenStore {
  readonly kind: 'browser';
}
/** `fileTokenStore(dir)` (Node.js): files 0600 in 0700 directories; one process at a time per store. */
export interface FileTokenStore extends SealedTokenStore {
  readonly kind: 'file';
}
/**
 * Where the client keeps unspent tokens and pins between sessions. Default: the device store
 * (`browserTokenStore()` in browsers, `fileTokenStore(<data dir>/node)` in Node.js).
 * `memoryStore()` keeps them for the session only (every session a first spend). A caller's own
 * store keeps the tokens (and the pins when it has `keyPin`/`pinKey`, `relayerPin`/`pinRelayer`);
 * the rest stays in the device store.
 */
export type TokenStore = { readonly kind: 'memory' } | BrowserTokenStore | FileTokenStore | CustomTokenStore;
/** In memory for the session only (as `memoryStores: true`). */
export function memoryStore(): TokenStore;
/** IndexedDB database `privsvc-store` (or `privsvc-store:<name>`; a name has no `:` or `/`). */
export function browserTokenStore(name?: string): BrowserTokenStore;
/** Node.js: the directory `dir` (0700), one directory per vault root, chain and project inside. */
export function fileTokenStore(dir: string): FileTokenStore;

/**
 * Where a client keeps its sealed listing between sessions (docs/API.md §3.1, `scanCache`). The
 * client seals the blob (AES-256-GCM-SIV under a key derived from the vault's root); the store
 * keeps opaque bytes.
 */
export interface ScanCacheStore {
  /** The stored blob, or undefined. */
  load(): Promise<Uint8Array | undefined>;
  /** Replaces the stored blob. */
  save(bytes: Uint8Array): Promise<void>;
  /** Deletes the stored blob. */
  clear(): Promise<void>;
}
/** The scan cache in IndexedDB (database `privsvc-scan-cache`), under `name`. */
export function browserScanCache(name: string): ScanCacheStore & { kind: 'indexeddb'; name: string };
/** The scan cache in a file (0600, its directory 0700), Node.js 22. */
export function fileScanCache(path: string): ScanCacheStore & { kind: 'file'; path: string };

/** A relayer given by URL, or by URL and the account that runs it (skips discovery for it). */
export type RelayerRef = string | { url: string; address?: Hex };

/**
 * The session's timers (the Rust client's SessionSchedule). Ranges are `[lowMs, highMs]`;
 * each wait is drawn uniformly from its range with the client's own randomness. Absent fields
 * keep their defaults.
 */
export interface SessionSchedule {
  /** Between two tails (incremental listings of the project), pending write or not. Default [15000, 45000]. */
  tailMs?: [number, number];
  /** How long a written record's status polls go on after `written`. Default [0, 60000]. */
  statusTailMs?: [number, number];
  /** A refill is scheduled when the store holds fewer usable tokens of the app. Default 5. */
  refillBelow?: number;
  /** The session's first refill. Default [0, 600000]. */
  firstRefillMs?: [number, number];
  /** Each later refill (and later look at the store). Default [600000, 21600000]. */
  laterRefillMs?: [number, number];
  /** Between two scans (each one fetch of `coverBatches + 1` batches of one closed window). Default [60000, 180000]. */
  scanMs?: [number, number];
  /** The fetch age of a batch of the user's, in blocks (at least 16). Default [32, 900]. */
  fetchAgeBlocks?: [number, number];
  /** How long a submission's status polls go on, in batching rounds of its relayer, drawn at the 202. Default [1, 3]. */
  statusHorizonRounds?: [number, number];
}

export interface PrivateClientOptions {
  app: string;
  /** Token minimum age, ms (default 60000; short values are for devnet demos). */
  tokenMinAgeMs?: number;
  /**
   * A token obtained in this session ripens at its own random age between `tokenMinAgeMs` and
   * this, ms (default 3600000); tokens from earlier sessions ripen at `tokenMinAgeMs`.
   */
  tokenMaxRipeMs?: number;
  /**
   * Keep tokens, pins and the scan cache in memory for this session only (default false: the
   * device store keeps them, sealed). Every session is then a first spend the issuer can time,
   * starts with no relayer pins and fetches the user's batches again.
   */
  memoryStores?: boolean;
  /**
   * Accept a `publicClient` that is the wallet's own provider (default false: refused). A
   * privacy risk: the wallet's RPC sees every read of the session beside the wallet's address.
   */
  allowWalletRpc?: boolean;
  /**
   * Let a write that finds no ripe token fetch tokens from the issuer and spend one once
   * `tokenMinAgeMs` old (default false). A timing risk, the app's explicit choice: the issuer
   * then sees an issue request moments before the write's token is spent. Without it a write
   * spends only a token obtained before it was requested, goes to a relayer that requires none,
   * or throws NoTokenReady at once.
   */
  allowOnDemand?: boolean;
  /** With `allowOnDemand`, the longest a write waits for fetched tokens to ripen, ms (default 90000). */
  tokenRipeWaitMs?: number;
  /**
   * The session's timers: tail, status polls after `written`, token refills (in Node.js as in
   * browsers; they never keep a process alive). `myEntities({ refresh: true })` waits for the
   * next tail.
   */
  schedule?: SessionSchedule;
  /** Seed of the client's own random choices (delays, relayer choice, timers); tests only. */
  seed?: number | bigint;
  /** EIP-712 chainId of the derivation message (default the privsvc network). */
  chainId?: number;
  wallet?: WalletLike;
  vault?: Vault;
  project?: string;
  /** The relayers to use (default: discovered from heartbeats). */
  relayers?: RelayerRef[];
  ohttpRelay?: string;
  /**
   * Keys in a worker (default `true` in browsers, `false` in Node.js). In a browser, a worker
   * that fails to start makes `createPrivateClient` reject with a PrivsvcError saying why;
   * `false` is the explicit choice of keys in the page (a `KeyVault`).
   */
  isolateKeys?: boolean;
  /** How long the key worker may take to start, ms (default 30000). */
  workerTimeoutMs?: number;
  publicClient?: PublicClientLike;
  delayMs?: [number, number];
  minAnonymity?: number;
  maxHoldMs?: number;
  inclusionTimeoutMs?: number;
  pollMs?: number;
  strict?: boolean;
  rarityK?: number;
  coverBatches?: number;
  /**
   * Where the session's listing (and the user's own records) is kept between sessions, sealed:
   * a returning session lists only what is new since its coarse resume block. Default: the
   * device store's (none with memory stores); `false`: none.
   */
  scanCache?: false | ScanCacheStore;
  /** The scan cache's resume granularity in blocks (default 1800, an hour of blocks). */
  scanCacheResumeBlocks?: number;
  tokens?: 'auto' | TokenSource;
  tokenStore?: TokenStore;
  tokenAttestation?: string;
  trustedRelayersOnly?: boolean;
  /**
   * Carries relayer, OHTTP relay and issuer calls (called as `fetch(url, { method, headers,
   * body, ...FETCH_INIT, signal })`); not the ledger reads of `publicClient`.
   */
  fetch?: typeof globalThis.fetch;
}
export interface CreateParams {
  payload: Uint8Array;
  contentType: string;
  attributes?: AttributeInputs;
  expires: number;
  scope?: string;
  encrypt?: boolean;
}
export interface CreateResult {
  entityKey: Hex;
  owner: Hex;
  txHash: Hex;
  relayer: string;
  batchSize: number;
  /** The block the record was written in. */
  block: number;
  recovered: boolean;
  warnings: CheckWarning[];
}
export interface MyRecord {
  key: Hex;
  entityKey: Hex;
  owner: Hex;
  creator: Hex;
  app: string;
  contentType: string;
  data: Uint8Array;
  toText(): string;
  toJson(): unknown;
  attributes: Record<string, string | number | bigint>;
  createdAt?: number;
  expiresAt?: number;
  expSeconds: number;
  encrypted: boolean;
  envelope: string;
  ref: RecordRef;
  /** false: written by this device and not verified by a scheduled scan yet. */
  verified: boolean;
}
export interface RelayerEntry {
  url: string;
  address?: Hex;
  bad: boolean;
  info?: Record<string, unknown>;
}
export interface PrivateClient {
  readonly app: string;
  readonly project: string;
  readonly vault: Vault;
  /** The `publicClient` option (its URL when none was given). */
  readonly publicClient: PublicClientLike;
  /** The reader all ledger reads go through. */
  readonly reader: LedgerReader;
  readonly chainId: number;
  /** What became of the scan cache when the session started. */
  readonly scanCache:
    | { state: 'off' | 'empty' }
    | { state: 'resumed'; block: number }
    | { state: 'discarded'; reason: string };
  /** Where tokens and pins are kept, and the parts discarded at start (they did not open under the vault's key). */
  readonly deviceStore: { kind: 'indexeddb' | 'file' | 'memory' | 'custom'; id?: string; discarded: string[] };
  createEntity(params: CreateParams): Promise<CreateResult>;
  /**
   * The user's records as the session knows them, newest first, with no request: those its
   * scans verified and those this device wrote (`verified: false` until a scheduled scan
   * verifies them). `refresh`: wait for the session's next scheduled scan (at most
   * `schedule.scanMs[1]` and 30 s); the client never reads because the app asked.
   */
  myEntities(query?: { refresh?: boolean; where?: Record<string, string | number | bigint> }): Promise<MyRecord[]>;
  proveOwnership(entityKey: Hex, params: { challenge: string; verifier: string; ttlSeconds?: number }): Promise<OwnershipProof>;
  check(record: { attributes?: AttributeInputs; expires?: number; payload?: Uint8Array }): CheckWarning[];
  checkRarity(attributes: AttributeInputs, k?: number): Promise<CheckWarning[]>;
  scopeAddress(name: string): Promise<Hex>;
  relayers(): RelayerEntry[];
  relayerAddresses(): Hex[];
  /**
   * Tokens a write requested now could spend (obtained and at least `tokenMinAgeMs` old); 0:
   * a write goes to a relayer that requires none, or throws NoTokenReady.
   */
  ripeTokens(): number;
  /** Ends the session: its timers stop. */
  close(): void;
}
export function createPrivateClient(options: PrivateClientOptions): Promise<PrivateClient>;

/**
 * Verifies a ledger entity (its JSON form: a row of listApp, fetchBatches or arkiv_query) as a
 * privsvc record: `verifyRecord(entity, { app, relayers })` makes every check that needs no
 * ledger and names in `unchecked` those it could not make (`creation-window`, `copy`); give
 * `reader` (or `publicClient`) to make them too, or `createdTimestamp` (also read from
 * `entity.createdTimestamp`) for the creation window. A private client given as `client` is
 * never used to read (it is the user's own).
 */
export function verifyRecord(
  entity: object,
  options?: {
    app?: string;
    relayers?: Hex[];
    owner?: Hex;
    /** Unix seconds of the entity's creation block (its `createdAt`). */
    createdTimestamp?: number;
    reader?: PublicClientLike | PrivateClient;
    publicClient?: PublicClientLike;
    client?: PublicClientLike | PrivateClient;
  },
): Promise<
  | {
      ok: true;
      record: Record<string, unknown> & { data: Uint8Array; toText(): string };
      /** The checks that could not be made with what was given. */
      unchecked: { code: 'creation-window' | 'copy'; reason: string }[];
    }
  | VerifyRefusal
>;
/** Why verifyRecord refused an entity: `code` for programs, `reason` for people. */
export interface VerifyRefusal {
  ok: false;
  code:
    | 'copy' | 'republished' | 'creation-time-unknown' | 'ledger' | 'missing-field' | 'wrong-content-type'
    | 'bad-envelope' | 'bad-attributes' | 'bad-entity' | 'wrong-app' | 'attributes-mismatch'
    | 'signature-mismatch' | 'wrong-owner' | 'lifetime-mismatch' | 'untrusted-creator';
  reason: string;
  /** With `code: "copy"`: the key of the earlier entity (the record) this one copies. */
  original?: Hex;
}
/** Live relayers whose `/v1/info` matches their heartbeat. */
export function discoverRelayers(publicClient?: PublicClientLike, fetch?: typeof globalThis.fetch): Promise<RelayerEntry[]>;
/** The project's records without payloads at one pinned block (entities in the ledger's JSON form). */
export function listApp(client: PublicClientLike, project: string, relayers?: Hex[]): Promise<{ block: number; entities: object[] }>;
/** Full records (payloads included) of whole batches. */
export function fetchBatches(client: PublicClientLike, project: string, batches: { block: number; creator: Hex }[]): Promise<object[]>;
/** Every live relayer heartbeat, newest first, unverified. */
export function heartbeatRelayers(reader: PublicClientLike): Promise<{ url: string; creator: Hex; address: Hex | null; ohttpKey: string | null; createdAt: number }[]>;
/** The issuer's key for (app, epoch) from the ledger, SPKI DER; throws IssuerEquivocationError on two keys. */
export function fetchIssuerKey(reader: PublicClientLike, issuer: Hex, app: string, epoch: number): Promise<Uint8Array>;
/** The UTC day number of `ms` (default now). */
export function epochOf(ms?: number): number;
/** The days whose tokens relayers accept at `ms` (default now): [today, yesterday]. */
export function acceptableEpochs(ms?: number): number[];
/** Sends one relayer request through an OHTTP relay, encapsulated to the relayer's gateway key. */
export function ohttpCall(
  relayUrl: string,
  target: string,
  gatewayKey: string,
  request: { method?: string; path: string; body?: Uint8Array | string | object },
  fetch?: typeof globalThis.fetch,
): Promise<{ status: number; body: Uint8Array }>;
/** Relayer info (`GET /v1/info`, docs/PROTOCOL.md §9.2). */
export interface InfoResponse {
  address: Hex;
  version: string;
  chainId: number;
  minBatch: number;
  maxWaitMs: number;
  minIntervalBlocks: number;
  tokensRequired: boolean;
  /** Only when tokens are required. */
  issuer?: Hex;
  /** Only when tokens are required. */
  issuerUrl?: string;
  maxMinAnonymity: number;
  maxHoldMs: number;
  /** Only when OHTTP is on: the gateway key configuration, hex. */
  ohttpKey?: string;
}
/** Submit request (body of `POST /v1/records`, docs/PROTOCOL.md §9.3). */
export interface SubmitRequest {
  app: string;
  /** The record's one-time owner. */
  owner: Hex;
  /** The sealed envelope, padded to 512, 1024, 4096 or 16384 bytes. */
  envelope: string;
  attributes: WireAttributes;
  expSeconds: 3600 | 86400 | 604800 | 2592000 | 7776000;
  /** Required when the relayer requires tokens. */
  token?: TokenRedemption;
  minAnonymity?: number;
  maxHoldMs?: number;
}
/** Record status (`GET /v1/records/:id`, docs/PROTOCOL.md §9.4). */
export interface StatusResponse {
  id: string;
  state: 'queued' | 'written' | 'failed';
  /** Queued only: requests ahead. */
  position?: number;
  /** Written only. */
  entityKey?: Hex;
  /** Written only. */
  txHash?: Hex;
  /** Written only: decimal block number. */
  block?: string;
  /** Written only: the records of the record's project in its batch. */
  batchSize?: number;
  /** Failed only: the reason. */
  error?: string;
}
/** Issue request (`POST /v1/tokens/issue`, docs/PROTOCOL.md §9.5), with `issuer` and `chainId`. */
export interface IssueRequest {
  /** The issuer the request is for. */
  issuer: Hex;
  /** The ledger's chain id. */
  chainId: number;
  app: string;
  /** Today's UTC day number. */
  epoch: number;
  wallet: Hex;
  /** Blinded token messages, standard base64, 1 to 20. */
  blinded: string[];
  /** Epoch milliseconds. */
  ts: number;
  /** The wallet's personal_sign over `issuanceMessage(req, ts)`, hex. */
  walletSignature: string;
  /** When the issuer requires codes. */
  attestation?: string;
}
/** Issue response (docs/PROTOCOL.md §9.5). */
export interface IssueResponse {
  /** One per blinded value, standard base64. */
  blindSignatures: string[];
  /** Tokens the wallet may still obtain for this app today. */
  remaining: number;
}

/** A redeemable token: `{ epoch, nonce (hex), signature (base64) }`. */
export interface TokenRedemption {
  epoch: number;
  nonce: string;
  signature: string;
}
/**
 * A token source for `createPrivateClient({ tokens })`: `tokenWallet.source()`, or a caller's
 * object whose `take(app, requestedMs)` hands out one token obtained before `requestedMs` (Unix
 * ms, when the write was requested) and ripe, or null at once (a source never waits for a token
 * to ripen: the moment a token is spent would tell the issuer when it was issued), and whose
 * `putBack` takes back a token whose submission failed before any relayer saw it.
 */
export interface TokenSource {
  take(app: string, requestedMs?: number): Promise<TokenRedemption | null>;
  putBack(app: string, token: TokenRedemption): Promise<void>;
}
/** Client-side token handling (docs/API.md §3.6). */
export class TokenWallet {
  constructor(options: {
    wallet: WalletLike;
    reader: PublicClientLike;
    issuer: Hex;
    issuerUrl: string;
    /** Default: in memory. A sealed store opens under `vault`'s key (or a client opened it). */
    store?: TokenStore;
    /** The user's vault (KeyVault or WorkerVault), whose key opens a sealed `store`. */
    vault?: Vault;
    /** The project of the store (default the vault's app). */
    project?: string;
    allowOnDemand?: boolean;
    attestation?: string;
    minAgeMs?: number;
    /** The oldest ripening age of a token obtained here, ms (default 3600000). */
    maxRipeMs?: number;
    /** Every issuer call through this OHTTP relay (gateway key from the issuer's heartbeat). */
    ohttpRelay?: string;
    /** Carries the issuer (or relay) calls, as the client's `fetch` option. */
    fetch?: typeof globalThis.fetch;
  });
  acquire(app: string, count: number, attestation?: string): Promise<{ count: number; remaining: number }>;
  prefetchLater(app: string, count: number, withinMs?: number): Promise<void>;
  available(app: string): number;
  source(): TokenSource;
}

/** Throws PrivsvcError naming the first attribute whose name is not valid. */
export function assertNodeSafeNames(attributes: AttributeInputs): void;
/** Standard base64 with padding. */
export function toBase64(bytes: Uint8Array | string): string;
/** The bytes of standard base64 text; throws PrivsvcError on anything else. */
export function fromBase64(text: string): Uint8Array;
/** Seals an envelope with a vault signer over the record's attributes: the padded text. */
export function sealEnvelope(
  signer: { signEnvelope(body: object, attributes: AttributeInputs): string | Promise<string> },
  body: { app: string; exp: number; hour: number; ct: string; enc: boolean; data: Uint8Array | string },
  attributes: AttributeInputs,
): Promise<string>;
/** Opens a ledger envelope: its body and the owner address that signed it over `attributes`. */
export function envelopeSigner(
  envelope: Uint8Array | string,
  attributes: AttributeInputs,
): { app: string; exp: number; hour: number; ct: string; enc: boolean; data: Uint8Array; signer: Hex };
/** Parses a sealed envelope without recovering its signer. */
export function parseEnvelope(envelope: Uint8Array | string): {
  v: number; app: string; exp: number; hour: number; ct: string; enc: boolean; types: Record<string, string>; data: Uint8Array; sig: Hex;
};
/** The digest a record's one-time owner signs, 0x hex. */
export function envelopeDigest(
  body: { app: string; exp: number; hour: number; ct: string; enc: boolean; data: Uint8Array | string },
  attributes: AttributeInputs,
): Hex;
/** Right-pads envelope text to 512, 1024, 4096 or 16384 bytes. */
export function padEnvelope(text: string): string;
/** RFC 8785 JSON of attributes in their wire form. */
export function canonicalAttributes(attributes: AttributeInputs): string;
/** The RFC 9474 suite tokens use. */
export function tokenSuite(): string;
/** Checks an issuer key (SPKI DER or base64). */
export function importIssuerKey(spki: Uint8Array | string): { readonly spki: Uint8Array };
/** Verifies a token for `app`; answers its token id (hex) or throws PrivsvcError. */
export function verifyToken(key: { spki: Uint8Array } | Uint8Array, token: TokenRedemption & { app?: string }, app?: string): string;
/** SHA-256 of a prepared token message, hex. */
export function tokenId(prepared: Uint8Array): string;
/** The text a wallet signs for an issue request at `ts` (Unix ms). */
export function issuanceMessage(req: IssueRequest, ts: number): string;
/** The gateway side of Oblivious HTTP. */
export class OhttpGateway {
  static fromSeed(seed: Uint8Array): OhttpGateway;
  readonly publicKey: string;
  open(message: Uint8Array): {
    request: { method: string; path: string; headers: [string, string][]; body: Uint8Array };
    seal(response: { status?: number; headers?: [string, string][] | Record<string, string>; body?: Uint8Array | string }): Uint8Array;
  };
}
