import * as m from './index.js';
const [web, cacheFile] = process.argv.slice(2);
const cfg = await fetch(`${web}/config.json`).then((x) => x.json());
for (const round of ['first', 'returning']) {
  const t0 = performance.now();
  const c = await m.createPrivateClient({ app: cfg.app, wallet: m.devWallet(), publicClient: `${web}/rpc`, relayers: [cfg.relayers[1]], schedule: cfg.schedule, isolateKeys: false, scanCache: m.fileScanCache(cacheFile) });
  const t1 = performance.now();
  const mine = await c.myEntities();
  const t2 = performance.now();
  console.log(`node ${round}: build ${(t1 - t0).toFixed(0)} ms, first myEntities ${(t2 - t1).toFixed(0)} ms (${mine.length}), rss ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`);
  c.close?.();
}
process.exit(0);
