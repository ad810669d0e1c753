// Loads the WebAssembly module once for the page (or a worker that imports the package). In
// Node.js the package's `node` entry (node.js) loaded it already, from its file.
import init, * as raw from './pkg/privsvc_wasm.js';
import { platform } from './platform.js';

const { isNode } = platform;

/**
 * The compiled module (browsers): the vault worker is started with it, so that it does not
 * fetch and compile the module a second time.
 */
let wasmModule;

/**
 * Compiles the module at `url` while it downloads; from the same answer's bytes when the
 * server's type is not `application/wasm` (one download either way, as wasm-bindgen's loader).
 */
async function compile(url) {
  const res = await fetch(url);
  try {
    return await WebAssembly.compileStreaming(res.clone());
  } catch {
    return WebAssembly.compile(await res.arrayBuffer());
  }
}

if (!isNode) {
  if (typeof process !== 'undefined' && process.versions != null && process.versions.node != null) {
    throw new Error("privsvc: in Node.js import the package ('privsvc', its node.js entry), not index.js");
  }
  wasmModule = await compile(new URL('./pkg/privsvc_wasm_bg.wasm', import.meta.url));
  await init({ module_or_path: wasmModule });
}

export { raw, isNode, wasmModule };
