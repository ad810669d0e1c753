//! Entry point shared by the `relayer_submit` fuzz target and its stable seed replay
//! (`tests/it/fuzz_seeds.rs`): the body of `POST /v1/records` through
//! [`crate::validate::validate_at`] at the fixed clock [`FUZZ_NOW_SECS`].

use alloy_primitives::Address;

use crate::entities::SYSTEM_PROJECT;
use crate::validate::{validate_at, Limits, EXPIRY_BUCKETS, PADDED_SIZES};

/// The relayer address the fuzz limits use (an owner equal to it must be refused).
pub const FUZZ_RELAYER: Address = Address::repeat_byte(0x11);

/// The clock the fuzz target validates at (2026-11-17 21:33:20 UTC), so that stored seeds
/// stay inside the envelope hour window whenever they are replayed.
pub const FUZZ_NOW_SECS: u64 = 1_795_000_000;

/// The limits the fuzz target validates against: relayer [`FUZZ_RELAYER`], `minAnonymity` up
/// to 10, `maxHoldMs` up to 10 minutes.
pub fn fuzz_limits() -> Limits {
    Limits {
        relayer: FUZZ_RELAYER,
        max_min_anonymity: 10,
        max_hold_ms: 600_000,
    }
}

/// Validates `data` as a submit body and checks what every accepted submission must satisfy
/// (docs/PROTOCOL.md §9.3): a padded envelope that parses, names the same app and expiry and
/// recovers to the owner; an owner other than the relayer; a mandatory, non-system `project`;
/// no reserved attribute name; options within the limits. A refusal must be a non-empty
/// sentence. Returns whether the body was accepted.
pub fn submit_body(data: &[u8]) -> bool {
    let limits = fuzz_limits();
    let s = match validate_at(data, &limits, FUZZ_NOW_SECS) {
        Ok(s) => s,
        Err(reason) => {
            assert!(!reason.is_empty(), "empty refusal");
            return false;
        }
    };
    assert!(
        PADDED_SIZES.contains(&s.envelope.len()),
        "unpadded envelope"
    );
    assert!(
        EXPIRY_BUCKETS.contains(&s.exp_seconds),
        "expiry not a bucket"
    );
    assert_ne!(s.owner, limits.relayer, "owner equal to the relayer");
    let sealed = privsvc_envelope::parse_envelope(&s.envelope).expect("accepted envelope parses");
    assert_eq!(sealed.body.app, s.app, "app differs from the envelope's");
    assert_eq!(
        sealed.body.exp, s.exp_seconds,
        "expiry differs from the envelope's"
    );
    assert_eq!(
        privsvc_envelope::envelope_signer(&sealed, &s.attributes).ok(),
        Some(s.owner),
        "envelope does not recover to the owner"
    );
    let project = s.attributes.get("project").expect("project is mandatory");
    assert_ne!(
        *project,
        privsvc_attributes::AttrValue::Str(SYSTEM_PROJECT.into()),
        "system project accepted"
    );
    assert!(
        s.attributes
            .iter()
            .all(|(name, _)| !name.starts_with(privsvc_attributes::SYSTEM_PREFIX)),
        "reserved attribute name accepted"
    );
    assert!((1..=limits.max_min_anonymity as u32).contains(&s.min_anonymity));
    assert!((1..=limits.max_hold_ms).contains(&s.max_hold_ms));
    true
}
