// What differs between browsers and Node.js, filled in by the Node.js entry. The browser entry
// (index.js, also the default for bundlers) leaves it as it is; node.js loads node_setup.js
// first, which loads the wasm module from its file and says how to start the vault worker
// thread. So no module a bundler reads for a browser imports a Node.js built-in.
export const platform = {
  /** True once node_setup.js ran (Node.js, through the package's `node` entry). */
  isNode: false,
  /** Node.js: starts the vault worker (a `worker_threads` Worker running worker_node.js). */
  startWorker: undefined,
};
