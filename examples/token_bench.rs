//! Token benchmark: RSA-2048 blind signing and token verification on this machine.
//!
//! ```text
//! cargo run --release --example token_bench [-- --seconds 3]
//! scripts/bench-tokens.sh          # the same, next to `openssl speed rsa2048`
//! ```
//!
//! One thread each (the issuer signs one request on one blocking thread). Prints, per case,
//! operations per second and microseconds per operation, then `key=value` lines that
//! `scripts/bench-tokens.sh` reads:
//! 1. `blind_sign_crate`: `blind-rsa-signatures`' `SecretKey::blind_sign` (RSA-CRT via
//!    `rsa::hazmat::rsa_decrypt_and_check`, a fresh blinding factor per signature);
//! 2. `blind_sign_suite`: the same plus this crate's explicit `s^e = m` re-check
//!    (`TokenSuite::blind_sign`);
//! 3. `blind_sign_issuer`: `BlindSigner::sign`, the issuer's path (same CRT code, cached
//!    blinding pair updated by squaring, one `s^e = m` check);
//! 4. `blind_sign_raw_crt`: the bare CRT private-key operation without blinding or check (the
//!    floor for any path built on the `rsa` crate);
//! 5. `verify_token`: what a relayer does per submitted token;
//! 6. `client_token`: blind + finalize (with its verification) on the client.

use std::time::{Duration, Instant};

use clap::Parser;
use privsvc_tokens::{
    token_message, token_suite, verify_token, BlindSigner, IssuerKey, TokenRedemption,
};

/// Command-line options.
#[derive(Parser, Debug)]
struct Args {
    /// Seconds to run each case.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
}

/// Run `f` repeatedly for about `secs`; returns operations per second.
fn measure(name: &str, secs: f64, mut f: impl FnMut()) -> f64 {
    f(); // warm up
    let budget = Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        f();
        n += 1;
    }
    let el = start.elapsed().as_secs_f64();
    let rate = n as f64 / el;
    println!(
        "{name:<22} {rate:>10.1} ops/s {:>10.1} us/op ({n} ops)",
        1e6 / rate
    );
    rate
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let suite = token_suite();
    let t = Instant::now();
    let sk = suite.generate_key()?;
    println!("key generation (RSA-2048): {:?}", t.elapsed());
    let key = IssuerKey::from_secret(&sk)?;
    let signer = BlindSigner::new(&sk)?;

    let nonce = [7u8; 32];
    let msg = token_message("bench", 20_000, &nonce)?;
    let blinded = suite.blind(&key, &msg)?;
    let bm = blinded.blinded_message().to_vec();
    // All signing paths must agree (RSA is deterministic).
    let reference = suite.blind_sign(&sk, &bm)?;
    anyhow::ensure!(
        signer.sign(&bm)? == reference,
        "BlindSigner disagrees with the crate"
    );
    let sig = suite.finalize(&key, &reference, &blinded, &msg)?;
    let token = TokenRedemption::new(20_000, &nonce, &sig);
    verify_token(&key, "bench", &token)?;

    let s = args.seconds;
    let crate_rate = measure("blind_sign_crate", s, || {
        sk.blind_sign(&bm).expect("sign");
    });
    let suite_rate = measure("blind_sign_suite", s, || {
        suite.blind_sign(&sk, &bm).expect("sign");
    });
    let issuer_rate = measure("blind_sign_issuer", s, || {
        signer.sign(&bm).expect("sign");
    });
    let raw_rate = measure("blind_sign_raw_crt", s, || {
        signer.raw_private_op(&bm).expect("sign");
    });
    let verify_rate = measure("verify_token", s, || {
        verify_token(&key, "bench", &token).expect("verify");
    });
    let client_rate = measure("client_token", s, || {
        let b = suite.blind(&key, &msg).expect("blind");
        let bs = signer.sign(b.blinded_message()).expect("sign");
        suite.finalize(&key, &bs, &b, &msg).expect("finalize");
    });
    // client_token includes one issuer signature; report the client's share separately.
    let client_only = 1.0 / (1.0 / client_rate - 1.0 / issuer_rate);
    println!("client_token (client share only) {client_only:>10.1} ops/s");

    println!("blind_sign_crate_per_s={crate_rate:.1}");
    println!("blind_sign_suite_per_s={suite_rate:.1}");
    println!("blind_sign_issuer_per_s={issuer_rate:.1}");
    println!("blind_sign_raw_crt_per_s={raw_rate:.1}");
    println!("verify_token_per_s={verify_rate:.1}");
    println!("client_token_per_s={client_only:.1}");
    Ok(())
}
