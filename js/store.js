// Token stores (docs/API.md §3.6): memoryStore(), browserTokenStore(). The Rust token code calls
// a store synchronously (list, add, remove, prune, and the key pins), but the only cross-tab lock
// a browser has, the Web Locks API, is asynchronous. So the browser store gives each store
// instance (each tab, each client) its own lease of tokens, which only that instance writes,
// and moves tokens between the shared pool and the leases only under a Web Lock:
//
// - `S` (the store's key, `privsvc:tokens` or `privsvc:tokens:<name>`) holds the shared pool:
//   `{ v: 2, seq, tokens, keyPins, relayerPins }` (a JSON array there, the old form, is read as
//   the pool's tokens). Only a holder of the exclusive Web Lock `S` reads-modifies-writes it.
// - `S#lease:<id>` holds the tokens and pins of one live instance; only that instance writes it,
//   synchronously, so list/add/remove/prune need no lock: no other tab writes what they read.
// - `S#alive:<id>` is a Web Lock the instance holds for its whole life. A lease whose alive lock
//   can be taken belongs to a closed tab: its tokens go back to the pool, under `S`.
// - After each pool write the writer holds the shared Web Lock `S#seq:<n>` until its next
//   write; the next holder of `S` waits until its copy of the pool shows seq >= n, since
//   localStorage reaches other tabs asynchronously.
//
// An instance claims the whole pool when it starts (`ready()`) and whenever a closed tab's
// lease is reclaimed, so a token is in at most one lease and is handed out once. Tokens are not
// shared between tabs open at the same time: each spends what it holds (its own refills
// included); a closed tab's tokens pass to the next instance that starts.
//
// Without Web Locks (Node.js with --experimental-webstorage, old browsers) the store works in
// one process only: every read-modify-write of `S` is synchronous, which a single JavaScript
// thread cannot interleave, but two tabs could hand out one token twice. Use one tab there.
import { PrivsvcError } from './errors.js';
import { raw } from './wasm.js';

/** Pins stay this many days after their epoch (privsvc-tokens' PIN_RETENTION_DAYS). */
const PIN_RETENTION_DAYS = JSON.parse(raw.rawConstants()).pinRetentionDays;
/** How long a maintenance waits for a pool write of another tab to arrive here, ms. */
const FRESH_WAIT_MS = 3000;

/**
 * The in-memory token store (the default): unspent tokens and key pins live in the client
 * session and are lost with it. Pass it as `tokenStore`.
 */
export function memoryStore() {
  return Object.freeze({ kind: 'memory' });
}

