// Loads the WebAssembly module once for the page (or a worker that imports the package). In
// Node.js the package's `node` entry (node.js) loaded it already, from its file.
import init, * as raw from './pkg/privsvc_wasm.js';
import { platform } from './platform.js';

const { isNode } = platform;

if (!isNode) {
  if (typeof process !== 'undefined' && process.versions != null && process.versions.node != null) {
    throw new Error("privsvc: in Node.js import the package ('privsvc', its node.js entry), not index.js");
  }
  await init({ module_or_path: new URL('./pkg/privsvc_wasm_bg.wasm', import.meta.url) });
}

export { raw, isNode };
