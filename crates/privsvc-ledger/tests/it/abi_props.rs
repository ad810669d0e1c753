//! Property tests of the execute() codec: valid batches round-trip through calldata in their
//! canonical (sorted) form, and arbitrary bytes never make the decoder panic.

use alloy_primitives::{Address, B256, I256, U256};
use privsvc_ledger::{
    decode_operations, encode_operations, ArkivValue, Attribute, Create, CreationFlags, Operation,
};
use proptest::prelude::*;

fn value() -> impl Strategy<Value = ArkivValue> {
    prop_oneof![
        any::<bool>().prop_map(ArkivValue::Bool),
        any::<i32>().prop_map(ArkivValue::I32),
        any::<u64>().prop_map(ArkivValue::U64),
        any::<[u8; 32]>().prop_map(|b| ArkivValue::U256(U256::from_be_bytes(b))),
        any::<[u8; 32]>().prop_map(|b| ArkivValue::Dec(I256::from_raw(U256::from_be_bytes(b)))),
        any::<[u8; 32]>().prop_map(|b| ArkivValue::Bytes32(B256::from(b))),
        "[ -~]{0,40}".prop_map(ArkivValue::Str),
        any::<[u8; 20]>().prop_map(|b| ArkivValue::Addr(Address::from(b))),
        any::<[u8; 32]>().prop_map(|b| ArkivValue::Key(B256::from(b))),
    ]
}

fn attributes() -> impl Strategy<Value = Vec<Attribute>> {
    prop::collection::btree_map("[a-z][a-z0-9._-]{0,31}", value(), 0..30).prop_map(|m| {
        m.into_iter()
            .map(|(name, value)| Attribute { name, value })
            .collect()
    })
}

fn op() -> impl Strategy<Value = Operation> {
    let key = any::<[u8; 32]>().prop_map(B256::from);
    prop_oneof![
        (
            any::<u128>(),
            any::<u64>(),
            any::<u64>(),
            0u8..4,
            "[a-z/]{0,20}",
            prop::collection::vec(any::<u8>(), 0..100),
            attributes()
        )
            .prop_map(|(salt, e, m, f, ct, payload, attributes)| {
                Operation::Create(Create {
                    salt,
                    expires_at: e,
                    min_lifetime: m,
                    flags: CreationFlags {
                        readonly: f & 1 != 0,
                        permissionless_extension: f & 2 != 0,
                    },
                    content_type: ct,
                    payload,
                    attributes,
                })
            }),
        (
            key.clone(),
            attributes(),
            prop::collection::vec(any::<bool>(), 30)
        )
            .prop_filter_map("non-empty patch", |(key, attrs, unset)| {
                let mutations: Vec<_> = attrs
                    .into_iter()
                    .zip(unset)
                    .map(|(a, u)| (a.name, (!u).then_some(a.value)))
                    .collect();
                (!mutations.is_empty()).then_some(Operation::Patch { key, mutations })
            }),
        (key.clone(), any::<u64>(), any::<u64>()).prop_map(|(key, e, m)| Operation::Extend {
            key,
            expires_at: e,
            min_lifetime: m
        }),
        (key.clone(), any::<[u8; 20]>())
            .prop_filter("non-zero owner", |(_, a)| *a != [0u8; 20])
            .prop_map(|(key, a)| Operation::Transfer {
                key,
                new_owner: Address::from(a)
            }),
        key.prop_map(|key| Operation::Delete { key }),
    ]
}

// The canonical form: attribute lists sorted by name (the generators already sort them,
// since a BTreeMap order equals the order of the null-padded bytes32 names).
proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn valid_batches_round_trip(ops in prop::collection::vec(op(), 1..6)) {
        let calldata = encode_operations(&ops);
        prop_assert_eq!(decode_operations(&calldata).unwrap(), ops.clone());
        prop_assert!(privsvc_ledger::check_operations(&ops).is_ok());
    }

    #[test]
    fn arbitrary_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode_operations(&bytes);
        // Also behind the right selector.
        let mut cd = vec![0x49, 0x65, 0x00, 0x44];
        cd.append(&mut bytes);
        let _ = decode_operations(&cd);
    }
}
