// Token stores (docs/API.md §3.6): where a client keeps, between sessions, its unspent tokens,
// the issuer key pins, the relayer pins and its scan cache: the device store of
// docs/PROTOCOL.md §8.7. Every part is sealed and authenticated under a key derived from the
// vault's root (the Rust sealing of privsvc_client::device_seal, through RawPartSealer), so a
// script of the same origin, another program or another user can neither read nor plant one: a
// part that does not open is discarded with a warning, never trusted.
//
// - browserTokenStore(name?): IndexedDB, database `privsvc-store` (`privsvc-store:<name>`),
//   object store `parts`, keys `<store id>/tokens`, `<store id>/pins`, `<store id>/scan` and
//   `<store id>/lease/<instance>`, where the store id is derived from the key (it names no
//   wallet). The default in browsers.
// - fileTokenStore(dir) (Node.js): a directory (0700) holding one directory per store id with
//   the files `tokens.sealed`, `pins.sealed` and `scan.sealed` (0600, each written to a new file
//   under an unpredictable name and renamed over it), and `.lock-node`. The default in Node.js, under
//   `<data dir>/node` (the native client's data directory; Node.js keeps a directory of its
//   own, since it cannot take the file lock the native client holds).
// - memoryStore(): nothing kept; every session is a first spend (docs/PRIVACY.md).
//
// A handle (what browserTokenStore() and fileTokenStore() return) is opened with a vault's key
// by the first client (or TokenWallet) it is given to; its token methods work from then on.
//
// The Rust token code calls a store synchronously (list, add, remove, prune, the pins), while
// IndexedDB and the only cross-tab lock a browser has (Web Locks) are asynchronous. So in a
// browser each open store instance (a tab, a worker) spends only its own *lease* of tokens,
// which only that instance writes, and tokens move between the shared pool and the leases only
// under an exclusive Web Lock, in one IndexedDB transaction:
// - the pool (`tokens`) holds the tokens no live instance holds;
// - `lease/<id>` holds the tokens of one live instance (written by that instance after each
//   change, in the order of the changes);
// - `privsvc:<db>:<store id>:alive:<id>` is a Web Lock the instance holds for its whole life: a
//   lease whose alive lock can be taken belongs to a closed tab, and its tokens go back to the
//   pool, under the lock `privsvc:<db>:<store id>`, in the transaction that deletes the lease.
// An instance claims the whole pool when it opens and whenever a closed tab's lease is
// reclaimed, so a token is in at most one lease and is handed out once. Tabs open at the same
// time do not share tokens: each spends what it holds (its own refills included). Without Web
// Locks (browsers before 2022) the store is safe in one tab only.
import { PrivsvcError } from './errors.js';
import { raw } from './wasm.js';

const CONSTANTS = JSON.parse(raw.rawConstants());
/** Pins stay this many days after their epoch (privsvc-tokens' PIN_RETENTION_DAYS). */
const PIN_RETENTION_DAYS = CONSTANTS.pinRetentionDays;
/** The sealed parts (docs/PROTOCOL.md §8.7). */
const TOKENS = 1;
const PINS = 2;
/** The IndexedDB database and object store of browser stores. */
const IDB_NAME = 'privsvc-store';
const IDB_STORE = 'parts';
/** How a handle is opened (internal: createPrivateClient and TokenWallet call it). */
const OPEN = Symbol('privsvc.openStore');
const WARM = Symbol('privsvc.warmStore');
const ANY_SCAN = Symbol('privsvc.anyScanCache');

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The in-memory token store: unspent tokens and pins live in the client session and are lost
 * with it, and the session keeps no scan cache. Every session then starts with no token (its
 * first write is a first spend the issuer can time), no relayer pins and no cache. Pass it as
 * `tokenStore`, or set `memoryStores: true`.
 */
export function memoryStore() {
  return Object.freeze({ kind: 'memory' });
}

