//! Plain chain records: accounts, blocks, transactions, receipts and logs.

use alloy_primitives::{Address, Bytes, B256, U256};
use serde::{Deserialize, Serialize};

/// Account state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// Balance in wei.
    pub balance: U256,
    /// Transaction nonce.
    pub nonce: u64,
    /// Per-creator entity nonce (number of creates so far).
    pub entity_nonce: u64,
}

/// A mined block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Block number.
    pub number: u64,
    /// Block hash.
    pub hash: B256,
    /// Parent hash.
    pub parent_hash: B256,
    /// Unix timestamp (seconds).
    pub timestamp: u64,
    /// Base fee per gas (wei).
    pub base_fee: u64,
    /// Gas limit.
    pub gas_limit: u64,
    /// Gas used by all transactions.
    pub gas_used: u64,
    /// Included transaction hashes in order.
    pub txs: Vec<B256>,
}

/// One event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Emitting address.
    pub address: Address,
    /// Topics.
    pub topics: Vec<B256>,
    /// Data.
    pub data: Bytes,
}

/// A transaction receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// True on success.
    pub status: bool,
    /// Gas used by this transaction.
    pub gas_used: u64,
    /// Cumulative gas in the block up to and including this transaction.
    pub cumulative_gas_used: u64,
    /// Price paid per gas.
    pub effective_gas_price: u128,
    /// Logs (empty on revert).
    pub logs: Vec<LogEntry>,
    /// Revert data (not part of the standard receipt; kept for diagnostics).
    pub revert_data: Option<Bytes>,
    /// Index of the first log of this transaction within its block.
    pub first_log_index: u64,
}

/// Where a transaction was included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxLocation {
    /// Block number.
    pub number: u64,
    /// Block hash.
    pub hash: B256,
    /// Index in the block.
    pub index: u64,
}

/// A transaction as the node keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxRecord {
    /// Transaction hash.
    pub hash: B256,
    /// Recovered sender.
    pub from: Address,
    /// Recipient (`None` = contract creation, which is refused).
    pub to: Option<Address>,
    /// Sender nonce.
    pub nonce: u64,
    /// Gas limit.
    pub gas_limit: u64,
    /// EIP-2718 type (0 legacy, 2 EIP-1559).
    pub tx_type: u8,
    /// Chain id (None only for pre-EIP-155 legacy transactions).
    pub chain_id: Option<u64>,
    /// Legacy gas price.
    pub gas_price: Option<u128>,
    /// Max fee per gas (= gas price for legacy).
    pub max_fee: u128,
    /// Max priority fee (EIP-1559 only).
    pub max_priority: Option<u128>,
    /// Value in wei.
    pub value: U256,
    /// Calldata.
    pub input: Bytes,
    /// Signature v (legacy: EIP-155 v; typed: parity).
    pub v: u64,
    /// Signature r.
    pub r: U256,
    /// Signature s.
    pub s: U256,
    /// Inclusion, once mined.
    pub location: Option<TxLocation>,
    /// Receipt, once mined.
    pub receipt: Option<Receipt>,
}

impl TxRecord {
    /// The gas price this transaction pays at `base_fee`.
    pub fn effective_gas_price(&self, base_fee: u64) -> u128 {
        match self.max_priority {
            Some(tip) => self.max_fee.min(base_fee as u128 + tip),
            None => self.max_fee,
        }
    }
}
