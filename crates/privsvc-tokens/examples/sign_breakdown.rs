//! Where the time of one RSA-2048 blind signature goes (the findings in this crate's README).
//!
//! ```text
//! cargo run --release -p privsvc-tokens --example sign_breakdown
//! ```
//!
//! Times each signing path and its parts: the RSA-CRT private operation with and without
//! blinding, without CRT, the modular inversion a fresh blinding factor costs, the `s^e` check,
//! and a 1024-bit constant-time exponentiation (boxed and fixed-size `crypto-bigint`).
use std::time::Instant;

use blind_rsa_signatures::reexports::rsa::{hazmat, traits::PublicKeyParts, BoxedUint};
use blind_rsa_signatures::DefaultRng;
use privsvc_tokens::{token_message, token_suite, IssuerKey};

fn rate(label: &str, n: u32, mut f: impl FnMut()) {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "{label:40} {:10.1}/s  ({:.1} us)",
        n as f64 / s,
        s * 1e6 / n as f64
    );
}

fn main() {
    let suite = token_suite();
    let t = Instant::now();
    let sk = suite.generate_key().unwrap();
    println!("keygen {:?}", t.elapsed());
    let pk = IssuerKey::from_secret(&sk).unwrap();
    let msg = token_message("app", 1, &[7u8; 32]).unwrap();
    let b = suite.blind(&pk, &msg).unwrap();
    let blinded = b.blinded_message().to_vec();
    let n = 200;
    rate("crate blind_sign", n, || {
        sk.blind_sign(&blinded).unwrap();
    });
    rate("suite blind_sign (+check)", n, || {
        suite.blind_sign(&sk, &blinded).unwrap();
    });
    let fast = privsvc_tokens::BlindSigner::new(&sk).unwrap();
    assert_eq!(
        fast.sign(&blinded).unwrap(),
        privsvc_tokens::token_suite()
            .blind_sign(&sk, &blinded)
            .unwrap()
    );
    rate("BlindSigner::sign (+check)", n, || {
        fast.sign(&blinded).unwrap();
    });
    let inner: &blind_rsa_signatures::reexports::rsa::RsaPrivateKey = sk.as_ref();
    let c = BoxedUint::from_be_slice(&blinded, inner.n_bits_precision()).unwrap();
    rate("rsa_decrypt no blinding", n, || {
        hazmat::rsa_decrypt::<DefaultRng>(None, inner, &c).unwrap();
    });
    rate("rsa_decrypt blinding", n, || {
        hazmat::rsa_decrypt(Some(&mut DefaultRng), inner, &c).unwrap();
    });
    let mut no_crt = inner.clone();
    no_crt.clear_precomputed();
    rate("rsa_decrypt_and_check WITHOUT CRT", 50, || {
        hazmat::rsa_decrypt_and_check(&no_crt, Some(&mut DefaultRng), &c).unwrap();
    });
    rate("rsa_encrypt (e)", n, || {
        hazmat::rsa_encrypt(inner, &c).unwrap();
    });
    rate("invert_mod n", n, || {
        let _ = c.invert_mod(inner.n());
    });
    {
        use blind_rsa_signatures::reexports::crypto_bigint::{
            modular::{BoxedMontyForm, FixedMontyForm, FixedMontyParams},
            Odd, Resize, U1024,
        };
        use blind_rsa_signatures::reexports::rsa::traits::PrivateKeyParts;
        let p = &inner.primes()[0];
        let dp = inner.dp().unwrap();
        println!(
            "p bits {} prec {}, dp prec {}",
            p.bits(),
            p.bits_precision(),
            dp.bits_precision()
        );
        let pp = inner.p_params().unwrap();
        let x = BoxedUint::from_be_slice(&blinded[..128], 1024).unwrap();
        let x = BoxedMontyForm::new(x, pp);
        rate("boxed pow 1024", n, || {
            let _ = x.pow(dp);
        });
        let p_fixed = U1024::from_be_slice(&p.to_be_bytes());
        let params = FixedMontyParams::new(Odd::new(p_fixed).unwrap());
        let dp_fixed = U1024::from_be_slice(&dp.to_be_bytes());
        let xf = FixedMontyForm::new(&U1024::from_be_slice(&blinded[..128]), &params);
        rate("fixed pow 1024", n, || {
            let _ = xf.pow(&dp_fixed);
        });
        rate("fixed pow_amm 1024", n, || {
            let _ = xf.pow_amm(&dp_fixed);
        });
        assert_eq!(
            xf.pow(&dp_fixed).retrieve().to_be_bytes().as_slice(),
            &*x.pow(dp).retrieve().to_be_bytes()
        );
        let c2 = BoxedUint::from_be_slice(&blinded, 2048).unwrap();
        let pw = pp.modulus().resize_unchecked(2048);
        rate("boxed 2048 % p", n, || {
            let _ = &c2 % pw.as_nz_ref();
        });
    }
    let sig = suite.blind_sign(&sk, &blinded).unwrap();
    let fin = suite.finalize(&pk, &sig, &b, &msg).unwrap();
    rate("verify", n, || {
        suite.verify(&pk, &fin, &msg).unwrap();
    });
    rate("blind (client)", n, || {
        suite.blind(&pk, &msg).unwrap();
    });
}
