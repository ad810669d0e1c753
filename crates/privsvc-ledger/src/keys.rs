//! Entity key derivation of the native protocol.
//!
//! `key = keccak256(uint256 chainId ‖ 0x44…44 ‖ owner ‖ uint64 entityNonce ‖ uint128 salt)` (a
//! 96-byte preimage), where `owner` is the creating sender and `entityNonce` its per-creator count
//! of creates; the i-th create of a batch uses `startNonce + i`.

use alloy_primitives::{keccak256, Address, B256, U256};

use crate::abi::ARKIV_ADDRESS;

/// The key the node derives for a create by `owner` with entity nonce `nonce` and `salt`.
pub fn entity_key(chain_id: u64, owner: Address, nonce: u64, salt: u128) -> B256 {
    let mut pre = [0u8; 96];
    pre[..32].copy_from_slice(&U256::from(chain_id).to_be_bytes::<32>());
    pre[32..52].copy_from_slice(ARKIV_ADDRESS.as_slice());
    pre[52..72].copy_from_slice(owner.as_slice());
    pre[72..80].copy_from_slice(&nonce.to_be_bytes());
    pre[80..96].copy_from_slice(&salt.to_be_bytes());
    keccak256(pre)
}

/// The keys of consecutive creates by `owner` starting at entity nonce `start_nonce`, one per
/// salt, in order (what the SDK's `predictEntityKeys` returns). Valid only while nothing else
/// creates from `owner` between reading the nonce and inclusion.
pub fn predict_entity_keys(
    chain_id: u64,
    owner: Address,
    start_nonce: u64,
    salts: &[u128],
) -> Vec<B256> {
    salts
        .iter()
        .enumerate()
        .map(|(i, salt)| entity_key(chain_id, owner, start_nonce.wrapping_add(i as u64), *salt))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{address, b256};

    #[test]
    fn matches_the_documented_keys() {
        let owner = address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
        assert_eq!(
            entity_key(1337, owner, 0, 0),
            b256!("3e757bb06c964e6ce8ff7269ac6bde82c5aa59e6f918d8886a1d826560fcdbaa")
        );
        assert_eq!(
            predict_entity_keys(1337, owner, 0, &[0, 0]),
            vec![
                entity_key(1337, owner, 0, 0),
                b256!("ce2f674b8ed21c5bd64a3cf30bcc410c54804bb14f128a546ca15479565fcd12")
            ]
        );
        assert_eq!(
            entity_key(7738577, owner, 0, 0),
            b256!("594eb7557e08ad732a353049bb0d5f97c91141d2768360991484bcc8d76bc4ff")
        );
    }
}