function randomId() {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

function parse(text) {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A pool or lease read from its item: arrays and maps always present. */
function shape(value) {
  if (Array.isArray(value)) return { seq: 0, gone: [], tokens: value.filter(isToken), keyPins: {}, relayerPins: {} };
  const v = value && typeof value === 'object' ? value : {};
  return {
    seq: Number.isSafeInteger(v.seq) ? v.seq : 0,
    // Instances whose leases went back to the pool (the latest 100): never reclaimed twice.
    gone: Array.isArray(v.gone) ? v.gone.filter((x) => typeof x === 'string').slice(-100) : [],
    tokens: Array.isArray(v.tokens) ? v.tokens.filter(isToken) : [],
    keyPins: v.keyPins && typeof v.keyPins === 'object' ? v.keyPins : {},
    relayerPins: v.relayerPins && typeof v.relayerPins === 'object' ? v.relayerPins : {},
  };
}

function isToken(t) {
  return t && typeof t.app === 'string' && typeof t.nonce === 'string' && Number.isSafeInteger(t.epoch);
}

function mergeTokens(into, tokens) {
  for (const t of tokens) if (isToken(t) && !into.some((x) => x.app === t.app && x.nonce === t.nonce)) into.push({ ...t });
}

/** Adds the pins of `from` that `into` lacks (the first pin of a key wins). */
function mergePins(into, from) {
  for (const [k, v] of Object.entries(from)) if (!Object.hasOwn(into, k)) into[k] = v;
}

function pinKey(issuer, app, epoch) {
  return `${String(issuer).toLowerCase()}|${app}|${epoch}`;
}

function prunePins(pins, minEpoch) {
  for (const k of Object.keys(pins)) {
    const epoch = Number(k.slice(k.lastIndexOf('|') + 1));
    if (!(epoch >= minEpoch)) delete pins[k];
  }
}

/** Today's UTC day number (the token epoch). */
function today() {
  return raw.rawEpochOf(Date.now());
}

/**
 * The browser token store: unspent tokens, the issuer-key pins and the relayer pins
 * (url -> address) in `localStorage` under `privsvc:tokens` (or `privsvc:tokens:<name>`), kept
 * by the client across reloads. Pass it as `tokenStore` (or a TokenWallet's `store`). Tabs of
 * one origin coordinate with the Web Locks API (see above): a token is handed out once, whatever
 * the number of tabs. Without Web Locks it is safe within one tab only.
 *
 * Beside the TokenStore methods the client calls, it has `ready()` (resolves once the store has
 * claimed the tokens it may spend; the client and TokenWallet await it), `stored(app?)` (every
 * stored token of every tab, read-only), `relayerPins()` and, for the Rust client's relayer
 * pinning, `relayerPin(url)` and `pinRelayer(url, address)`.
 */
export function browserTokenStore(name) {
  const storage = globalThis.localStorage;
  if (!storage) throw new PrivsvcError('browserTokenStore needs localStorage (a browser page)');
  if (name !== undefined && (typeof name !== 'string' || name === '' || /[#]/.test(name))) {
    throw new PrivsvcError('browserTokenStore(name): a non-empty name without "#"');
  }
  const slot = name ? `privsvc:tokens:${name}` : 'privsvc:tokens';
  const locks = globalThis.navigator && globalThis.navigator.locks;
  return locks && typeof locks.request === 'function' ? leasedStore(storage, locks, slot) : singleProcessStore(storage, slot);
}

/** Reads `key` of `storage` as a pool or lease. */
function readItem(storage, key) {
  return shape(parse(storage.getItem(key)));
}

function writeItem(storage, key, value) {
  try {
    storage.setItem(key, JSON.stringify(value));
  } catch (e) {
    throw new PrivsvcError(`cannot write the token store ${key} (${e && e.name === 'QuotaExceededError' ? 'quota exceeded' : e && e.message})`);
  }
}

/** The pins part shared by both kinds of store, over `view()` (a lease or the pool) and `save()`. */
function pinMethods(own, save, others) {
  const find = (map, k) => {
    if (Object.hasOwn(own().map(map), k)) return own().map(map)[k];
    for (const o of others()) if (Object.hasOwn(o[map], k)) return o[map][k];
    return undefined;
  };
  const first = (map, k, value) => {
    const found = find(map, k);
    if (found !== undefined) return found;
    own().map(map)[k] = value;
    save();
    return value;
  };
  return {
    /** The issuer key pinned for (issuer, app, epoch), SPKI DER in base64, or undefined. */
    keyPin: (issuer, app, epoch) => find('keyPins', pinKey(issuer, app, epoch)),
    /** Pins `spki` (base64) for (issuer, app, epoch) unless a key is pinned; the pinned key. */
    pinKey: (issuer, app, epoch, spki) => first('keyPins', pinKey(issuer, app, epoch), String(spki)),
    /** The relayer account pinned for `url`, or undefined. */
    relayerPin: (url) => find('relayerPins', String(url)),
    /** Pins `address` for `url` unless one is pinned; the pinned address. */
    pinRelayer: (url, address) => first('relayerPins', String(url), String(address)),
    /** Every relayer pin: `{ url: address }`. */
    relayerPins() {
      const out = {};
      mergePins(out, own().map('relayerPins'));
      for (const o of others()) mergePins(out, o.relayerPins);
      return out;
    },
  };
}

/**
 * The Node.js file token store: unspent tokens, the issuer-key pins and the relayer pins
 * (url -> address) in one JSON file at `path`, as the Rust client's file store keeps its pins
 * next to its tokens. The directory is made 0700 and the file written 0600, each write to a
 * temporary file of an unpredictable name renamed over it. Every method reads and writes the
 * file synchronously: one process at a time per file. Pass it as `tokenStore` (or a
 * TokenWallet's `store`).
 */
export function fileTokenStore(path) {
  const proc = globalThis.process;
  const fs = proc && typeof proc.getBuiltinModule === 'function' ? proc.getBuiltinModule('node:fs') : undefined;
  const paths = fs && proc.getBuiltinModule('node:path');
  if (!fs) throw new PrivsvcError('fileTokenStore needs Node.js 22 (a browser page has browserTokenStore)');
  if (typeof path !== 'string' || path === '') throw new PrivsvcError('fileTokenStore(path): the file to keep tokens in');
  const file = paths.resolve(path);
  const dir = paths.dirname(file);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const storage = {
    getItem() {
      try {
        return fs.readFileSync(file, 'utf8');
      } catch (e) {
        if (e && e.code === 'ENOENT') return null;
        throw new PrivsvcError(`cannot read the token store ${file}: ${e && e.message}`);
      }
    },
    setItem(_, text) {
      const temp = paths.join(dir, `.${paths.basename(file)}.${randomId()}${randomId()}.tmp`);
      const fd = fs.openSync(temp, 'wx', 0o600);
      try {
        fs.writeFileSync(fd, text);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      try {
        fs.renameSync(temp, file);
      } catch (e) {
        fs.rmSync(temp, { force: true });
        throw e;
      }
    },
  };
  return singleProcessStore(storage, file, 'file');
}

/** Without Web Locks: the pool itself, read-modified-written synchronously (one process only). */
function singleProcessStore(storage, slot, kind = 'browser') {
  const load = () => readItem(storage, slot);
  let current;
  const own = () => {
    current = load();
    return { map: (m) => current[m] };
  };
  const save = () => writeItem(storage, slot, { v: 2, ...current });
  const update = (fn) => {
    current = load();
    const r = fn(current);
    save();
    return r;
  };
  return Object.freeze({
    kind,
    slot,
    crossTab: false,
    ready: async () => {},
    stored: (app) => load().tokens.filter((t) => app === undefined || t.app === app),
    list: (app) => load().tokens.filter((t) => t.app === app),
    add: (tokens) => update((p) => mergeTokens(p.tokens, tokens)),
    remove(app, nonce) {
      return update((p) => {
        const i = p.tokens.findIndex((t) => t.app === app && t.nonce === nonce);
        if (i >= 0) p.tokens.splice(i, 1);
        return i >= 0;
      });
    },
    prune: (minEpoch) =>
      update((p) => {
        p.tokens = p.tokens.filter((t) => t.epoch >= minEpoch);
        prunePins(p.keyPins, minEpoch - PIN_RETENTION_DAYS);
      }),
    ...pinMethods(own, save, () => []),
  });
}

/** With Web Locks: a lease per instance, the pool moved only under the lock `slot`. */
function leasedStore(storage, locks, slot) {
  const id = randomId();
  const leaseKey = `${slot}#lease:${id}`;
  const leasePrefix = `${slot}#lease:`;
  const alive = (x) => `${slot}#alive:${x}`;
  const seqPrefix = `${slot}#seq:`;
  // This instance's lease, in memory and written through to its item (only we write it).
  const lease = { tokens: [], keyPins: {}, relayerPins: {} };
  const saveLease = () => writeItem(storage, leaseKey, lease);
  let releaseSeq = () => {};
  const watched = new Set();

  const otherLeases = () => {
    const out = [];
    for (let i = 0; i < storage.length; i++) {
      const k = storage.key(i);
      if (k && k.startsWith(leasePrefix) && k !== leaseKey) out.push(readItem(storage, k));
    }
    return out;
  };

  /** Waits until this tab's copy of the pool shows the last write any live tab announced. */
  async function freshPool() {
    const state = await locks.query();
    let want = 0;
    for (const l of state.held || []) {
      if (l.name && l.name.startsWith(seqPrefix)) want = Math.max(want, Number(l.name.slice(seqPrefix.length)) || 0);
    }
    const deadline = Date.now() + FRESH_WAIT_MS;
    for (;;) {
      const pool = readItem(storage, slot);
      if (pool.seq >= want) return pool;
      if (Date.now() > deadline) throw new PrivsvcError('the token pool written by another tab has not arrived in this tab');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Writes the pool and announces its seq (held until our next pool write). */
  async function writePool(pool) {
    pool.seq += 1;
    writeItem(storage, slot, { v: 2, ...pool });
    const previous = releaseSeq;
    await new Promise((granted) => {
      locks.request(`${seqPrefix}${pool.seq}`, { mode: 'shared' }, () => {
        granted();
        return new Promise((release) => {
          releaseSeq = release;
        });
      });
    });
    previous();
  }

  /** Under `slot`: moves the leases of `dead` instances and every pool token into our lease. */
  async function maintain(dead = []) {
    await locks.request(slot, { mode: 'exclusive' }, async () => {
      const pool = await freshPool();
      for (const x of dead) {
        const key = `${leasePrefix}${x}`;
        if (pool.gone.includes(x)) {
          storage.removeItem(key);
          continue;
        }
        pool.gone.push(x);
        const theirs = readItem(storage, key);
        mergeTokens(pool.tokens, theirs.tokens);
        mergePins(pool.keyPins, theirs.keyPins);
        mergePins(pool.relayerPins, theirs.relayerPins);
        storage.removeItem(key);
      }
      mergePins(pool.keyPins, lease.keyPins);
      mergePins(pool.relayerPins, lease.relayerPins);
      prunePins(pool.keyPins, today() - PIN_RETENTION_DAYS);
      const claimed = pool.tokens;
      pool.tokens = [];
      // The pool first, then the lease: a crash in between loses the tokens, never doubles them.
      await writePool(pool);
      mergeTokens(lease.tokens, claimed);
      saveLease();
    });
  }

  /** Finds the leases of closed tabs (reclaimed now) and watches the live ones. */
  async function sweep() {
    const dead = [];
    const ids = [];
    for (let i = 0; i < storage.length; i++) {
      const k = storage.key(i);
      if (k && k.startsWith(leasePrefix) && k !== leaseKey) ids.push(k.slice(leasePrefix.length));
    }
    for (const x of ids) {
      if (watched.has(x)) continue;
      // ifAvailable: granted at once only when no live instance holds it.
      const free = await locks.request(alive(x), { ifAvailable: true }, (lock) => lock !== null);
      if (free) dead.push(x);
      else watch(x);
    }
    await maintain(dead);
    await watchLive();
  }

  /**
   * Watches every live instance not watched yet, as the lock manager sees them now (its view is
   * the same in every tab at once; a lease item written by another tab may not have arrived
   * here yet). Called once this instance has claimed the pool: an instance that claimed it
   * before us held its alive lock before it asked for the pool, so we see it and reclaim its
   * tokens when it ends, even when its lease item had not arrived here when we swept.
   */
  async function watchLive() {
    const state = await locks.query();
    const prefix = alive('');
    for (const l of state.held || []) {
      const x = l.name && l.name.startsWith(prefix) ? l.name.slice(prefix.length) : undefined;
      if (x && x !== id && !watched.has(x)) watch(x);
    }
  }

  /** When instance `x` ends (its alive lock is released), reclaim its lease. */
  function watch(x) {
    watched.add(x);
    locks
      .request(alive(x), async () => {
        await maintain([x]);
      })
      .catch(() => {})
      .finally(() => watched.delete(x));
  }

  const ready = (async () => {
    // Our own alive lock, held for the life of this page (or worker).
    await new Promise((granted) => {
      locks.request(alive(id), () => {
        granted();
        return new Promise(() => {});
      });
    });
    saveLease();
    try {
      await sweep();
    } catch (e) {
      // Safe either way: this instance then spends only the tokens it fetches itself.
      console.warn(`privsvc: browserTokenStore could not take over stored tokens (${e && e.message})`);
    }
  })();

  const own = () => ({ map: (m) => lease[m] });
  return Object.freeze({
    kind: 'browser',
    slot,
    crossTab: true,
    /** Resolves once this instance holds its lease (every client and TokenWallet awaits it). */
    ready: () => ready,
    stored(app) {
      const all = [];
      mergeTokens(all, readItem(storage, slot).tokens);
      mergeTokens(all, lease.tokens);
      for (const o of otherLeases()) mergeTokens(all, o.tokens);
      return all.filter((t) => app === undefined || t.app === app);
    },
    list: (app) => lease.tokens.filter((t) => t.app === app).map((t) => ({ ...t })),
    add(tokens) {
      mergeTokens(lease.tokens, tokens);
      saveLease();
    },
    remove(app, nonce) {
      const i = lease.tokens.findIndex((t) => t.app === app && t.nonce === nonce);
      if (i < 0) return false;
      lease.tokens.splice(i, 1);
      saveLease();
      return true;
    },
    prune(minEpoch) {
      const before = lease.tokens.length;
      lease.tokens = lease.tokens.filter((t) => t.epoch >= minEpoch);
      prunePins(lease.keyPins, minEpoch - PIN_RETENTION_DAYS);
      if (lease.tokens.length !== before) saveLease();
    },
    ...pinMethods(own, saveLease, () => [readItem(storage, slot), ...otherLeases()]),
  });
}
