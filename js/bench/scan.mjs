// Node.js benchmark (docs/BENCHMARKS.md, wasm section): the same sessions as the browser bench
// (test/browser/bench.mjs) in Node.js 22 with a file scan cache: a first session (client build =
// first listing, first myEntities), then a returning session that loads the cache. Needs the
// stack of `scripts/js-test.sh --bench` (PRIVSVC_WEB_URL). After the first session, the floor
// (bench/floor.mjs): its first listing's requests, recorded as the client sent them, fetched
// again with today's full rows by `fetch` and `JSON.parse` alone. Prints one line.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPrivateClient, devWallet, fileScanCache } from 'privsvc';
import { listingFloor, recordListing } from './floor.mjs';

const web = process.env.PRIVSVC_WEB_URL;
if (!web) {
  console.error('PRIVSVC_WEB_URL is not set: run scripts/js-test.sh --bench');
  process.exit(2);
}
const records = process.env.PRIVSVC_BENCH_RECORDS || '?';
const cfg = await fetch(`${web}/config.json`).then((x) => x.json());
const dir = mkdtempSync(join(tmpdir(), 'privsvc-node-scan-'));
const file = join(dir, 'notes.scan');
const wallet = devWallet(`0x${'7'.repeat(64)}`);

/** One session; `record`: its first listing's requests are recorded (`out.listing`). */
async function session(record) {
  if (record) recordListing(cfg.app);
  const t0 = performance.now();
  const c = await createPrivateClient({
    app: cfg.app,
    wallet,
    publicClient: `${web}/rpc`,
    relayers: [cfg.relayers[1]],
    schedule: cfg.schedule,
    scanCache: fileScanCache(file),
  });
  const t1 = performance.now();
  const listing = record ? globalThis.__privsvcListing.stop() : undefined;
  await c.myEntities();
  const t2 = performance.now();
  const out = { build: t1 - t0, first: t2 - t1, cache: c.scanCache, rss: Math.round(process.memoryUsage().rss / 2 ** 20), listing };
  c.close();
  return out;
}

try {
  const first = await session(true);
  const f = await listingFloor(`${web}/rpc`, first.listing.bodies);
  const back = await session(false);
  const ms = (x) => x.toFixed(0);
  const firstMs = first.build + first.first;
  const clientBytes = first.listing.answers === first.listing.bodies.length ? (first.listing.bytes / f.rows).toFixed(0) : '?';
  console.log(
    `# node ${process.version}, ${records} records: first session ${ms(firstMs)} ms / floor ${ms(f.ms)} ms = ${(firstMs / f.ms).toFixed(2)} x the floor (the floor: the first listing's ${f.requests} requests, ${f.pages} pages, ${f.rows} rows of ${(f.bytes / f.rows).toFixed(0)} bytes with every attribute, ${(f.bytes / 2 ** 20).toFixed(1)} MiB, fetch + JSON.parse only; the client's listing answers: ${clientBytes} bytes a row)`,
  );
  console.log(
    `# node ${process.version}, ${records} records: first session ${ms(first.build + first.first)} ms (client build, its first listing and first scan, ${ms(first.build)} ms + first myEntities ${ms(first.first)} ms), RSS ${first.rss} MiB | returning session ${ms(back.build + back.first)} ms (build with the cache ${ms(back.build)} ms + myEntities ${ms(back.first)} ms; cache ${back.cache.state}, ${(statSync(file).size / 2 ** 20).toFixed(1)} MiB)`,
  );
  if (back.cache.state !== 'resumed') process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit();
