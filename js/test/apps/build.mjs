// The JS lane's apps from js/README.md, made as an app developer makes them, with the package
// from `npm pack` (packed and unpacked as node_modules/privsvc, what `npm install` puts there):
//   node build.mjs --types    type-checks README's TypeScript example and types/variants.ts with
//                             `tsc --strict` (skipLibCheck off) against viem's own types;
//   node build.mjs --bundles  builds README's first example exactly as it stands, with
//                             harness.js appended, with Vite (a production build) into
//                             build/vite and with webpack (production mode) into build/webpack;
//                             neither has a setting for the package.
// js/test/browser/chromium.mjs serves both builds, with the example's two public URLs (the
// ledger RPC, the OHTTP relay) pointed at the local stack, and runs them in Chromium. The
// bundlers, viem and TypeScript are this folder's pinned devDependencies (scripts/js-test.sh
// installs them).
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const pkgDir = fileURLToPath(new URL('../../', import.meta.url));
const out = join(here, 'build');
const mode = process.argv[2];
if (mode !== '--types' && mode !== '--bundles') {
  console.error('usage: node build.mjs --types | --bundles');
  process.exit(2);
}
const log = (m) => console.log(`# apps: ${m}`);

/** The first fenced block of `lang` after `after` in README.md. */
function readmeBlock(lang, after) {
  const text = readFileSync(join(pkgDir, 'README.md'), 'utf8');
  const from = text.indexOf(after);
  if (from < 0) throw new Error(`README.md has no ${JSON.stringify(after)}`);
  const m = text.slice(from).match(new RegExp('```' + lang + '\\n([\\s\\S]*?)\\n```'));
  if (!m) throw new Error(`README.md has no \`\`\`${lang} block after ${JSON.stringify(after)}`);
  return `${m[1]}\n`;
}

// The package as npm installs it.
const t0 = Date.now();
const packDir = mkdtempSync(join(tmpdir(), 'privsvc-pack-'));
try {
  const [{ filename }] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: pkgDir, encoding: 'utf8' }));
  execFileSync('tar', ['-xzf', join(packDir, filename), '-C', packDir]);
  rmSync(join(here, 'node_modules', 'privsvc'), { recursive: true, force: true });
  cpSync(join(packDir, 'package'), join(here, 'node_modules', 'privsvc'), { recursive: true });
} finally {
  rmSync(packDir, { recursive: true, force: true });
}
log(`packed and installed privsvc (${readdirSync(join(here, 'node_modules', 'privsvc')).length} entries) in ${Date.now() - t0} ms`);

if (mode === '--types') {
  const t1 = Date.now();
  rmSync(join(out, 'types'), { recursive: true, force: true });
  mkdirSync(join(out, 'types'), { recursive: true });
  writeFileSync(join(out, 'types', 'readme.ts'), readmeBlock('ts', '## TypeScript'));
  try {
    execFileSync(join(here, 'node_modules', '.bin', 'tsc'), ['-p', join(here, 'types', 'tsconfig.json')], { stdio: 'inherit' });
  } catch {
    console.error('# apps: tsc --strict refused the TypeScript app (above)');
    process.exit(1);
  }
  log(`tsc --strict accepted README's TypeScript example and types/variants.ts in ${Date.now() - t1} ms`);
  process.exit(0);
}

// README's example, bundled twice.
for (const d of ['src', 'vite', 'webpack']) rmSync(join(out, d), { recursive: true, force: true });
const src = join(out, 'src');
mkdirSync(src, { recursive: true });
const example = readmeBlock('js', '<!-- The JS lane builds this example');
writeFileSync(join(src, 'main.js'), example + readFileSync(join(here, 'harness.js'), 'utf8'));
const page = (script) => `<!doctype html>\n<meta charset="utf-8">\n<title>privsvc app</title>\n<link rel="icon" href="data:,">\n<p>privsvc app</p>\n${script}\n`;
writeFileSync(join(src, 'index.html'), page('<script type="module" src="./main.js"></script>'));

// A warning fails the build too: it is how a bundler says that a Node.js built-in was left out
// of the bundle ("externalized for browser compatibility") or that the worker was not bundled.
const t2 = Date.now();
const { build, createLogger } = await import('vite');
const logger = createLogger('warn');
const viteWarnings = [];
const warn = logger.warn;
logger.warn = (msg, opts) => {
  viteWarnings.push(msg);
  warn(msg, opts);
};
await build({
  configFile: false,
  root: src,
  logLevel: 'warn',
  customLogger: logger,
  build: { outDir: join(out, 'vite'), emptyOutDir: true },
});
if (viteWarnings.length) {
  console.error(`# apps: vite warned ${viteWarnings.length} times (above)`);
  process.exit(1);
}
log(`vite build in ${Date.now() - t2} ms`);

const t3 = Date.now();
const { default: webpack } = await import('webpack');
const stats = await new Promise((resolve, reject) => {
  webpack({
    mode: 'production',
    context: src,
    entry: './main.js',
    output: { path: join(out, 'webpack'), filename: 'main.js', clean: true },
    performance: { hints: false },
  }).run((err, s) => (err ? reject(err) : resolve(s)));
});
if (stats.hasErrors() || stats.hasWarnings()) {
  console.error(stats.toString({ all: false, errors: true, warnings: true }));
  process.exit(1);
}
writeFileSync(join(out, 'webpack', 'index.html'), page('<script src="./main.js"></script>'));
log(`webpack build in ${Date.now() - t3} ms`);
