//! Expiry resolution of the native protocol (blocks, never seconds, on the wire).

use alloy_primitives::Bytes;
use alloy_sol_types::SolError;

use crate::abi::{error_string_revert, ExpiryDeadOnArrival};

/// Seconds per block assumed by the SDK's `ExpirationTime` helpers and privsvc.
pub const BLOCK_TIME_SECONDS: u64 = 2;

/// Why an expiry cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpiryError {
    /// The resolved target is not after the including block (`ExpiryDeadOnArrival`).
    #[error("expiry {target} is not after block {current_block} (ExpiryDeadOnArrival)")]
    DeadOnArrival {
        /// The resolved target.
        target: u64,
        /// The including block.
        current_block: u64,
    },
    /// `currentBlock + minLifetime` overflows u64 (reverts with `Error(string)`).
    #[error("expiry overflow ({current_block} + {min_lifetime})")]
    Overflow {
        /// The including block.
        current_block: u64,
        /// The requested minimum lifetime.
        min_lifetime: u64,
    },
}

impl ExpiryError {
    /// The revert data the node returns.
    pub fn revert_data(&self) -> Bytes {
        match self {
            ExpiryError::DeadOnArrival {
                target,
                current_block,
            } => ExpiryDeadOnArrival {
                target: *target,
                currentBlock: *current_block,
            }
            .abi_encode()
            .into(),
            ExpiryError::Overflow { .. } => error_string_revert(&self.to_string()),
        }
    }
}

/// `max(expires_at, current_block + min_lifetime)`, which must be after `current_block`.
pub fn resolve_expiry(
    current_block: u64,
    expires_at: u64,
    min_lifetime: u64,
) -> Result<u64, ExpiryError> {
    let floor = current_block
        .checked_add(min_lifetime)
        .ok_or(ExpiryError::Overflow {
            current_block,
            min_lifetime,
        })?;
    let target = expires_at.max(floor);
    if target <= current_block {
        return Err(ExpiryError::DeadOnArrival {
            target,
            current_block,
        });
    }
    Ok(target)
}

/// A lifetime in seconds as blocks, rounded up (`ceil(seconds / 2)`), at least 1.
pub fn seconds_to_blocks(seconds: u64) -> u64 {
    seconds.div_ceil(BLOCK_TIME_SECONDS).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution() {
        assert_eq!(resolve_expiry(100, 0, 50), Ok(150));
        assert_eq!(resolve_expiry(100, 500, 50), Ok(500));
        assert!(matches!(
            resolve_expiry(100, 100, 0),
            Err(ExpiryError::DeadOnArrival { target: 100, .. })
        ));
        assert!(matches!(
            resolve_expiry(100, 0, u64::MAX),
            Err(ExpiryError::Overflow { .. })
        ));
        assert_eq!(seconds_to_blocks(3600), 1800);
        assert_eq!(seconds_to_blocks(3), 2);
    }
}
