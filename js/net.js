// Every request the package sends itself: relayer, OHTTP relay and issuer calls (through
// `fetchAdapter`, handed to the wasm client) and ledger reads (through `ledgerReader`, whose
// `rpc` the wasm client calls). All use FETCH_INIT: no redirects, no referrer, no cookies or
// HTTP authentication, no HTTP cache.
import { PrivsvcError } from './errors.js';
import { raw } from './wasm.js';

/** The public test network's RPC, the default `publicClient`. */
export const DEFAULT_RPC_URL = JSON.parse(raw.rawConstants()).defaultRpcUrl;

/**
 * The options of every fetch the package makes, besides method, headers, body and signal:
 * `redirect: "manual"` (a redirect answer is refused and the redirected request never sent),
 * `referrerPolicy: "no-referrer"` (no `Referer` naming the app's page), `credentials: "omit"`
 * (no cookies, no HTTP authentication, no TLS client certificate) and `cache: "no-store"`
 * (nothing read from or written to the HTTP cache, which would otherwise outlive the session).
 * Browsers still send `Origin` on cross-origin POSTs: SECURITY.md says how an app hides it.
 */
export const FETCH_INIT = Object.freeze({
  redirect: 'manual',
  referrerPolicy: 'no-referrer',
  credentials: 'omit',
  cache: 'no-store',
});

/** Time limit of one ledger read, ms (as the Rust RpcLedger's). */
const LEDGER_TIMEOUT_MS = 30000;
/** Largest ledger answer read, bytes (a page of 200 entities with payloads fits many times). */
const LEDGER_MAX_BODY = 64 * 1024 * 1024;

function named(name, message, extra) {
  const e = new Error(message);
  e.name = name;
  return Object.assign(e, extra);
}

/** Whether `res` is a redirect answer (`opaqueredirect` in browsers, a 3xx status in Node.js). */
function isRedirect(res) {
  return res.type === 'opaqueredirect' || res.redirected === true || (res.status >= 300 && res.status < 400);
}

function headerOf(res, name) {
  return res.headers && typeof res.headers.get === 'function' ? res.headers.get(name) : null;
}

/** The platform fetch, looked up at call time (a test or an app may replace it later). */
const platformFetch = (url, init) => globalThis.fetch(url, init);

/**
 * The `fetch` option (docs/API.md §3.1) as the function the wasm client calls for relayer,
 * relay and issuer requests, `send(method, url, headers, body, timeoutMs, maxBody)` resolving to
 * `{ status, contentType, body }`: called with FETCH_INIT, a time limit, and a body size limit;
 * a redirect rejects with an error named `Redirected`, a body over the limit with one named
 * `TooLarge`.
 * Without a `fetch` option the platform fetch goes through the same adapter.
 * @internal
 */
export function fetchAdapter(fetchFn = platformFetch) {
  if (typeof fetchFn !== 'function') throw new PrivsvcError('`fetch` must be a fetch function');
  return async (method, url, headers, body, timeoutMs, maxBody) => {
    const res = await fetchFn(url, {
      method,
      headers: Object.fromEntries(headers),
      body,
      ...FETCH_INIT,
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (isRedirect(res)) throw named('Redirected', 'the server answered with a redirect, which privsvc does not follow');
    const declared = Number(headerOf(res, 'content-length'));
    if (declared > maxBody) throw named('TooLarge', 'answer too large', { size: declared });
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.length > maxBody) throw named('TooLarge', 'answer too large', { size: bytes.length });
    return { status: res.status, contentType: headerOf(res, 'content-type') ?? undefined, body: bytes };
  };
}

/** JSON text of `value` with bigints as 0x quantities (what an EIP-1193 answer may hold). */
function rpcJson(value) {
  return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? `0x${v.toString(16)}` : v));
}

/** The URL a `publicClient` names when privsvc should send its reads itself, else undefined. */
function urlOf(publicClient) {
  if (typeof publicClient === 'string') return publicClient;
  if (!publicClient || typeof publicClient !== 'object') return undefined;
  if (typeof publicClient.url === 'string') return publicClient.url;
  // A viem client over http(url): privsvc's own requests (FETCH_INIT) to the same URL. Any
  // other transport (custom(), webSocket, fallback) is used through its `request`.
  const t = publicClient.transport;
  if (t && typeof t.url === 'string' && (t.type === undefined || t.type === 'http')) return t.url;
  return undefined;
}

/**
 * A ledger reader over `publicClient`: an RPC URL; a viem public client (over `http(url)` the
 * reads go to that URL with FETCH_INIT, over any other transport, `custom(window.ethereum)`
 * included, through the client's `request`); an EIP-1193 provider (`request({ method, params
 * })`); or a reader this function made. `fetch` carries the reads to a URL (default: the
 * platform fetch). The reader has `request({ method, params })` (the JSON-RPC result) and the
 * helpers below; `rpc(method, paramsJson)` resolves to the JSON-RPC answer's text (the wasm
 * client calls `rpcBytes`, the same answer as bytes when the reads go to a URL, and lists pages
 * in JSON-RPC batches through `rpcBatchBytes`).
 */
