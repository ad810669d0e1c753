// Loads the WebAssembly module once, in a page, a Web Worker, Node.js or a worker thread.
import init, * as raw from './pkg/privsvc_wasm.js';

const isNode = typeof process !== 'undefined' && process.versions != null && process.versions.node != null;

if (isNode) {
  const { readFile } = await import('node:fs/promises');
  const bytes = await readFile(new URL('./pkg/privsvc_wasm_bg.wasm', import.meta.url));
  raw.initSync({ module: bytes });
} else {
  await init({ module_or_path: new URL('./pkg/privsvc_wasm_bg.wasm', import.meta.url) });
}

export { raw, isNode };
