//! Why a local stack could not start.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A part of the stack failed to start or to come up in time.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StackError {
    /// The devnet did not start.
    #[error("devnet: {0}")]
    Devnet(#[from] privsvc_devnet::DevnetError),
    /// A ledger client could not be built or a ledger call failed.
    #[error("ledger: {0}")]
    Ledger(#[from] privsvc_ledger::LedgerError),
    /// A relayer did not start.
    #[error("relayer {name}: {source}")]
    Relayer {
        /// The relayer's name in the stack.
        name: String,
        /// Why it did not start.
        #[source]
        source: Box<privsvc_relayer::RelayerError>,
    },
    /// The OHTTP relay could not be built or did not verify its targets.
    #[error("OHTTP relay: {0}")]
    Relay(#[from] privsvc_ohttp::OhttpError),
    /// A socket could not be bound or a temporary directory made.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// The stack's description is inconsistent (an unknown relayer name, too few dev accounts).
    #[error("stack description: {0}")]
    Config(String),
    /// Something did not happen in time (heartbeats on the ledger, targets verified).
    #[error("timed out: {0}")]
    Timeout(Awaited),
}

/// What a stack waited for in vain.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Awaited {
    /// The devnet process to answer.
    DevnetStart {
        /// Its log.
        log: PathBuf,
    },
    /// The relayer process to answer its health check.
    RelayerStart {
        /// How long it was given.
        within: Duration,
        /// Its log.
        log: PathBuf,
    },
    /// A relayer's heartbeat to reach the ledger.
    Heartbeat {
        /// The relayer's name in the stack.
        relayer: String,
    },
    /// The OHTTP relay to verify every relayer.
    RelayTargets {
        /// Relayers verified.
        verified: usize,
        /// Relayers in the stack.
        expected: usize,
    },
}

impl fmt::Display for Awaited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Awaited::DevnetStart { log } => {
                write!(f, "the devnet did not start (see {})", log.display())
            }
            Awaited::RelayerStart { within, log } => write!(
                f,
                "the relayer did not start within {} s (see {})",
                within.as_secs(),
                log.display()
            ),
            Awaited::Heartbeat { relayer } => {
                write!(
                    f,
                    "relayer {relayer:?}'s heartbeat did not reach the ledger"
                )
            }
            Awaited::RelayTargets { verified, expected } => {
                write!(
                    f,
                    "the OHTTP relay verified {verified} of {expected} relayers"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_says_what_was_awaited() {
        let cases = [
            (
                Awaited::DevnetStart {
                    log: PathBuf::from("/tmp/s/devnet.log"),
                },
                "timed out: the devnet did not start (see /tmp/s/devnet.log)",
            ),
            (
                Awaited::RelayerStart {
                    within: Duration::from_secs(60),
                    log: PathBuf::from("/tmp/s/relayer.log"),
                },
                "timed out: the relayer did not start within 60 s (see /tmp/s/relayer.log)",
            ),
            (
                Awaited::Heartbeat {
                    relayer: "a".into(),
                },
                "timed out: relayer \"a\"'s heartbeat did not reach the ledger",
            ),
            (
                Awaited::RelayTargets {
                    verified: 1,
                    expected: 3,
                },
                "timed out: the OHTTP relay verified 1 of 3 relayers",
            ),
        ];
        for (awaited, text) in cases {
            assert_eq!(StackError::Timeout(awaited).to_string(), text);
        }
    }
}
