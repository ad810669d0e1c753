//! Decoy records (`DECOYS_MAX`, docs/PROTOCOL.md §7): records of the relayer's own that it adds
//! to a batch, so that whoever floods a relayer's queue with records of its own (an n-1 attack)
//! cannot tell the one record it does not own: a uniformly random number, 0 to `DECOYS_MAX`
//! (OS RNG), per batch transaction.
//!
//! A decoy copies a record of the batch (the template, drawn uniformly among the records of the
//! batch's most common `project`, ties drawn at random): same app, lifetime, hour, content type,
//! attribute names, types and values, and payload length, with a fresh one-time owner key
//! (discarded once the envelope is signed), a fresh random 44-byte `tag` and, when the payload
//! is encrypted, fresh random bytes as its ciphertext (a plaintext payload is copied as it is:
//! random bytes would stand out among readable ones). Its envelope is sealed and signed by the
//! fresh owner like a client's, so a decoy verifies as a record. It is created and transferred
//! to its owner in the batch like the others, in the same random order; with tokens, it adds a
//! random token id to the spends entity of a token epoch of the batch, so the count of token ids
//! does not give the count of decoys away.
//!
//! A decoy is not a stored record: it has no id, no status, and is never counted toward a
//! `minAnonymity` hold or in `batchSize` (the store counts only the batch's members). The
//! relayer counts the decoys of its mined batches in `/metrics`
//! (`privsvc_decoys_written_total`), nowhere else. Its cost is the gas of one more record.

use k256::ecdsa::SigningKey;
use privsvc_attributes::{AttrValue, Attributes};
use privsvc_envelope::{parse_envelope, seal_envelope};
use rand::rngs::OsRng;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore};

use crate::entities::record_create;
use crate::store::{SpentToken, StoredRecord};

/// Bytes of a record tag (a 12-byte nonce and a 32-byte MAC in a client's tag).
const TAG_BYTES: usize = 44;

/// The decoys of one batch transaction: 0 to `max` (`DECOYS_MAX`) of them, uniformly at random.
pub(crate) fn for_batch(max: usize, batch: &[StoredRecord]) -> Vec<StoredRecord> {
    if max == 0 || batch.is_empty() {
        return Vec::new();
    }
    let count = OsRng.gen_range(0..=max);
    decoys(batch, count)
}

/// `count` decoys modelled on the records of `batch` (fewer when a template cannot be copied,
/// which a validated record never causes).
pub(crate) fn decoys(batch: &[StoredRecord], count: usize) -> Vec<StoredRecord> {
    let templates = majority_project(batch);
    let epochs: Vec<u64> = batch
        .iter()
        .filter_map(|r| r.token.as_ref().map(|t| t.epoch))
        .collect();
    (0..count)
        .filter_map(|_| {
            let template = templates.choose(&mut OsRng)?;
            let token = epochs.choose(&mut OsRng).map(|&epoch| SpentToken {
                id: OsRng.gen(),
                epoch,
            });
            decoy_of(template, token)
        })
        .collect()
}

/// The records of the batch's most common `project` (ties drawn at random).
fn majority_project(batch: &[StoredRecord]) -> Vec<&StoredRecord> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in batch {
        *counts.entry(r.project.as_str()).or_default() += 1;
    }
    let most = counts.values().copied().max().unwrap_or(0);
    let tied: Vec<&str> = counts
        .into_iter()
        .filter(|(_, n)| *n == most)
        .map(|(p, _)| p)
        .collect();
    let Some(project) = tied.choose(&mut OsRng).copied() else {
        return Vec::new();
    };
    batch.iter().filter(|r| r.project == project).collect()
}

