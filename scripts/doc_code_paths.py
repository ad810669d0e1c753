"""The code-path half of scripts/check-citations.py: every file, crate path and type that
README.md, SECURITY.md and docs/*.md name in backticks must exist in the repository.

- A file path (a token with a "/" ending in a source or document extension, or naming a
  directory of the repository) must exist from the repository root, from crates/ (docs name
  crate files as `privsvc-client/src/create.rs`) or from js/.
- A Rust path `privsvc_xxx::...::Name` must name a crate of the workspace, and `Name` (the last
  segment, without `()` or generics) must be defined in that crate: an item, a variant, a
  field or a method of that name.
- A bare type name (`CamelCase`, alone or followed by `::member` or `.member`) must be defined
  somewhere in the workspace's Rust or JS sources, unless it is a well-known name of the
  standard library, a dependency or the platform (ALLOWED).

A line that names something on purpose that does not exist (a removed type in a history
note) carries "check-citations: ignore" itself, or "check-citations: ignore-next-line" on the
line before it. Python 3 standard library only.
"""

import os
import re

DOCUMENTS_DIR = "docs"
TOKEN = re.compile(r"`([^`\n]+)`")
FILE_EXT = re.compile(r"\.(rs|js|mjs|cjs|ts|md|toml|sh|py|json|html|css)$")
RUST_PATH = re.compile(r"^(privsvc(?:_[a-z]+)*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
CAMEL = re.compile(r"^([A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[A-Z][a-z]+[A-Z][A-Za-z0-9]*)(?:(?:::|\.)[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?$")
DEFINITION = r"(?:struct|enum|trait|type|fn|const|static|mod|union|macro_rules!|class|function|interface|let|var)\s+{name}\b"

# Names of the standard library, dependencies and platforms that docs may name in backticks.
ALLOWED = {
    "JoinHandle", "AbortHandle", "HashMap", "BTreeMap", "BTreeSet", "HashSet", "VecDeque",
    "TempDir", "SocketAddr", "IpAddr", "PathBuf", "OnceCell", "RwLock", "MutexGuard",
    "IndexedDB", "WebCrypto", "TypeScript", "JavaScript", "WebAssembly", "SharedArrayBuffer",
    "TextDecoder", "TextEncoder", "AbortController", "AbortSignal", "ReadableStream",
    "PublicClient", "WalletClient", "ViemLikeWalletClient", "LocalAccount",
    "ArrayBuffer", "Uint8Array", "BigInt", "ExitCode", "StdRng", "OsRng", "ThreadRng",
    "SystemTime", "UnixTime", "EntityData", "DevnetHandle", "TcpListener", "TcpStream",
    "ServeDir", "CorsLayer", "RequestBodyLimitLayer", "SqliteConnection", "Connection",
    "ErrorKind", "TryLockError", "NonZeroU64", "RangeInclusive", "SignatureError",
    "PrivateKey", "SigningKey", "VerifyingKey", "RecoveryId", "EcdsaSignature", "HttpError",
    "ServiceWorker", "SharedWorker", "BroadcastChannel", "WebLocks", "LockManager",
    "EventTarget", "ErrorEvent", "MessageEvent", "PromiseRejectionEvent",
    "PushSubscription", "DOMException", "XMLHttpRequest", "FormData", "URLSearchParams",
    "WireGuard", "GitHub", "OpenSSL", "BoringSSL", "SQLite", "PostgreSQL", "MacOS",
    "JsValue", "JsFuture", "JsCast",
    # Names that are not Rust or JS items: the EIP-712 type of the key derivation, the
    # Arkiv node's event, the original specification's error class.
    "KeyDerivation", "EntityCreated", "ArkognitoError",
}

# Paths the build or the scripts create (not in the repository until they run).
GENERATED = ("js/.tools", "js/pkg", "js/node_modules", "target/", "fuzz/last-run.md")


def _defined_names(root, paths):
    """Every identifier defined in the given source files (items, variants, fields, exports)."""
    names = set()
    ident = re.compile(r"\b(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:struct|enum|trait|type|fn|const|static|mod|union|class|function|interface|let|var|get|set)\s+([A-Za-z_][A-Za-z0-9_]*)")
    variant = re.compile(r"^\s+([A-Z][A-Za-z0-9_]*)\s*(?:[({,=]|$)")
    field = re.compile(r"^\s+(?:pub(?:\([^)]*\))?\s+)?([a-z_][a-z0-9_]*)\s*:")
    js_export = re.compile(r"\bexport\s+(?:default\s+)?(?:async\s+)?(?:class|function\*?|const|let|var|interface|type)\s+([A-Za-z_$][A-Za-z0-9_$]*)")
    js_method = re.compile(r"^\s+(?:static\s+)?(?:async\s+)?([A-Za-z_$][A-Za-z0-9_$]*)\s*\([^)]*\)\s*[:{]")
    reexport = re.compile(r"\bpub\s+use\s+[^;]*?\b(?:as\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*[,;}]")
    for p in paths:
        try:
            with open(os.path.join(root, p), encoding="utf-8") as f:
                for line in f:
                    for rx in (ident, js_export, reexport):
                        names.update(m.group(1) for m in rx.finditer(line))
                    for rx in (variant, field, js_method):
                        m = rx.match(line)
                        if m:
                            names.add(m.group(1))
        except (OSError, UnicodeDecodeError):
            continue
    return names


def check(root, files, ignore, ignore_next):
    """Problems, as "file:line: problem" strings, and how many names were checked."""
    sources = [p for p in files if p.endswith((".rs", ".js", ".mjs", ".ts"))]
    everywhere = _defined_names(root, sources)
    by_crate = {}

    def crate_names(crate):
        if crate not in by_crate:
            if crate == "privsvc":
                prefix = "src/"
            else:
                prefix = "crates/" + crate.replace("_", "-") + "/src/"
            crate_files = [p for p in sources if p.startswith(prefix)]
            by_crate[crate] = _defined_names(root, crate_files) if crate_files else None
        return by_crate[crate]

    docs = [p for p in files if p in ("README.md", "SECURITY.md")
            or (p.startswith(DOCUMENTS_DIR + "/") and p.endswith(".md") and p.count("/") == 1)]
    problems = []
    checked = 0
    for rel in docs:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            lines = f.read().split("\n")
        in_fence = False
        skip_next = False
        for number, line in enumerate(lines, 1):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            if skip_next:
                skip_next = False
                continue
            if ignore_next in line:
                skip_next = True
                continue
            if ignore in line:
                continue
            where = f"{rel}:{number}"
            for m in TOKEN.finditer(line):
                token = m.group(1).strip()
                problem = _check_token(root, token, everywhere, crate_names)
                if problem is None:
                    continue
                checked += 1
                if problem:
                    problems.append(f"{where}: {problem}")
    return problems, checked


def _check_token(root, token, everywhere, crate_names):
    """None: not a code name; "": it exists; else what is wrong."""
    if any(c in token for c in " <>*{}…$|\"'=,") or "://" in token:
        return None
    bare = token.rstrip("/")
    # A file or directory of the repository.
    if "/" in bare and (FILE_EXT.search(bare) or bare.split("/")[0] in (
            "crates", "js", "examples", "scripts", "docs", "conformance", "fuzz", "tests", "src")):
        if bare.startswith(("/", "~", "..")) or bare.startswith(GENERATED):
            return None
        for base in ("", "crates", "js"):
            if os.path.exists(os.path.join(root, base, bare)):
                return ""
        return f"`{token}` names a file that does not exist"
    # A Rust path of the workspace.
    m = RUST_PATH.match(token)
    if m:
        crate = m.group(1)
        names = crate_names(crate)
        if names is None:
            return f"`{token}`: no crate {crate} in the workspace"
        last = m.group(2).split("::")[-1]
        if last not in names and last not in everywhere:
            return f"`{token}`: {last} is not defined in {crate}"
        return ""
    # A type name.
    m = CAMEL.match(token)
    if m:
        name = m.group(1)
        if name in ALLOWED or name in everywhere:
            return ""
        return f"`{token}`: {name} is not defined in the repository's sources"
    return None


def self_test():
    """Runs the check on a small tree with one name of each kind that exists and one that does
    not; returns the problems found (three are expected)."""
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "crates", "privsvc-demo", "src"))
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "crates", "privsvc-demo", "src", "lib.rs"), "w") as f:
            f.write("pub struct DemoClient;\npub enum DemoError {\n    Gone,\n}\n")
        with open(os.path.join(root, "docs", "X.md"), "w") as f:
            f.write(
                "`crates/privsvc-demo/src/lib.rs` `privsvc-demo/src/lib.rs` `DemoClient`\n"
                "`privsvc_demo::DemoError::Gone` `Arc`\n"
                "`crates/privsvc-demo/src/gone.rs` `privsvc_demo::Missing` `NoSuchType`\n"
            )
        files = ["crates/privsvc-demo/src/lib.rs", "docs/X.md"]
        problems, _ = check(root, files, "check-citations: ignore", "check-citations: ignore-next-line")
        return problems
