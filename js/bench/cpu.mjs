// Where the machine's CPU goes during a bench session (test/browser/bench.mjs with
// PRIVSVC_BENCH_CPU=1, Linux only): every 100 ms the CPU time of the browser's threads and of
// the local stack (the devnet and the relayers), read from /proc, by component. A first session
// on a small machine is bounded by the CPU of all of them together, not by one thread: these
// figures say which component's work to cut.
import { readFileSync, readdirSync } from 'node:fs';

/** /proc's clock ticks (USER_HZ, 100 on Linux) in ms. */
const TICK_MS = 10;

/** The parent of process `pid` (undefined when it ended). */
export function parentOf(pid) {
  try {
    // Fields after the command name (which may hold spaces) start after ')': state, ppid.
    return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop().trim().split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** Whether process `pid` descends from `root`. */
export function descendsFrom(pid, root) {
  for (let p = pid, hops = 0; p > 1 && hops < 16; p = parentOf(p), hops += 1) if (p === root) return true;
  return false;
}

/** User and system CPU time of a `/proc/.../stat` text, ms. */
function cpuMs(stat) {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/** The component a thread of a renderer process counts for, from its name and whether it is the main thread. */
function rendererPart(stat, main) {
  if (main) return 'renderer main threads (the page)';
  const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  if (name.startsWith('DedicatedWorker')) return 'the vault worker';
  if (name.startsWith('ThreadPoolForeg')) return 'renderer pool threads (compilers, GC)';
  return 'renderer, other threads';
}

/**
 * Samples the CPU time of the processes under the browser `browserPid` (renderer threads apart)
 * and of the local stack every `everyMs` until `stop()`. `between(from, to)` (epoch ms) is the
 * CPU each component used in that span, ms (a Map), interpolated between samples.
 */
export function startCpuSampler(browserPid, everyMs = 100) {
  const kinds = new Map();
  const kindOf = (pid) => {
    if (!kinds.has(pid)) {
      let kind;
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        if (/(^|\/)local_stack\0/.test(cmd)) kind = 'stack';
        else if (descendsFrom(pid, browserPid)) kind = cmd.includes('--type=renderer') ? 'renderer' : 'browser';
      } catch {
        kind = undefined;
      }
      // A browser process is asked again: a child just forked shows its parent's command line
      // until it names its type.
      if (kind !== 'browser') kinds.set(pid, kind);
      return kind;
    }
    return kinds.get(pid);
  };
  // Each thread's (or process's) cumulative CPU by sample: threads come and go (the vault
  // worker ends with its session), so a span is summed over threads, each counted from where
  // it was at the span's start (0 if it did not exist yet) to where it was at its end (its last
  // figure if it ended).
  const series = new Map();
  const times = [];
  const read = () => {
    const at = Date.now();
    times.push(at);
    const note = (key, part, ms) => {
      if (!series.has(key)) series.set(key, { part, points: [] });
      series.get(key).points.push([at, ms]);
    };
    for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
      const kind = kindOf(Number(pid));
      try {
        if (kind === 'renderer') {
          for (const tid of readdirSync(`/proc/${pid}/task`)) {
            const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
            note(`${pid}/${tid}`, rendererPart(stat, tid === pid), cpuMs(stat));
          }
        } else if (kind) {
          const part = kind === 'stack' ? 'ledger and relayers (local_stack)' : 'browser and network service';
          note(pid, part, cpuMs(readFileSync(`/proc/${pid}/stat`, 'utf8')));
        }
      } catch {
        // The process or thread ended between the listing and the read.
      }
    }
  };
  read();
  const timer = setInterval(read, everyMs);
  /** A thread's cumulative CPU at epoch ms `t`, interpolated between its samples. */
  const valueAt = ({ points }, t) => {
    const [firstAt, firstMs] = points[0];
    if (t <= firstAt) {
      // Born since the sample before its first one: from 0 then.
      const before = times.filter((x) => x < firstAt).pop();
      if (before === undefined || t <= before) return before === undefined ? firstMs : 0;
      return (firstMs * (t - before)) / (firstAt - before);
    }
    for (let i = 1; i < points.length; i += 1) {
      const [bAt, bMs] = points[i];
      if (t <= bAt) {
        const [aAt, aMs] = points[i - 1];
        return aMs + ((bMs - aMs) * (t - aAt)) / (bAt - aAt);
      }
    }
    return points[points.length - 1][1];
  };
  return {
    stop() {
      clearInterval(timer);
    },
    between(from, to) {
      const parts = new Map();
      for (const thread of series.values()) {
        const ms = valueAt(thread, to) - valueAt(thread, from);
        if (ms > 0) parts.set(thread.part, (parts.get(thread.part) ?? 0) + ms);
      }
      return parts;
    },
  };
}

/** One line of `between`'s figures over `[from, to]`: the total, the cores it kept busy, each component. */
export function cpuLine(parts, from, to, cores) {
  const total = [...parts.values()].reduce((a, b) => a + b, 0);
  const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
  const each = [...parts.entries()].filter(([, ms]) => ms >= 5).sort((a, b) => b[1] - a[1]).map(([p, ms]) => `${p} ${s(ms)}`);
  return `${s(total)} of CPU in ${s(to - from)} (${(total / (to - from)).toFixed(2)} of ${cores} cores): ${each.join(', ')}`;
}
