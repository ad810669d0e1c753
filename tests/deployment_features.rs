//! The attack lab stays out of deployments: no package of the workspace but the lab itself is
//! built with the relayer's `lab-leaks` switches (docs/PRIVACY.md).
//!
//! Cargo builds a package's binaries and examples with the features all of its dependencies
//! (dev-dependencies included) ask for, so a package that depended on `privsvc-lab` would build
//! the relayer example, a deployment's binary, with `lab-leaks`. The attack lab's example is
//! behind this package's `lab` feature (off by default) for that reason. This test resolves the
//! features of every other package, as `cargo build -p <package> --all-targets` would, and
//! fails if `lab-leaks` is among them.

use std::process::Command;

/// `cargo tree` over every workspace package but the lab, with features, as cargo resolves them
/// for a build of those packages (normal, build and dev dependencies).
fn feature_tree() -> String {
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "--offline",
            "--workspace",
            "--exclude",
            "privsvc-lab",
            "--edges",
            "features,normal,build,dev",
            "--prefix",
            "none",
        ])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn no_package_but_the_lab_is_built_with_lab_leaks() {
    let tree = feature_tree();
    // The tree is the real one: it names the relayer and its features.
    assert!(tree.contains("privsvc-relayer"), "{tree}");
    assert!(
        tree.contains("privsvc-relayer feature \"default\""),
        "{tree}"
    );
    let leaky: Vec<&str> = tree
        .lines()
        .filter(|l| l.contains("lab-leaks") || l.starts_with("privsvc-lab "))
        .collect();
    assert!(
        leaky.is_empty(),
        "a package other than privsvc-lab pulls in the lab or its leaky switches: {leaky:?}"
    );
}
