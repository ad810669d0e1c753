// Summarizes DevTools CPU profiles (`.cpuprofile`, e.g. from PRIVSVC_BENCH_PROFILE=DIR with
// test/browser/bench.mjs): for each file, the total sampled time and the functions with the most
// self time. Usage: node bench/profile-top.mjs [--top N] FILE...
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
let top = 25;
if (args[0] === '--top') {
  top = Number(args[1]);
  args.splice(0, 2);
}
for (const file of args) {
  const p = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const deltas = p.timeDeltas;
  let total = 0;
  p.samples.forEach((id, i) => {
    const dt = (deltas[i + 1] ?? 0) / 1000;
    const n = byId.get(id);
    const f = n.callFrame;
    const name = `${f.functionName || '(anonymous)'} ${f.url ? f.url.split('/').pop() : ''}`.trim();
    self.set(name, (self.get(name) ?? 0) + dt);
    if (f.functionName !== '(idle)' && f.functionName !== '(program)') total += dt;
  });
  console.log(`== ${file}: ${total.toFixed(0)} ms sampled outside idle/program`);
  [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top).forEach(([n, ms]) => console.log(`${ms.toFixed(0).padStart(8)} ms  ${n}`));
}