export function ledgerReader(publicClient, fetchFn = platformFetch) {
  if (publicClient && publicClient.__privsvcReader) return publicClient;
  if (typeof fetchFn !== 'function') throw new PrivsvcError('`fetch` must be a fetch function');
  const url = urlOf(publicClient);
  let rpc;
  let rpcBytes;
  // Only for an RPC URL: a viem client or an EIP-1193 provider takes one call at a time.
  let rpcBatchBytes;
  if (url !== undefined) {
    let id = 0;
    /** POSTs the JSON-RPC `body` (`label` names it in errors) and resolves to the answer's bytes. */
    const post = async (label, body) => {
      let res;
      try {
        res = await fetchFn(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          ...FETCH_INIT,
          signal: AbortSignal.timeout(LEDGER_TIMEOUT_MS),
        });
      } catch (e) {
        throw named('Transport', `${label}: ${e && e.message ? e.message : String(e)}`);
      }
      if (isRedirect(res)) throw named('Transport', `${label}: the RPC answered with a redirect, which privsvc does not follow`);
      const declared = Number(headerOf(res, 'content-length'));
      if (declared > LEDGER_MAX_BODY) throw named('Transport', `${label}: answer too large`);
      const bytes = new Uint8Array(await res.arrayBuffer());
      if (bytes.length > LEDGER_MAX_BODY) throw named('Transport', `${label}: answer too large`);
      // 0x7b, 0x5b: an answer that is neither a JSON object nor an array is not JSON-RPC.
      if (!res.ok && bytes[0] !== 0x7b && bytes[0] !== 0x5b) throw named('Transport', `${label}: HTTP ${res.status}`);
      return bytes;
    };
    rpcBytes = (method, params) =>
      post(method, `{"jsonrpc":"2.0","id":${++id},"method":${JSON.stringify(method)},"params":${params}}`);
    rpcBatchBytes = (body) => post('JSON-RPC batch', body);
    const decoder = new TextDecoder();
    rpc = async (method, params) => decoder.decode(await rpcBytes(method, params));
  } else if (publicClient && typeof publicClient.request === 'function') {
    rpc = async (method, params) => {
      try {
        const result = await publicClient.request({ method, params: JSON.parse(params) });
        return rpcJson({ jsonrpc: '2.0', id: 0, result: result === undefined ? null : result });
      } catch (e) {
        const code = e && Number.isInteger(e.code) ? e.code : undefined;
        const message = (e && (e.details || e.shortMessage || e.message)) || String(e);
        if (code === undefined) throw named('Transport', `${method}: ${message}`);
        return rpcJson({ jsonrpc: '2.0', id: 0, error: { code, message, data: e.data } });
      }
    };
    rpcBytes = rpc;
  } else {
    throw new PrivsvcError(
      'publicClient must be an RPC URL, a viem public client or an EIP-1193 provider (request({ method, params }))',
    );
  }
  // The chain id is asked once per reader (the client needs it before the wasm client starts,
  // which asks for it too): a successful answer is kept.
  let chainIdAnswer;
  const keepChainId = (fn) => (method, params) => {
    if (method !== 'eth_chainId') return fn(method, params);
    if (!chainIdAnswer) {
      const asked = fn(method, params);
      chainIdAnswer = asked.then((a) => {
        const text = typeof a === 'string' ? a : new TextDecoder().decode(a);
        if (JSON.parse(text).result === undefined) chainIdAnswer = undefined;
        return a;
      });
      chainIdAnswer.catch(() => {
        chainIdAnswer = undefined;
      });
    }
    return chainIdAnswer.then((a) => (a instanceof Uint8Array ? a.slice() : a));
  };
  if (rpcBytes === rpc) {
    rpc = keepChainId(rpc);
    rpcBytes = rpc;
  } else {
    const bytesOnce = keepChainId(rpcBytes);
    rpcBytes = bytesOnce;
    const decoder = new TextDecoder();
    rpc = async (method, params) => decoder.decode(await bytesOnce(method, params));
  }
  const request = async ({ method, params = [] }) => {
    const answer = JSON.parse(await rpc(method, JSON.stringify(params)));
    if (answer.error) throw new PrivsvcError(`ledger RPC error: ${answer.error.message || JSON.stringify(answer.error)}`);
    return answer.result;
  };
  return Object.freeze({
    __privsvcReader: true,
    url,
    rpc,
    /**
     * `rpc` for the wasm client: the answer as bytes when the reads go to a URL (a listing page
     * is decoded from them without a string on either side), as text otherwise.
     * @internal
     */
    rpcBytes,
    /**
     * For the wasm client: POSTs a JSON-RPC batch body (a JSON array text) to the RPC URL and
     * resolves to the answer's bytes; undefined when the reads do not go to a URL.
     * @internal
     */
    rpcBatchBytes,
    request,
    /** The ledger's chain id. */
    async chainId() {
      return Number(BigInt(await request({ method: 'eth_chainId', params: [] })));
    },
    /** The code at `address` (`0x` for an ordinary account). */
    async getCode(address) {
      return request({ method: 'eth_getCode', params: [address, 'latest'] });
    },
    /** The timestamp (Unix seconds) of block `number`, or undefined when there is no such block. */
    async blockTimestamp(number) {
      const block = await request({ method: 'eth_getBlockByNumber', params: [`0x${BigInt(number).toString(16)}`, false] });
      return block && block.timestamp !== undefined ? Number(BigInt(block.timestamp)) : undefined;
    },
    /** The entity `key` with every field, or `undefined`. */
    async entity(key) {
      const select = {
        key: true, owner: true, creator: true, createdAt: true, updatedAt: true, expiresAt: true,
        creationFlags: true, contentType: true, payload: true, attributeSchema: true, attributes: true,
      };
      const page = await request({ method: 'arkiv_query', params: [`$key = key(${key})`, { select, limit: '0x1' }] });
      return page && page.data && page.data[0] ? page.data[0] : undefined;
    },
  });
}

/**
 * The reader of a `publicClient` option or of a `client` argument: a private client's own
 * reader, else `ledgerReader(value)`; the public test network when `value` is undefined.
 * @internal
 */
export function readerOf(value, fetchFn) {
  if (value === undefined) return ledgerReader(DEFAULT_RPC_URL, fetchFn);
  if (value && value.__privsvcClient) return value.reader;
  return ledgerReader(value, fetchFn);
}
