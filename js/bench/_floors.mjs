import { createPrivateClient, devWallet } from '../node.js';
import { listingFloor, recordListing } from '/work/main/js/bench/floor.mjs';
const web = process.env.WEB;
const cfg = await fetch(`${web}/config.json`).then((x) => x.json());
recordListing(cfg.app);
const t0 = performance.now();
const c = await createPrivateClient({ app: cfg.app, wallet: devWallet(`0x${'7'.repeat(64)}`), publicClient: `${web}/rpc`, relayers: [cfg.relayers[1]], schedule: cfg.schedule, memoryStores: true });
const t1 = performance.now();
const rec = globalThis.__privsvcListing.stop();
c.close();
console.log('client first session', (t1 - t0).toFixed(0), 'ms; requests', rec.bodies.length);
console.log(JSON.stringify(JSON.parse(rec.bodies[0])).slice(0, 400));
// The floor as is (full rows) and with the client's own select (lean), alternating.
const src = listingFloor.toString();
const lean = eval('(' + src.replace(/const FULL_ROWS = \{[^}]*\};/, 'const FULL_ROWS = undefined;').replace('select: FULL_ROWS', '...(FULL_ROWS ? { select: FULL_ROWS } : {})') + ')');
for (let i = 0; i < 3; i++) {
  const f = await listingFloor(`${web}/rpc`, rec.bodies);
  const l = await lean(`${web}/rpc`, rec.bodies);
  console.log(`full rows ${f.ms.toFixed(0)} ms ${(f.bytes / f.rows).toFixed(0)} B/row | client's select ${l.ms.toFixed(0)} ms ${(l.bytes / l.rows).toFixed(0)} B/row`);
}
