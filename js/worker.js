// The vault worker of `WorkerVault` in browsers: a module Web Worker, started by core.js as
// `new Worker(new URL('./worker.js', import.meta.url), { type: 'module' })`, the one expression
// bundlers (Vite, webpack 5, Parcel) recognise and bundle as a worker. No top-level await in its
// module graph, so that a bundler's default worker format (an IIFE in Vite) builds it: the wasm
// module loads on the first message, and every message waits for it in arrival order.
import init from './pkg/privsvc_wasm.js';
import { handle, refuse } from './worker_ops.js';

let loaded = null;

// The first message (`start`) may carry the page's compiled module: the worker then neither
// fetches nor compiles it again.
const given = (m) => (m && m.op === 'start' && m.args && m.args[0] instanceof WebAssembly.Module ? m.args[0] : undefined);

self.onmessage = (ev) => {
  if (!loaded) loaded = init({ module_or_path: given(ev.data) ?? new URL('./pkg/privsvc_wasm_bg.wasm', import.meta.url) });
  const reply = (r, moving = []) => self.postMessage(r, moving);
  loaded.then(
    () => handle(ev.data, reply),
    (e) => refuse(ev.data, reply, e),
  );
};