/// A decoy copying `template` with a fresh owner, tag and (encrypted) payload.
fn decoy_of(template: &StoredRecord, token: Option<SpentToken>) -> Option<StoredRecord> {
    let sealed = parse_envelope(&template.envelope).ok()?;
    let mut attributes = Attributes::from_wire_json(template.attributes.as_bytes()).ok()?;
    if matches!(attributes.get("tag"), Some(AttrValue::Str(_))) {
        let mut tag = [0u8; TAG_BYTES];
        OsRng.fill_bytes(&mut tag);
        let text = privsvc_envelope::to_base64(&tag);
        attributes.insert("tag", AttrValue::Str(text)).ok()?;
    }
    let mut body = sealed.body;
    if body.enc {
        OsRng.fill_bytes(&mut body.data);
    }
    let key = SigningKey::random(&mut OsRng);
    let owner = alloy_primitives::Address::from_private_key(&key);
    let envelope = seal_envelope(&body, &attributes, &key).ok()?.into_bytes();
    drop(key);
    let decoy = StoredRecord {
        id: String::new(),
        seq: 0,
        app: template.app.clone(),
        project: template.project.clone(),
        envelope_digest: crate::store::envelope_sha256(&envelope),
        owner,
        envelope,
        attributes: attributes.canonical_json(),
        exp_seconds: template.exp_seconds,
        min_anonymity: 1,
        max_hold_ms: 0,
        token,
        accepted_ms: template.accepted_ms,
    };
    // A decoy the ledger would refuse must never break its batch.
    record_create(&decoy, 0).ok()?;
    Some(decoy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(project: &str, enc: bool, token: Option<u64>) -> StoredRecord {
        let key = SigningKey::random(&mut OsRng);
        let mut attrs = Attributes::new();
        attrs.insert("project", project).unwrap();
        attrs.insert("kind", "note").unwrap();
        attrs
            .insert(
                "tag",
                AttrValue::Str(privsvc_envelope::to_base64(&[7u8; 44])),
            )
            .unwrap();
        let body = privsvc_envelope::EnvelopeBody {
            app: "demo".into(),
            exp: 86_400,
            hour: 490_000,
            ct: "text/plain".into(),
            enc,
            types: attrs.types(),
            data: vec![b'a'; 700],
        };
        let envelope = seal_envelope(&body, &attrs, &key).unwrap().into_bytes();
        StoredRecord {
            id: "r".into(),
            seq: 1,
            app: "demo".into(),
            project: crate::project::project_key(&attrs),
            envelope_digest: crate::store::envelope_sha256(&envelope),
            owner: alloy_primitives::Address::from_private_key(&key),
            envelope,
            attributes: attrs.canonical_json(),
            exp_seconds: 86_400,
            min_anonymity: 1,
            max_hold_ms: 0,
            token: token.map(|epoch| SpentToken { id: [1; 32], epoch }),
            accepted_ms: 5,
        }
    }

    #[test]
    fn a_decoy_is_a_signed_copy_with_a_fresh_owner_tag_and_ciphertext() {
        let batch = vec![
            record("notes", true, Some(20_001)),
            record("notes", true, Some(20_001)),
            record("other", true, Some(20_001)),
        ];
        let decoys = decoys(&batch, 20);
        assert_eq!(decoys.len(), 20);
        for d in &decoys {
            assert_eq!(d.project, batch[0].project, "the majority project");
            assert_eq!(d.envelope.len(), batch[0].envelope.len(), "same size class");
            let sealed = parse_envelope(&d.envelope).unwrap();
            let attrs = Attributes::from_wire_json(d.attributes.as_bytes()).unwrap();
            let signer = privsvc_envelope::envelope_signer(&sealed, &attrs).unwrap();
            assert_eq!(signer, d.owner);
            assert!(batch.iter().all(|r| r.owner != d.owner));
            let Some(AttrValue::Str(tag)) = attrs.get("tag") else {
                panic!("a tag")
            };
            assert_eq!(tag.len(), 60);
            assert_ne!(tag, &privsvc_envelope::to_base64(&[7u8; 44]));
            assert_eq!(attrs.get("kind"), Some(&AttrValue::Str("note".into())));
            assert_ne!(sealed.body.data, vec![b'a'; 700], "fresh ciphertext");
            assert_eq!(sealed.body.data.len(), 700);
            assert_eq!((sealed.body.exp, sealed.body.hour), (86_400, 490_000));
            let token = d.token.as_ref().expect("a token id with tokens on");
            assert_eq!(token.epoch, 20_001);
            assert_ne!(token.id, [1; 32]);
        }
        let mut owners: Vec<_> = decoys.iter().map(|d| d.owner).collect();
        owners.sort();
        owners.dedup();
        assert_eq!(owners.len(), decoys.len(), "one owner per decoy");
    }

    #[test]
    fn plaintext_is_copied_and_no_token_without_tokens() {
        let batch = vec![record("notes", false, None)];
        let d = decoys(&batch, 1).pop().unwrap();
        let sealed = parse_envelope(&d.envelope).unwrap();
        assert_eq!(sealed.body.data, vec![b'a'; 700]);
        assert!(d.token.is_none());
    }
}