function randomId() {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

function warn(message) {
  console.warn(`privsvc: ${message}`);
}

/** Today's UTC day number (the token epoch). */
function today() {
  return raw.rawEpochOf(Date.now());
}

function isToken(t) {
  return t && typeof t.app === 'string' && typeof t.nonce === 'string' && Number.isSafeInteger(t.epoch);
}

function mergeTokens(into, tokens) {
  for (const t of tokens) if (isToken(t) && !into.some((x) => x.app === t.app && x.nonce === t.nonce)) into.push({ ...t });
}

// ---------------------------------------------------------------------------------------------
// Sealed parts. The content is the native device store's JSON: tokens as the Rust StoredToken
// list, pins as `{ keys: [[issuer, app, epoch, spki hex]], relayers: { url: account } }`.

function hexOf(bytes) {
  return Array.from(bytes, (x) => x.toString(16).padStart(2, '0')).join('');
}

function base64ToHex(b64) {
  return hexOf(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
}

function hexToBase64(hex) {
  let text = '';
  for (let i = 0; i + 1 < hex.length; i += 2) text += String.fromCharCode(parseInt(hex.slice(i, i + 2), 16));
  return btoa(text);
}

function emptyPins() {
  return { keys: [], relayers: {} };
}

function shapePins(v) {
  const out = emptyPins();
  if (!v || typeof v !== 'object') return out;
  if (Array.isArray(v.keys)) {
    for (const k of v.keys) {
      if (Array.isArray(k) && k.length === 4 && typeof k[0] === 'string' && typeof k[1] === 'string' && Number.isSafeInteger(k[2]) && typeof k[3] === 'string') out.keys.push(k);
    }
  }
  if (v.relayers && typeof v.relayers === 'object') {
    for (const [url, a] of Object.entries(v.relayers)) if (typeof a === 'string') out.relayers[url] = a;
  }
  return out;
}

/** Adds the pins of `from` that `into` lacks (the first pin of a key wins). */
function mergePins(into, from) {
  for (const k of from.keys) if (!into.keys.some((x) => sameKeyPin(x, k))) into.keys.push(k);
  for (const [url, a] of Object.entries(from.relayers)) if (!Object.hasOwn(into.relayers, url)) into.relayers[url] = a;
}

function sameKeyPin(a, b) {
  return a[0].toLowerCase() === b[0].toLowerCase() && a[1] === b[1] && a[2] === b[2];
}

function prunePins(pins, minEpoch) {
  pins.keys = pins.keys.filter((k) => k[2] >= minEpoch);
}

/** The sealer of one store: `seal(part, value)` and `open(part, bytes)` (undefined: discard). */
function partsOf(sealer) {
  return {
    id: sealer.storeId,
    seal: (part, value) => sealer.seal(part, encoder.encode(JSON.stringify(value))),
    open(part, bytes) {
      if (!(bytes instanceof Uint8Array)) return undefined;
      const content = sealer.open(part, bytes);
      if (content === undefined) return undefined;
      try {
        return JSON.parse(decoder.decode(content));
      } catch {
        return undefined;
      } finally {
        content.fill(0);
      }
    },
  };
}

/**
 * The sealer of the store of `key` (a vault's scan-cache key, 32 bytes; zeroed here) for
 * `project` on `chainId`, or undefined when `key` is not one.
 * @internal
 */
export function storeSealer(key, chainId, project) {
  if (!(key instanceof Uint8Array) || key.length !== 32) return undefined;
  try {
    return new raw.RawPartSealer(key, chainId, project);
  } finally {
    key.fill(0);
  }
}

// ---------------------------------------------------------------------------------------------
// Backends: where sealed bytes are kept. `run(mode, fn)` runs `fn(tx)` in one transaction
// (`tx.get(key)`, `tx.put(key, bytes)`, `tx.del(key)`, `tx.keys(prefix)`, each a promise in
// IndexedDB, a value with files) and resolves to its result once the transaction committed.

function idbRequest(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

function idbBackend(dbName) {
  const indexedDB = globalThis.indexedDB;
  let db;
  const openDb = () => {
    db = db || (async () => {
      const req = indexedDB.open(dbName, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(IDB_STORE);
      return idbRequest(req);
    })();
    return db;
  };
  return {
    kind: 'indexeddb',
    location: `indexeddb:${dbName}`,
    lockName: `privsvc:${dbName}`,
    /** Opens the database now; a failure is the first transaction's to report. */
    warm() {
      openDb().catch(() => {});
    },
    /**
     * Whether any user's scan cache is kept here: reads the keys only. A device that never
     * opened this store has no such database, which `indexedDB.databases()` tells without
     * creating it (creating it takes Chromium tens of milliseconds); call this before `warm`.
     */
    async anyScan() {
      if (typeof indexedDB.databases === 'function') {
        try {
          if (!(await indexedDB.databases()).some((d) => d.name === dbName)) return false;
        } catch {
          // Asked of the database itself below.
        }
      }
      const t = (await openDb()).transaction(IDB_STORE, 'readonly');
      const keys = await idbRequest(t.objectStore(IDB_STORE).getAllKeys());
      return keys.some((k) => String(k).endsWith('/scan'));
    },
    async run(mode, fn) {
      const t = (await openDb()).transaction(IDB_STORE, mode);
      const s = t.objectStore(IDB_STORE);
      const done = new Promise((resolve, reject) => {
        t.oncomplete = () => resolve();
        t.onabort = () => reject(t.error || new Error('the IndexedDB transaction was aborted'));
        t.onerror = () => reject(t.error);
      });
      const tx = {
        get: async (key) => {
          const v = await idbRequest(s.get(key));
          return v instanceof Uint8Array ? v : v instanceof ArrayBuffer ? new Uint8Array(v) : undefined;
        },
        put: (key, bytes) => idbRequest(s.put(bytes, key)),
        del: (key) => idbRequest(s.delete(key)),
        keys: (prefix) => idbRequest(s.getAllKeys(IDBKeyRange.bound(prefix, `${prefix}\uffff`))),
      };
      let result;
      try {
        result = await fn(tx);
        try {
          // Sooner than the automatic commit; a transaction that already finished throws.
          if (typeof t.commit === 'function') t.commit();
        } catch {
          // Committed already.
        }
      } catch (e) {
        try {
          t.abort();
        } catch {
          // Already finished.
        }
        throw e;
      }
      await done;
      return result;
    },
  };
}

/** Node.js: files under `dir`, synchronous (one process holds a store's directory). */
function fileBackend(dir) {
  const proc = globalThis.process;
  const fs = proc.getBuiltinModule('node:fs');
  const paths = proc.getBuiltinModule('node:path');
  const fileOf = (key) => {
    const [id, slot] = key.split('/');
    return paths.join(dir, id, `${slot}.sealed`);
  };
  const tx = {
    get(key) {
      try {
        return new Uint8Array(fs.readFileSync(fileOf(key)));
      } catch (e) {
        if (e && e.code === 'ENOENT') return undefined;
        throw new PrivsvcError(`cannot read ${fileOf(key)}: ${e && e.message}`);
      }
    },
    put(key, bytes) {
      const file = fileOf(key);
      const temp = paths.join(paths.dirname(file), `.${paths.basename(file)}.${randomId()}${randomId()}.tmp`);
      const fd = fs.openSync(temp, 'wx', 0o600);
      try {
        fs.writeFileSync(fd, bytes);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      try {
        fs.renameSync(temp, file);
      } catch (e) {
        fs.rmSync(temp, { force: true });
        throw new PrivsvcError(`cannot write ${file}: ${e && e.message}`);
      }
    },
    del(key) {
      fs.rmSync(fileOf(key), { force: true });
    },
    keys: () => [],
  };
  return {
    kind: 'file',
    location: `file:${dir}`,
    dir,
    sync: true,
    run: async (_mode, fn) => fn(tx),
    tx,
    /** Whether any user's scan cache is kept here (`<dir>/<id>/scan.sealed`): opens nothing. */
    async anyScan() {
      let ids;
      try {
        ids = await fs.promises.readdir(dir);
      } catch (e) {
        if (e && e.code === 'ENOENT') return false;
        throw e;
      }
      for (const id of ids) {
        try {
          await fs.promises.access(paths.join(dir, id, 'scan.sealed'));
          return true;
        } catch {
          // None for this id.
        }
      }
      return false;
    },
    /** Makes `<dir>/<id>` (0700, the data directory too) and takes its lock for this process. */
    claim(id) {
      for (const d of [dir, paths.join(dir, id)]) {
        fs.mkdirSync(d, { recursive: true, mode: 0o700 });
        fs.chmodSync(d, 0o700);
      }
      // Not the native client's `.lock` (a lock Node.js cannot take): a lock file of its own.
      return lockDir(fs, paths.join(dir, id, '.lock-node'));
    },
  };
}

/** Takes `<store dir>/.lock-node` for this process (a stale lock of an ended process is taken over). */
function lockDir(fs, file) {
  const pid = globalThis.process.pid;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, String(pid), { flag: 'wx', mode: 0o600 });
      const unlock = () => {
        globalThis.process.off('exit', unlock);
        try {
          fs.rmSync(file, { force: true });
        } catch {
          // Leaving: nothing to do.
        }
      };
      globalThis.process.on('exit', unlock);
      return unlock;
    } catch (e) {
      if (!e || e.code !== 'EEXIST') throw new PrivsvcError(`cannot lock the token store ${file}: ${e && e.message}`);
    }
    const holder = Number(fs.readFileSync(file, 'utf8'));
    let alive = false;
    if (Number.isSafeInteger(holder) && holder > 0 && holder !== pid) {
      try {
        globalThis.process.kill(holder, 0);
        alive = true;
      } catch (e) {
        alive = e && e.code === 'EPERM';
      }
    }
    if (alive) {
      throw new PrivsvcError(`${file}: the token store is in use by another process (${holder}); close it, or give this client another store (fileTokenStore(dir)) or memoryStores: true`);
    }
    fs.rmSync(file, { force: true });
  }
  throw new PrivsvcError(`cannot lock the token store ${file}`);
}

// ---------------------------------------------------------------------------------------------
// An open store: the TokenStore methods the Rust client calls (synchronous, over this
// instance's tokens and the pins in memory), kept in the backend after each change.

/** Open stores by backend location and store id: the clients of one page or process share one. */
const openStores = new Map();

class OpenStore {
  #backend;
  #parts;
  #locks;
  #id = randomId();
  #tokens = [];
  #pins = emptyPins();
  #flushing = null;
  #dirty = false;
  #pinWrites = Promise.resolve();
  #watched = new Set();
  #endAlive = () => {};
  #unlock = () => {};
  /** Aborts the watches of other instances when this one ends. */
  #ending = new AbortController();
  /** The parts discarded when they did not open (`tokens`, `pins`, a lease). */
  discarded = [];

  constructor(backend, parts, locks) {
    this.#backend = backend;
    this.#parts = parts;
    this.#locks = locks;
  }

  get #prefix() {
    return `${this.#parts.id}/`;
  }

  get crossTab() {
    return Boolean(this.#locks);
  }

  /** The store's id (derived from the key; names no wallet). */
  get id() {
    return this.#parts.id;
  }

  /** Reads the parts (and, with Web Locks, claims the pool and the leases of closed tabs). */
  async start() {
    if (this.#locks) {
      const alive = this.#lockName(`alive:${this.#id}`);
      await new Promise((granted) => {
        this.#locks.request(alive, () => {
          granted();
          return new Promise((end) => {
            this.#endAlive = end;
          });
        });
      });
      await this.#sweep();
      return;
    }
    if (this.#backend.claim) this.#unlock = this.#backend.claim(this.#parts.id);
    await this.#backend.run('readwrite', async (tx) => {
      this.#tokens = (await this.#openPart(tx, 'tokens', TOKENS)) ?? [];
      this.#pins = shapePins(await this.#openPart(tx, 'pins', PINS));
    });
    this.#tokens = this.#tokens.filter(isToken);
  }

  #lockName(suffix) {
    return `${this.#backend.lockName}:${this.#parts.id}${suffix ? `:${suffix}` : ''}`;
  }

  /** The content of a part, or undefined; a part that does not open is deleted (and noted). */
  async #openPart(tx, slot, part) {
    const bytes = await tx.get(this.#prefix + slot);
    if (bytes === undefined) return undefined;
    const value = this.#parts.open(part, bytes);
    if (value === undefined) {
      warn(`the token store part ${slot} does not open under this vault's key; discarding it`);
      this.discarded.push(slot.startsWith('lease/') ? 'lease' : slot);
      await tx.del(this.#prefix + slot);
    }
    return value;
  }

  /** Finds the leases of closed tabs (reclaimed now), claims the pool, watches live tabs. */
  async #sweep() {
    const leasePrefix = `${this.#prefix}lease/`;
    const ids = (await this.#backend.run('readonly', (tx) => tx.keys(leasePrefix))).map((k) => String(k).slice(leasePrefix.length));
    const dead = [];
    for (const x of ids) {
      if (x === this.#id || this.#watched.has(x)) continue;
      // ifAvailable: granted at once only when no live instance holds it.
      const free = await this.#locks.request(this.#lockName(`alive:${x}`), { ifAvailable: true }, (lock) => lock !== null);
      if (free) dead.push(x);
      else this.#watch(x);
    }
    await this.#maintain(dead);
    await this.#watchLive();
  }

  /** Under the store's lock, in one transaction: the leases of `dead` and the pool into ours. */
  async #maintain(dead) {
    await this.#locks.request(this.#lockName(''), { mode: 'exclusive' }, () =>
      this.#backend.run('readwrite', async (tx) => {
        const pool = (await this.#openPart(tx, 'tokens', TOKENS)) ?? [];
        const pins = shapePins(await this.#openPart(tx, 'pins', PINS));
        for (const x of dead) {
          mergeTokens(pool, (await this.#openPart(tx, `lease/${x}`, TOKENS)) ?? []);
          await tx.del(`${this.#prefix}lease/${x}`);
        }
        mergePins(pins, this.#pins);
        prunePins(pins, today() - PIN_RETENTION_DAYS);
        this.#pins = pins;
        mergeTokens(this.#tokens, pool);
        // One transaction: the pool emptied and our lease written together, or neither.
        await tx.put(`${this.#prefix}tokens`, this.#parts.seal(TOKENS, []));
        await tx.put(`${this.#prefix}pins`, this.#parts.seal(PINS, pins));
        await tx.put(`${this.#prefix}lease/${this.#id}`, this.#parts.seal(TOKENS, this.#tokens));
      }),
    );
    // Changes made while the transaction ran are written after it.
    this.#save();
  }

  /**
   * Watches every live instance not watched yet, as the lock manager sees them now: an
   * instance that claimed the pool before us held its alive lock before it asked for the pool,
   * so we see it and reclaim its tokens when it ends.
   */
  async #watchLive() {
    const state = await this.#locks.query();
    const prefix = this.#lockName('alive:');
    for (const l of state.held || []) {
      const x = l.name && l.name.startsWith(prefix) ? l.name.slice(prefix.length) : undefined;
      if (x && x !== this.#id && !this.#watched.has(x)) this.#watch(x);
    }
  }

  /** When instance `x` ends (its alive lock is released), reclaim its lease. */
  #watch(x) {
    this.#watched.add(x);
    this.#locks
      .request(this.#lockName(`alive:${x}`), { signal: this.#ending.signal }, () => this.#maintain([x]))
      .catch((e) => {
        if (!this.#ending.signal.aborted) warn(`a closed tab's tokens could not be taken over (${e && e.message})`);
      })
      .finally(() => this.#watched.delete(x));
  }

  /**
   * Keeps this instance's tokens: at once with files (durable before the call returns), else
   * in the next transaction (issued within this task, in the order of the changes).
   */
  #save() {
    if (this.#backend.sync) {
      this.#backend.tx.put(`${this.#prefix}tokens`, this.#parts.seal(TOKENS, this.#tokens));
      return;
    }
    this.#dirty = true;
    if (this.#flushing) return;
    this.#flushing = (async () => {
      await null;
      while (this.#dirty) {
        this.#dirty = false;
        const slot = this.#locks ? `lease/${this.#id}` : 'tokens';
        const sealed = this.#parts.seal(TOKENS, this.#tokens);
        try {
          await this.#backend.run('readwrite', (tx) => tx.put(this.#prefix + slot, sealed));
        } catch (e) {
          warn(`cannot write the token store (${e && e.message})`);
        }
      }
      this.#flushing = null;
    })();
  }

  /** Keeps the pins: at once with files; else merged into the stored pins under the lock. */
  #savePins() {
    if (this.#backend.sync) {
      this.#backend.tx.put(`${this.#prefix}pins`, this.#parts.seal(PINS, this.#pins));
      return;
    }
    const write = () =>
      this.#backend.run('readwrite', async (tx) => {
        const stored = this.#locks ? shapePins(await this.#openPart(tx, 'pins', PINS)) : emptyPins();
        mergePins(stored, this.#pins);
        this.#pins = stored;
        await tx.put(`${this.#prefix}pins`, this.#parts.seal(PINS, stored));
      });
    this.#pinWrite(write);
  }

  /** Runs `write` (of the pins part) under the store's lock, after the pin writes before it. */
  #pinWrite(write) {
    const run = () => (this.#locks ? this.#locks.request(this.#lockName(''), { mode: 'exclusive' }, write) : write());
    this.#pinWrites = this.#pinWrites.then(run).catch((e) => warn(`cannot write the pins (${e && e.message})`));
  }

  /** Resolves once every change so far is written. */
  async flush() {
    while (this.#flushing) await this.#flushing;
    await this.#pinWrites;
  }

  /**
   * Ends this instance once its last client closed: its changes written, its lease left to
   * the next instance (its alive lock released), its directory unlocked.
   */
  async end() {
    if (this.#backend.sync) {
      // Every change is on disk already.
      this.#unlock();
      return;
    }
    this.#ending.abort();
    await this.flush();
    this.#endAlive();
    this.#unlock();
  }

  // --- the TokenStore methods (docs/API.md §3.6), synchronous

  list(app) {
    return this.#tokens.filter((t) => t.app === app).map((t) => ({ ...t }));
  }

  add(tokens) {
    const before = this.#tokens.length;
    mergeTokens(this.#tokens, tokens);
    if (this.#tokens.length !== before) this.#save();
  }

  remove(app, nonce) {
    const i = this.#tokens.findIndex((t) => t.app === app && t.nonce === nonce);
    if (i < 0) return false;
    this.#tokens.splice(i, 1);
    this.#save();
    return true;
  }

  prune(minEpoch) {
    const before = this.#tokens.length;
    this.#tokens = this.#tokens.filter((t) => t.epoch >= minEpoch);
    const keys = this.#pins.keys.length;
    prunePins(this.#pins, minEpoch - PIN_RETENTION_DAYS);
    if (this.#tokens.length !== before) this.#save();
    if (this.#pins.keys.length !== keys) this.#savePins();
  }

  /** The tokens this instance holds (of `app` when given), read-only. */
  stored(app) {
    return this.#tokens.filter((t) => app === undefined || t.app === app).map((t) => ({ ...t }));
  }

  /** The issuer key pinned for (issuer, app, epoch), SPKI DER in base64, or undefined. */
  keyPin(issuer, app, epoch) {
    const k = this.#pins.keys.find((x) => sameKeyPin(x, [String(issuer), app, epoch]));
    return k ? hexToBase64(k[3]) : undefined;
  }

  /** Pins `spki` (base64) for (issuer, app, epoch) unless a key is pinned; the pinned key. */
  pinKey(issuer, app, epoch, spki) {
    const pinned = this.keyPin(issuer, app, epoch);
    if (pinned !== undefined) return pinned;
    this.#pins.keys.push([String(issuer), app, epoch, base64ToHex(String(spki))]);
    this.#savePins();
    return String(spki);
  }

  /** The relayer account pinned for `url`, or undefined. */
  relayerPin(url) {
    return Object.hasOwn(this.#pins.relayers, url) ? this.#pins.relayers[url] : undefined;
  }

  /** Pins `address` for `url` unless one is pinned; the pinned address. */
  pinRelayer(url, address) {
    const pinned = this.relayerPin(url);
    if (pinned !== undefined) return pinned;
    this.#pins.relayers[String(url)] = String(address);
    this.#savePins();
    return String(address);
  }

  /** Removes the pin of `url`; whether there was one. */
  unpinRelayer(url) {
    if (!Object.hasOwn(this.#pins.relayers, url)) return false;
    delete this.#pins.relayers[url];
    if (this.#backend.sync) this.#savePins();
    else {
      // A removal is not a merge: written as it is, under the lock.
      const pins = structuredClone(this.#pins);
      const write = () => this.#backend.run('readwrite', async (tx) => {
        const stored = shapePins(await this.#openPart(tx, 'pins', PINS));
        delete stored.relayers[url];
        mergePins(stored, pins);
        await tx.put(`${this.#prefix}pins`, this.#parts.seal(PINS, stored));
      });
      this.#pinWrite(write);
    }
    return true;
  }

  /** Every relayer pin: `{ url: address }`. */
  relayerPins() {
    return { ...this.#pins.relayers };
  }

  /** The scan cache kept with this store (the blob the client seals itself). */
  scanCache() {
    const key = `${this.#prefix}scan`;
    if (this.#backend.sync) {
      const fs = globalThis.process.getBuiltinModule('node:fs');
      const paths = globalThis.process.getBuiltinModule('node:path');
      const file = paths.join(this.#backend.dir, this.#parts.id, 'scan.sealed');
      return {
        load: async () => {
          try {
            return new Uint8Array(await fs.promises.readFile(file));
          } catch (e) {
            if (e && e.code === 'ENOENT') return undefined;
            throw e;
          }
        },
        save: async (bytes) => this.#backend.tx.put(key, bytes),
        clear: async () => this.#backend.tx.del(key),
      };
    }
    return {
      load: () => this.#backend.run('readonly', (tx) => tx.get(key)),
      save: (bytes) => this.#backend.run('readwrite', (tx) => tx.put(key, bytes)),
      clear: () => this.#backend.run('readwrite', (tx) => tx.del(key)),
    };
  }
}

/**
 * Opens (once per page or process) the store of `sealer` in `backend`: `{ store, release }`,
 * where `release()` ends the store once every user released it.
 */
async function openIn(backend, sealer, locks) {
  const key = `${backend.location}|${sealer.storeId}`;
  let entry = openStores.get(key);
  if (entry) {
    sealer.free();
  } else {
    const store = new OpenStore(backend, partsOf(sealer), locks);
    entry = { users: 0, opening: store.start().then(() => store) };
    openStores.set(key, entry);
    entry.opening.catch(() => openStores.delete(key));
  }
  entry.users += 1;
  const store = await entry.opening;
  let released = false;
  return {
    store,
    release() {
      if (released) return;
      released = true;
      entry.users -= 1;
      if (entry.users === 0 && openStores.get(key) === entry) {
        openStores.delete(key);
        store.end().catch((e) => warn(`cannot close the token store (${e && e.message})`));
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Handles

/**
 * A store handle: `kind`, `ready()`, `id` and `discarded` once open, and the store's methods,
 * which throw until a client (or TokenWallet) opened it with the user's vault. A handle serves
 * one user and project; the clients of one page or process share the open store.
 */
function handle(kind, what, backendOf, locks) {
  let backend;
  let opened;
  let opening;
  let openedId;
  const need = () => {
    if (!opened) throw new PrivsvcError(`${what} is not open yet: give it to createPrivateClient (or to a TokenWallet with a vault) first`);
    return opened;
  };
  const h = {
    kind,
    crossTab: Boolean(locks),
    /** Resolves once the store is open (at once when nothing opens it yet). */
    ready: () => (opening ?? Promise.resolve()).then(() => {}),
    /** The store's id once open (derived from the key: it names no wallet). */
    get id() {
      return opened ? opened.id : undefined;
    },
    /** The parts discarded when the store opened: they did not open under the vault's key. */
    get discarded() {
      return opened ? [...opened.discarded] : [];
    },
    /** Resolves once every change so far is written. */
    flush: () => (opened ? opened.flush() : Promise.resolve()),
    stored: (app) => (opened ? opened.stored(app) : []),
    list: (app) => need().list(app),
    add: (tokens) => need().add(tokens),
    remove: (app, nonce) => need().remove(app, nonce),
    prune: (minEpoch) => need().prune(minEpoch),
    keyPin: (issuer, app, epoch) => need().keyPin(issuer, app, epoch),
    pinKey: (issuer, app, epoch, spki) => need().pinKey(issuer, app, epoch, spki),
    relayerPin: (url) => need().relayerPin(url),
    pinRelayer: (url, address) => need().pinRelayer(url, address),
    unpinRelayer: (url) => need().unpinRelayer(url),
    relayerPins: () => need().relayerPins(),
    /**
     * Opens what the store needs no key for (the IndexedDB database) ahead of [OPEN].
     * @internal
     */
    [WARM]() {
      backend = backend || backendOf();
      if (typeof backend.warm === 'function') backend.warm();
    },
    /**
     * Whether the store keeps any user's scan cache (keys or file names only, no key needed).
     * @internal
     */
    async [ANY_SCAN]() {
      backend = backend || backendOf();
      return typeof backend.anyScan === 'function' ? backend.anyScan() : true;
    },
    /**
     * Opens the store under `sealer` (which it keeps or frees) for one user of it: `{ store,
     * release }`.
     * @internal
     */
    async [OPEN](sealer) {
      if (openedId !== undefined && openedId !== sealer.storeId) {
        sealer.free();
        throw new PrivsvcError(`${what} is open for another vault, chain or project: make one store handle per user and project`);
      }
      openedId = sealer.storeId;
      backend = backend || backendOf();
      const attempt = openIn(backend, sealer, locks);
      opening = attempt;
      try {
        const user = await attempt;
        opened = user.store;
        return user;
      } catch (e) {
        if (opening === attempt) {
          opening = undefined;
          if (!opened) openedId = undefined;
        }
        throw e;
      }
    },
  };
  return Object.freeze(h);
}

/**
 * The browser store (the default in browsers): tokens, issuer key pins, relayer pins and the
 * scan cache in IndexedDB (database `privsvc-store`, or `privsvc-store:<name>`), each sealed
 * under a key derived from the vault's root. Tabs of one origin coordinate with Web Locks: a
 * token is handed out once, whatever the number of tabs. Pass it as `tokenStore` (or a
 * TokenWallet's `store`); it opens with the first client's vault.
 */
export function browserTokenStore(name) {
  if (!globalThis.indexedDB) throw new PrivsvcError('browserTokenStore needs IndexedDB (a browser page; in Node.js use fileTokenStore)');
  if (name !== undefined && (typeof name !== 'string' || name === '' || /[:/]/.test(name))) {
    throw new PrivsvcError('browserTokenStore(name): a non-empty name without ":" or "/"');
  }
  const dbName = name ? `${IDB_NAME}:${name}` : IDB_NAME;
  const locks = globalThis.navigator && globalThis.navigator.locks;
  const h = handle('browser', `browserTokenStore(${name ? JSON.stringify(name) : ''})`, () => idbBackend(dbName), locks && typeof locks.request === 'function' ? locks : undefined);
  return h;
}

/**
 * The Node.js file store (the default in Node.js, under `<data dir>/node`): `dir` (made 0700)
 * holds one directory per vault root, chain and project with the sealed parts (files 0600,
 * written atomically) and a lock: one process at a time per directory; the clients of one
 * process share it. Pass it as `tokenStore` (or a TokenWallet's `store`).
 */
export function fileTokenStore(dir) {
  const proc = globalThis.process;
  if (!(proc && typeof proc.getBuiltinModule === 'function')) throw new PrivsvcError('fileTokenStore needs Node.js 22 (a browser page has browserTokenStore)');
  if (typeof dir !== 'string' || dir === '') throw new PrivsvcError('fileTokenStore(dir): the directory to keep the store in');
  const resolved = proc.getBuiltinModule('node:path').resolve(dir);
  return handle('file', `fileTokenStore(${JSON.stringify(dir)})`, () => fileBackend(resolved), undefined);
}

/**
 * Node.js: the data directory of the default store: `$PRIVSVC_DATA_DIR`, else
 * `$XDG_DATA_HOME/privsvc`, else `$HOME/.local/share/privsvc` (as the native client's), then
 * `node`; undefined when none of them is set.
 * @internal
 */
export function defaultDataDir() {
  const proc = globalThis.process;
  if (!(proc && typeof proc.getBuiltinModule === 'function')) return undefined;
  const env = proc.env;
  const paths = proc.getBuiltinModule('node:path');
  const base = env.PRIVSVC_DATA_DIR || (env.XDG_DATA_HOME && paths.join(env.XDG_DATA_HOME, 'privsvc')) || (env.HOME && paths.join(env.HOME, '.local', 'share', 'privsvc'));
  return base ? paths.join(base, 'node') : undefined;
}

/** Whether `store` is a handle of this module (browserTokenStore, fileTokenStore). @internal */
export function isStoreHandle(store) {
  return Boolean(store && typeof store[OPEN] === 'function');
}

/**
 * Opens `store` (a handle) under `sealer` for one user: `{ store, release }`, `store` the
 * object the Rust client calls.
 * @internal
 */
export function openStore(store, sealer) {
  return store[OPEN](sealer);
}

/**
 * Starts opening what `store` (a handle) needs no key for, so that the session's start does
 * not wait for it after the vault.
 * @internal
 */
export function warmStore(store) {
  store[WARM]();
}

/**
 * Whether `store` (a handle) keeps a scan cache for any user: when it keeps none, a session on
 * it certainly lists from the start. Reads no sealed part.
 * @internal
 */
export function keepsAnyScanCache(store) {
  return store[ANY_SCAN]();
}
