// createPrivateClient: the JS client over the wasm building blocks.
//
// This build writes straight to relayers that require no token and reads the project's listing
// with payloads from the ledger. Token issuance, OHTTP and cover batches live in the Rust client
// (privsvc-client); they come to JS with its wasm build, and until then the options that need
// them are refused with a PrivsvcError rather than ignored.
import { raw } from './wasm.js';
import {
  PrivsvcError,
  NoTokenReady,
  API_VERSION,
  checkRecord,
  checkRarity as checkRarityOf,
  expirySeconds,
  expiryBucket,
  fromWire,
  inBrowser,
  ledgerReader,
  signOwnershipProof,
  toWire,
  vaultFromWallet,
} from './index.js';

const DEFAULTS = {
  delayMs: [0, 20000],
  minAnonymity: 1,
  pollMs: 2000,
  strict: false,
  rarityK: 3,
  coverBatches: 2,
  tokens: 'auto',
  trustedRelayersOnly: false,
};

/** The public test network's RPC, the default `publicClient`. */
export const DEFAULT_RPC_URL = 'https://rpc.tiramisu.db-chain.testnet.arkiv.network';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function bytesFromHex(hex) {
  const s = hex.startsWith('0x') ? hex.slice(2) : hex;
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function randomBetween(lo, hi) {
  const buf = new Uint32Array(1);
  globalThis.crypto.getRandomValues(buf);
  return lo + Math.floor((buf[0] / 2 ** 32) * (hi - lo + 1));
}

/** Ledger attributes `[{ name, type, value }]` in their wire form. */
function ledgerWire(list = []) {
  const out = {};
  for (const { name, type, value } of list) {
    if (type === 'u64' || type === 'u256') out[name] = { type, value: BigInt(value).toString() };
    else if (type === 'i32') out[name] = { type, value: Number(value) };
    else out[name] = { type, value };
  }
  return out;
}

function quantity(n) {
  return `0x${BigInt(n).toString(16)}`;
}

/** Every entity of `project` at one pinned block, with payloads (the same query for every user). */
async function listProject(reader, project) {
  const select = {
    key: true, owner: true, creator: true, createdAt: true, updatedAt: false, expiresAt: true,
    creationFlags: false, contentType: true, payload: true, attributeSchema: false, attributes: true,
  };
  const expression = `project = str('${project.replace(/'/g, "''")}')`;
  let atBlock;
  let cursor;
  const out = [];
  for (let page = 0; page < 10000; page++) {
    const options = { select, limit: quantity(200) };
    if (atBlock !== undefined) options.atBlock = atBlock;
    if (cursor) options.cursor = cursor;
    const r = await reader.request({ method: 'arkiv_query', params: [expression, options] });
    if (atBlock === undefined) atBlock = r.blockNumber;
    out.push(...(r.data || []));
    if (!r.cursor) break;
    cursor = r.cursor;
  }
  return { block: atBlock === undefined ? 0 : Number(BigInt(atBlock)), entities: out };
}

async function relayerInfo(url, fetchFn) {
  const res = await fetchFn(`${url.replace(/\/$/, '')}/v1/info`);
  if (!res.ok) throw new PrivsvcError(`relayer ${url} answered HTTP ${res.status} to /v1/info`);
  const info = await res.json();
  if (info.version !== API_VERSION) throw new PrivsvcError(`relayer ${url} speaks ${info.version}, not ${API_VERSION}`);
  return info;
}

/**
 * Creates a client (SPEC `createPrivateClient`). Derives the keys from one wallet signature
 * (asked twice and compared) unless a `vault` is given, and contacts the relayers.
 */
export async function createDirectClient(options = {}) {
  const o = { ...DEFAULTS, ...options };
  if (!o.app || typeof o.app !== 'string') throw new PrivsvcError('createPrivateClient: `app` is required');
  if (!o.wallet && !o.vault) throw new PrivsvcError('createPrivateClient: give a `wallet` or a `vault`');
  if (o.ohttpRelay) {
    throw new PrivsvcError('ohttpRelay is not supported by this build of the JS package yet; leave it out or use the Rust client');
  }
  if (!o.relayers || o.relayers.length === 0) {
    throw new PrivsvcError('relayer discovery from heartbeats is not in this build of the JS package yet; pass `relayers`');
  }
  const fetchFn = o.fetch || globalThis.fetch.bind(globalThis);
  const reader = ledgerReader(o.publicClient || DEFAULT_RPC_URL, fetchFn);
  const isolateKeys = o.isolateKeys === undefined ? inBrowser : o.isolateKeys;
  const vault = o.vault || (await vaultFromWallet(o.wallet, o.app, { isolateKeys, publicClient: reader, chainId: o.chainId }));
  const project = o.project || o.app;

  const relayerList = [];
  for (const url of o.relayers) {
    try {
      const info = await relayerInfo(url, fetchFn);
      relayerList.push({ url, address: info.address, bad: false, info });
    } catch (e) {
      relayerList.push({ url, address: undefined, bad: true, info: undefined, error: e.message });
    }
  }
  if (!relayerList.some((r) => !r.bad)) throw new PrivsvcError('no relayer available: none of the given relayers answered /v1/info');

  let listing = { block: 0, entities: [] };
  const mine = new Map(); // entityKey -> MyRecord
  const refs = new Map(); // entityKey -> ref

  async function scan() {
    listing = await listProject(reader, project);
    const live = listing.entities.filter((e) => e.attributes);
    const tagTexts = live.map((e) => {
      const t = e.attributes.find((a) => a.name === 'tag');
      return t ? String(t.value) : '';
    });
    const opened = await vault.openTags(tagTexts);
    const found = [];
    for (let i = 0; i < live.length; i++) {
      if (!opened[i]) continue;
      const record = await verifyMine(live[i], opened[i]);
      if (record) found.push(record);
    }
    mine.clear();
    for (const r of found) {
      mine.set(r.entityKey.toLowerCase(), r);
      refs.set(r.entityKey.toLowerCase(), r.ref);
    }
    return found;
  }

  async function verifyMine(entity, ref) {
    try {
      const owner = await vault.addressOf(ref);
      if (!entity.owner || entity.owner.toLowerCase() !== owner.toLowerCase()) return undefined;
      const wire = ledgerWire(entity.attributes);
      const payload = bytesFromHex(entity.payload || '0x');
      const env = JSON.parse(raw.rawOpenEnvelope(payload, JSON.stringify(wire)));
      if (env.signer.toLowerCase() !== owner.toLowerCase() || env.app !== o.app) return undefined;
      if (o.trustedRelayersOnly && !relayerList.some((r) => r.address && r.address.toLowerCase() === String(entity.creator).toLowerCase())) {
        return undefined;
      }
      let data = bytesFromHex(env.data);
      if (env.enc) data = await vault.decrypt(ref, data);
      const attributes = fromWire(wire);
      return {
        key: entity.key,
        entityKey: entity.key,
        owner: entity.owner,
        creator: entity.creator,
        app: env.app,
        contentType: env.ct,
        data,
        toText() {
          return new TextDecoder().decode(data);
        },
        toJson() {
          return JSON.parse(new TextDecoder().decode(data));
        },
        attributes,
        createdAt: entity.createdAt === undefined ? undefined : Number(BigInt(entity.createdAt)),
        expiresAt: entity.expiresAt === undefined ? undefined : Number(BigInt(entity.expiresAt)),
        expSeconds: env.exp,
        encrypted: env.enc,
        envelope: new TextDecoder().decode(payload),
        ref,
      };
    } catch {
      return undefined;
    }
  }

  function check({ attributes, expires, payload } = {}) {
    return checkRecord({ attributes, expires, payload });
  }

  function checkRarity(attributes, k = o.rarityK) {
    const existing = listing.entities.filter((e) => e.attributes).map((e) => {
      const w = ledgerWire(e.attributes);
      delete w.tag;
      return fromWire(w);
    });
    return checkRarityOf({ project, ...attributes }, existing, k);
  }

  async function submit(relayer, request) {
    const base = relayer.url.replace(/\/$/, '');
    const res = await fetchFn(`${base}/v1/records`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(request),
    });
    const body = await res.json().catch(() => ({}));
    if (res.status !== 202) throw new PrivsvcError(`relayer ${relayer.url} refused the record (HTTP ${res.status}): ${body.error || ''}`);
    const deadline = Date.now() + (o.inclusionTimeoutMs || 120000);
    for (;;) {
      await sleep(o.pollMs);
      const s = await fetchFn(`${base}/v1/records/${body.id}`).then((r) => r.json());
      if (s.state === 'written') return s;
      if (s.state === 'failed') throw new PrivsvcError(`relayer ${relayer.url}: the record failed: ${s.error}`);
      if (Date.now() > deadline) throw new PrivsvcError(`relayer ${relayer.url} did not write the record in time`);
    }
  }

  async function createEntity({ payload, contentType, attributes = {}, expires, scope, encrypt = false } = {}) {
    const data0 = payload instanceof Uint8Array ? payload : new TextEncoder().encode(String(payload ?? ''));
    if (!contentType) throw new PrivsvcError('createEntity: contentType is required');
    const seconds = expirySeconds(expires);
    const exp = expiryBucket(seconds);
    const ref = scope === undefined ? await vault.newRecord() : await vault.scopeRecord(scope);
    const data = encrypt ? await vault.encrypt(ref, data0) : data0;
    const warnings = check({ attributes, expires: seconds, payload: data });
    if (o.rarityK > 0) warnings.push(...checkRarity(attributes));
    if (o.strict && warnings.length > 0) {
      throw new PrivsvcError(`strict mode: the record has fingerprinting warnings: ${warnings.map((w) => w.code).join(', ')}`);
    }
    const wire = toWire(attributes);
    wire.project = { type: 'str', value: project };
    wire.tag = { type: 'str', value: await vault.makeTag(ref) };
    const owner = await vault.addressOf(ref);
    const signer = await vault.signer(ref);
    const hour = raw.rawHourOf(Math.floor(Date.now() / 1000));
    const envelope = await signer.signEnvelope({ app: o.app, exp, hour, ct: contentType, enc: encrypt, data }, wire);
    const usable = relayerList.filter((r) => !r.bad && !r.info.tokensRequired);
    if (usable.length === 0) {
      throw new NoTokenReady('every relayer requires a token, and token issuance is not in this build of the JS package yet');
    }
    const request = { app: o.app, owner, envelope, attributes: wire, expSeconds: exp };
    if (o.minAnonymity > 1) {
      request.minAnonymity = o.minAnonymity;
      request.maxHoldMs = o.maxHoldMs || 600000;
    }
    const [lo, hi] = o.delayMs;
    if (hi > 0) await sleep(randomBetween(lo, hi));
    let lastError;
    for (const relayer of usable.sort(() => randomBetween(0, 1) - 0.5)) {
      try {
        const s = await submit(relayer, request);
        // Believe the ledger, not the relayer: find the record in the listing, count its batch.
        for (let i = 0; i < 10; i++) {
          const found = await scan();
          const rec = found.find((r) => r.entityKey.toLowerCase() === String(s.entityKey).toLowerCase());
          if (rec) {
            const batchSize = listing.entities.filter((e) => e.creator === rec.creator && e.createdAt === listing.entities.find((x) => x.key === rec.entityKey).createdAt).length;
            return { entityKey: rec.entityKey, owner, txHash: s.txHash, relayer: relayer.url, batchSize, recovered: false, warnings };
          }
          await sleep(o.pollMs);
        }
        relayer.bad = true;
        lastError = new PrivsvcError(`relayer ${relayer.url} said written but the record is not on the ledger`);
      } catch (e) {
        lastError = e;
      }
    }
    throw lastError || new PrivsvcError('every relayer failed');
  }

  async function myEntities({ where } = {}) {
    let found = await scan();
    if (where) {
      found = found.filter((r) => Object.entries(where).every(([k, v]) => r.attributes[k] === v));
    }
    return found.sort((a, b) => (b.createdAt ?? 0) - (a.createdAt ?? 0));
  }

  async function proveOwnership(entityKey, { challenge, verifier, ttlSeconds } = {}) {
    let ref = refs.get(String(entityKey).toLowerCase());
    if (!ref) {
      await scan();
      ref = refs.get(String(entityKey).toLowerCase());
    }
    if (!ref) throw new PrivsvcError(`entity ${entityKey} is not one of this vault's records`);
    const signer = await vault.signer(ref);
    return signOwnershipProof(signer, { entityKey, challenge, verifier, ttlSeconds, chainId: await reader.chainId() });
  }

  await scan();
  return {
    app: o.app,
    project,
    vault,
    publicClient: reader,
    createEntity,
    myEntities,
    proveOwnership,
    check,
    checkRarity,
    async scopeAddress(name) {
      return vault.addressOf(await vault.scopeRecord(name));
    },
    relayers() {
      return relayerList.map(({ url, address, bad, info }) => ({ url, address, bad, info }));
    },
    relayerAddresses() {
      return relayerList.filter((r) => !r.bad && r.address).map((r) => r.address);
    },
  };
}
