// Scan-cache stores (docs/API.md §3.1, `scanCache`): where a client keeps its sealed listing
// between sessions. The blob is sealed by the client (AES-256-GCM-SIV under a key derived from
// the vault's root, docs/PROTOCOL.md §8.7); a store only keeps opaque bytes.
import { PrivsvcError } from './errors.js';

/** The IndexedDB database of `browserScanCache`. */
const DB_NAME = 'privsvc-scan-cache';
const DB_STORE = 'caches';

function idbRequest(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

function openDb(indexedDB) {
  const req = indexedDB.open(DB_NAME, 1);
  req.onupgradeneeded = () => req.result.createObjectStore(DB_STORE);
  return idbRequest(req);
}

/**
 * The browser scan cache: one record of the IndexedDB database `privsvc-scan-cache`, under
 * `name` (the client passes `<app>/<project>`). Methods: `load()` (the blob, or undefined),
 * `save(bytes)`, `clear()`.
 */
export function browserScanCache(name) {
  const indexedDB = globalThis.indexedDB;
  if (!indexedDB) throw new PrivsvcError('browserScanCache needs IndexedDB (a browser page)');
  if (typeof name !== 'string' || name === '') throw new PrivsvcError('browserScanCache(name): a non-empty name');
  let db;
  const store = async (mode) => {
    db = db || (await openDb(indexedDB));
    return db.transaction(DB_STORE, mode).objectStore(DB_STORE);
  };
  return Object.freeze({
    kind: 'indexeddb',
    name,
    async load() {
      const value = await idbRequest((await store('readonly')).get(name));
      return value instanceof Uint8Array ? value : value instanceof ArrayBuffer ? new Uint8Array(value) : undefined;
    },
    async save(bytes) {
      await idbRequest((await store('readwrite')).put(bytes, name));
    },
    async clear() {
      await idbRequest((await store('readwrite')).delete(name));
    },
  });
}

/**
 * The Node.js file scan cache: one file at `path`, in a directory made 0700, written 0600
 * through a temporary file of an unpredictable name renamed over it. Methods as
 * `browserScanCache`.
 */
export function fileScanCache(path) {
  const proc = globalThis.process;
  const fs = proc && typeof proc.getBuiltinModule === 'function' ? proc.getBuiltinModule('node:fs') : undefined;
  if (!fs) throw new PrivsvcError('fileScanCache needs Node.js 22 (a browser page has browserScanCache)');
  if (typeof path !== 'string' || path === '') throw new PrivsvcError('fileScanCache(path): the file to keep the cache in');
  const paths = proc.getBuiltinModule('node:path');
  const { randomBytes } = proc.getBuiltinModule('node:crypto');
  const file = paths.resolve(path);
  const dir = paths.dirname(file);
  return Object.freeze({
    kind: 'file',
    path: file,
    async load() {
      try {
        return new Uint8Array(await fs.promises.readFile(file));
      } catch (e) {
        if (e && e.code === 'ENOENT') return undefined;
        throw new PrivsvcError(`cannot read the scan cache ${file}: ${e && e.message}`);
      }
    },
    async save(bytes) {
      await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
      const temp = paths.join(dir, `.${paths.basename(file)}.${randomBytes(8).toString('hex')}.tmp`);
      const handle = await fs.promises.open(temp, 'wx', 0o600);
      try {
        await handle.writeFile(bytes);
        await handle.sync();
      } finally {
        await handle.close();
      }
      try {
        await fs.promises.rename(temp, file);
      } catch (e) {
        await fs.promises.rm(temp, { force: true });
        throw e;
      }
    },
    async clear() {
      await fs.promises.rm(file, { force: true });
    },
  });
}

/**
 * The `scanCache` option as the adapter the wasm client calls (`load` resolves to bytes, empty
 * for none; `save` and `clear` to a string), or undefined for none. Default (`undefined`):
 * `fallback`, the device store's scan cache (none with memory stores). `false` turns it off.
 * @internal
 */
export function scanCacheAdapter(option, fallback) {
  if (option === false || option === null) return undefined;
  const store = option === undefined ? fallback : option;
  if (store === undefined) return undefined;
  for (const m of ['load', 'save', 'clear']) {
    if (typeof store[m] !== 'function') throw new PrivsvcError('`scanCache` must be false or a store with load(), save(bytes) and clear()');
  }
  return {
    load: async () => (await store.load()) ?? new Uint8Array(0),
    save: async (bytes) => {
      await store.save(bytes);
      return '';
    },
    clear: async () => {
      await store.clear();
      return '';
    },
  };
}
