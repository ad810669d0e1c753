//! The chain: accounts, entities, blocks, transactions, the pending pool and block production.

use std::collections::HashMap;

use alloy_consensus::transaction::SignerRecoverable;
use alloy_consensus::{Transaction, TxEnvelope};
use alloy_eips::eip2718::Decodable2718;
use alloy_primitives::{keccak256, Address, Bytes, TxKind, B256, U256};
use alloy_sol_types::SolValue;

use crate::abi::ARKIV_ADDRESS;
use crate::db::Db;
use crate::decode::{decode_call, Call, NodeOp};
use crate::entity::EntityData;
use crate::error::DevnetError;
use crate::exec::{self, intrinsic_gas, ops_gas, Effects, StateView};
use crate::revert::Revert;
use crate::store::{EntityStore, VersionRow};
use crate::types::{Account, Block, LogEntry, Receipt, TxLocation, TxRecord};

/// Chain parameters fixed at start.
#[derive(Debug, Clone)]
pub struct Params {
    /// Chain id.
    pub chain_id: u64,
    /// Block gas limit.
    pub gas_limit: u64,
    /// Base fee per gas (constant).
    pub base_fee: u64,
}

/// Why a transaction was refused at submission (JSON-RPC -32000 / -32003 style messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TxRejected(pub String);

/// A simulation failure: revert data and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRevert {
    /// The revert.
    pub revert: Revert,
}

/// An unsigned call or transaction request (eth_call / eth_estimateGas / impersonation).
#[derive(Debug, Clone, Default)]
pub struct CallRequest {
    /// Sender (zero if absent).
    pub from: Option<Address>,
    /// Recipient.
    pub to: Option<Address>,
    /// Calldata.
    pub input: Bytes,
    /// Value.
    pub value: U256,
    /// Gas limit.
    pub gas: Option<u64>,
}

struct Pooled {
    seq: u64,
    tx: TxRecord,
}

/// The whole node state. Guard it with one mutex.
pub struct Chain {
    /// Parameters.
    pub params: Params,
    accounts: HashMap<Address, Account>,
    /// Entities.
    pub entities: EntityStore,
    blocks: Vec<Block>,
    first_block: u64,
    txs: HashMap<B256, TxRecord>,
    pool: Vec<Pooled>,
    seq: u64,
    db: Option<Db>,
}

struct View<'a> {
    chain: &'a Chain,
    accounts: &'a HashMap<Address, Account>,
    entities: &'a HashMap<B256, Option<EntityData>>,
    /// Read entities as of this past block instead of the head.
    at: Option<u64>,
}

impl StateView for View<'_> {
    fn entity(&self, key: &B256) -> Option<EntityData> {
        match self.entities.get(key) {
            Some(e) => e.clone(),
            None => match self.at {
                Some(b) => self.chain.entities.state_at(key, b).map(|a| (**a).clone()),
                None => self.chain.entities.current(key).map(|a| (**a).clone()),
            },
        }
    }
    fn entity_nonce(&self, who: &Address) -> u64 {
        self.accounts
            .get(who)
            .map_or_else(|| self.chain.account(who).entity_nonce, |a| a.entity_nonce)
    }
}

/// Decode a raw signed transaction (`eth_sendRawTransaction`): EIP-2718 envelope without
/// trailing bytes, signer recovered, EIP-1559 or legacy only. No state is checked.
pub(crate) fn decode_raw(raw: &[u8]) -> Result<TxRecord, TxRejected> {
    let mut buf = raw;
    let env = TxEnvelope::decode_2718(&mut buf)
        .map_err(|e| TxRejected(format!("invalid transaction encoding: {e}")))?;
    if !buf.is_empty() {
        return Err(TxRejected(
            "invalid transaction encoding: trailing bytes".into(),
        ));
    }
    let from = env
        .recover_signer()
        .map_err(|e| TxRejected(format!("invalid transaction signature: {e}")))?;
    let (tx_type, v, r, s) = match &env {
        TxEnvelope::Legacy(t) => {
            let sig = t.signature();
            let parity = sig.v() as u64;
            // EIP-155: v = 35 + 2 × chainId + parity, which must fit the 64-bit v we keep.
            let v = match t.tx().chain_id {
                Some(id) => id
                    .checked_mul(2)
                    .and_then(|x| x.checked_add(35 + parity))
                    .ok_or_else(|| {
                        TxRejected(format!(
                            "invalid chain id: {id} is too large for an EIP-155 signature"
                        ))
                    })?,
                None => 27 + parity,
            };
            (0u8, v, sig.r(), sig.s())
        }
        TxEnvelope::Eip1559(t) => {
            let sig = t.signature();
            (2u8, sig.v() as u64, sig.r(), sig.s())
        }
        TxEnvelope::Eip2930(_) => {
            return Err(TxRejected(
                "EIP-2930 transactions are not supported; use EIP-1559 or legacy".into(),
            ))
        }
        _ => {
            return Err(TxRejected(
                "transaction type not supported; use EIP-1559 or legacy".into(),
            ))
        }
    };
    let to = match env.kind() {
        TxKind::Call(a) => Some(a),
        TxKind::Create => None,
    };
    let rec = TxRecord {
        hash: *env.tx_hash(),
        from,
        to,
        nonce: env.nonce(),
        gas_limit: env.gas_limit(),
        tx_type,
        chain_id: env.chain_id(),
        gas_price: env.gas_price(),
        max_fee: env.max_fee_per_gas(),
        max_priority: env.max_priority_fee_per_gas().filter(|_| tx_type == 2),
        value: env.value(),
        input: env.input().clone(),
        v,
        r,
        s,
        location: None,
        receipt: None,
    };
    Ok(rec)
}

/// Genesis content.
#[derive(Debug, Clone, Default)]
pub struct Genesis {
    /// Number of the genesis block.
    pub number: u64,
    /// Unix time of the genesis block.
    pub timestamp: u64,
    /// Accounts.
    pub accounts: Vec<(Address, Account)>,
    /// Entities present at genesis.
    pub entities: Vec<EntityData>,
}

fn block_hash(number: u64, parent: &B256, timestamp: u64, txs: &[B256]) -> B256 {
    let mut pre = Vec::with_capacity(48 + 32 * txs.len());
    pre.extend_from_slice(&number.to_be_bytes());
    pre.extend_from_slice(parent.as_slice());
    pre.extend_from_slice(&timestamp.to_be_bytes());
    for t in txs {
        pre.extend_from_slice(t.as_slice());
    }
    keccak256(pre)
}

impl Chain {
    /// Open (or create) a chain, loading persisted state when `db` holds some.
    pub fn open(params: Params, genesis: Genesis, db: Option<Db>) -> Result<Self, DevnetError> {
        let mut c = Chain {
            params,
            accounts: HashMap::new(),
            entities: EntityStore::default(),
            blocks: Vec::new(),
            first_block: genesis.number,
            txs: HashMap::new(),
            pool: Vec::new(),
            seq: 0,
            db,
        };
        if let Some(db) = &c.db {
            if let Some(state) = db.load()? {
                if state.chain_id != c.params.chain_id {
                    return Err(DevnetError::ChainMismatch {
                        stored: state.chain_id,
                        configured: c.params.chain_id,
                    });
                }
                c.accounts = state.accounts;
                c.blocks = state.blocks;
                c.first_block = c.blocks.first().map_or(genesis.number, |b| b.number);
                c.txs = state.txs;
                for r in state.versions {
                    c.entities.load_row(r);
                }
                return Ok(c);
            }
        }
        // Fresh genesis.
        for (a, acct) in genesis.accounts {
            c.accounts.insert(a, acct);
        }
        let mut rows = Vec::new();
        for e in genesis.entities {
            rows.extend(c.entities.apply(genesis.number, e.key, Some(e)));
        }
        let hash = block_hash(genesis.number, &B256::ZERO, genesis.timestamp, &[]);
        let b = Block {
            number: genesis.number,
            hash,
            parent_hash: B256::ZERO,
            timestamp: genesis.timestamp,
            base_fee: c.params.base_fee,
            gas_limit: c.params.gas_limit,
            gas_used: 0,
            txs: vec![],
        };
        c.blocks.push(b.clone());
        if let Some(db) = &c.db {
            let accts: Vec<_> = c.accounts.iter().map(|(a, s)| (*a, s.clone())).collect();
            db.commit_block(c.params.chain_id, &b, &[], &accts, &rows)?;
        }
        Ok(c)
    }

    /// The head block.
    pub fn head(&self) -> &Block {
        self.blocks.last().expect("genesis exists")
    }

    /// The first retained block number.
    pub fn first_block(&self) -> u64 {
        self.first_block
    }

    /// A block by number.
    pub fn block(&self, number: u64) -> Option<&Block> {
        let i = number.checked_sub(self.first_block)?;
        self.blocks.get(usize::try_from(i).ok()?)
    }

    /// A header for a block below the genesis of a chain started at `start_block` > 0 (a seeded
    /// dataset whose entities were created in earlier blocks): an empty block, 2 s
    /// (`BLOCK_TIME_SECONDS`) before its successor, so that verifiers can read the creation
    /// time of seeded entities. `None` for a number at or above the first retained block.
    pub fn history_block(&self, number: u64) -> Option<Block> {
        let first = self.blocks.first()?;
        let behind = first.number.checked_sub(number).filter(|d| *d > 0)?;
        let timestamp = first.timestamp.saturating_sub(behind.saturating_mul(2));
        Some(Block {
            number,
            hash: block_hash(number, &B256::ZERO, timestamp, &[]),
            parent_hash: B256::ZERO,
            timestamp,
            base_fee: first.base_fee,
            gas_limit: first.gas_limit,
            gas_used: 0,
            txs: Vec::new(),
        })
    }

    /// A block by hash.
    pub fn block_by_hash(&self, hash: &B256) -> Option<&Block> {
        self.blocks.iter().rev().find(|b| &b.hash == hash)
    }

    /// Account state at head.
    pub fn account(&self, a: &Address) -> Account {
        self.accounts.get(a).cloned().unwrap_or_default()
    }

    /// Overwrite an account (dev/test helper).
    pub fn set_account(&mut self, a: Address, acct: Account) -> Result<(), DevnetError> {
        self.accounts.insert(a, acct.clone());
        if let Some(db) = &self.db {
            db.save_accounts(&[(a, acct)])?;
        }
        Ok(())
    }

    /// A mined or pending transaction.
    pub fn tx(&self, hash: &B256) -> Option<&TxRecord> {
        self.txs
            .get(hash)
            .or_else(|| self.pool.iter().find(|p| &p.tx.hash == hash).map(|p| &p.tx))
    }

    /// The pending nonce: account nonce plus consecutive pooled transactions.
    pub fn pending_nonce(&self, a: &Address) -> u64 {
        let mut n = self.account(a).nonce;
        while self.pool.iter().any(|p| p.tx.from == *a && p.tx.nonce == n) {
            n += 1;
        }
        n
    }

    /// Number of pooled transactions.
    pub fn pool_len(&self) -> usize {
        self.pool.len()
    }

    /// Decode, verify and pool a signed transaction. Returns its hash.
    pub fn submit_raw(&mut self, raw: &[u8]) -> Result<B256, TxRejected> {
        self.submit(decode_raw(raw)?)
    }

    /// Pool an unsigned transaction from `from` (impersonation, dev/test helper).
    pub fn submit_impersonated(&mut self, req: &CallRequest) -> Result<B256, TxRejected> {
        let from = req
            .from
            .ok_or_else(|| TxRejected("from is required".into()))?;
        let nonce = self.pending_nonce(&from);
        let gas = match req.gas {
            Some(g) => g,
            None => self
                .estimate_gas(req)
                .map_err(|r| TxRejected(format!("execution reverted: {}", r.revert.describe())))?,
        };
        let mut pre = b"impersonated".to_vec();
        pre.extend_from_slice(from.as_slice());
        pre.extend_from_slice(&nonce.to_be_bytes());
        pre.extend_from_slice(&req.input);
        let rec = TxRecord {
            hash: keccak256(pre),
            from,
            to: req.to,
            nonce,
            gas_limit: gas,
            tx_type: 2,
            chain_id: Some(self.params.chain_id),
            gas_price: None,
            max_fee: self.params.base_fee as u128 * 2,
            max_priority: Some(0),
            value: req.value,
            input: req.input.clone(),
            v: 0,
            r: U256::ZERO,
            s: U256::ZERO,
            location: None,
            receipt: None,
        };
        self.submit(rec)
    }

    fn submit(&mut self, rec: TxRecord) -> Result<B256, TxRejected> {
        if self.txs.contains_key(&rec.hash) || self.pool.iter().any(|p| p.tx.hash == rec.hash) {
            return Ok(rec.hash);
        }
        match rec.chain_id {
            Some(id) if id == self.params.chain_id => {}
            Some(id) => {
                return Err(TxRejected(format!(
                    "invalid chain id: transaction is for chain {id}, this node is chain {}",
                    self.params.chain_id
                )))
            }
            None => {
                return Err(TxRejected(
                    "only replay-protected (EIP-155) transactions allowed over RPC".into(),
                ))
            }
        }
        let to = rec.to.ok_or_else(|| {
            TxRejected("contract creation is disabled (no-EVM Arkiv executor)".into())
        })?;
        let acct = self.account(&rec.from);
        if rec.nonce < acct.nonce {
            return Err(TxRejected(format!(
                "nonce too low: next nonce {}, tx nonce {}",
                acct.nonce, rec.nonce
            )));
        }
        if rec.gas_limit > self.params.gas_limit {
            return Err(TxRejected("exceeds block gas limit".into()));
        }
        let intrinsic = intrinsic_gas(&rec.input);
        if rec.gas_limit < intrinsic {
            return Err(TxRejected(format!(
                "intrinsic gas too low: have {}, want {intrinsic}",
                rec.gas_limit
            )));
        }
        if rec.max_fee < self.params.base_fee as u128 {
            return Err(TxRejected(format!(
                "max fee per gas less than block base fee: maxFeePerGas: {}, baseFee: {}",
                rec.max_fee, self.params.base_fee
            )));
        }
        if rec.max_priority.is_some_and(|p| p > rec.max_fee) {
            return Err(TxRejected(
                "max priority fee per gas higher than max fee per gas".into(),
            ));
        }
        // Checked: gas × price + value can exceed 2^256 (a value near 2^256), which must not
        // wrap around to a small cost.
        let cost = U256::from(rec.gas_limit)
            .checked_mul(U256::from(rec.max_fee))
            .and_then(|c| c.checked_add(rec.value));
        if cost.is_none_or(|cost| acct.balance < cost) {
            let want = cost.map_or_else(|| "more than 2^256".to_string(), |c| c.to_string());
            return Err(TxRejected(format!(
                "insufficient funds for gas * price + value: address {} have {} want {want}",
                rec.from, acct.balance
            )));
        }
        if to == ARKIV_ADDRESS && !rec.value.is_zero() {
            return Err(TxRejected(
                "the Arkiv entrypoint does not accept value".into(),
            ));
        }
        if let Some(i) = self
            .pool
            .iter()
            .position(|p| p.tx.from == rec.from && p.tx.nonce == rec.nonce)
        {
            let old = &self.pool[i].tx;
            let bumped = |fee: u128| fee.saturating_add(fee / 10);
            if rec.max_fee < bumped(old.max_fee)
                || rec.max_priority.unwrap_or(0) < bumped(old.max_priority.unwrap_or(0))
            {
                return Err(TxRejected("replacement transaction underpriced".into()));
            }
            self.pool.remove(i);
        }
        self.seq += 1;
        let hash = rec.hash;
        self.pool.push(Pooled {
            seq: self.seq,
            tx: rec,
        });
        Ok(hash)
    }

    /// Simulate a call on the state of block `at` (head when `None`), as if included in the
    /// next block. Entities are read historically; accounts and entity nonces are head state.
    pub fn call(&self, req: &CallRequest, at: Option<u64>) -> Result<Bytes, SimRevert> {
        if req.to != Some(ARKIV_ADDRESS) {
            return Ok(Bytes::new());
        }
        let from = req.from.unwrap_or(Address::ZERO);
        match decode_call(&req.input).map_err(|revert| SimRevert { revert })? {
            Call::EntityNonce(a) => Ok(Bytes::from(self.account(&a).entity_nonce.abi_encode())),
            Call::Execute(ops) => {
                let fx = self.simulate(from, &ops, req.gas, &req.input, at)?;
                Ok(Bytes::from(fx.created.abi_encode()))
            }
        }
    }

    fn simulate(
        &self,
        from: Address,
        ops: &[NodeOp],
        gas: Option<u64>,
        input: &[u8],
        at: Option<u64>,
    ) -> Result<Effects, SimRevert> {
        let needed = intrinsic_gas(input) + ops_gas(ops);
        if gas.is_some_and(|g| g < needed) {
            return Err(SimRevert {
                revert: Revert::Message("out of gas".into()),
            });
        }
        let (acc, ents) = (HashMap::new(), HashMap::new());
        let head = self.head().number;
        let at = at.filter(|b| *b < head);
        let view = View {
            chain: self,
            accounts: &acc,
            entities: &ents,
            at,
        };
        exec::execute(
            &view,
            self.params.chain_id,
            from,
            at.unwrap_or(head) + 1,
            ops,
        )
        .map_err(|revert| SimRevert { revert })
    }

    /// Gas needed by a request (reverts like the real execution would).
    pub fn estimate_gas(&self, req: &CallRequest) -> Result<u64, SimRevert> {
        let intrinsic = intrinsic_gas(&req.input);
        if req.to != Some(ARKIV_ADDRESS) {
            return Ok(intrinsic);
        }
        let from = req.from.unwrap_or(Address::ZERO);
        match decode_call(&req.input).map_err(|revert| SimRevert { revert })? {
            Call::EntityNonce(_) => Ok(intrinsic),
            Call::Execute(ops) => {
                self.simulate(from, &ops, None, &req.input, None)?;
                Ok(intrinsic + ops_gas(&ops))
            }
        }
    }

    /// Mine one block from the pool at unix time `now`. Returns the new block number.
    pub fn mine(&mut self, now: u64) -> Result<u64, DevnetError> {
        let parent = self.head().clone();
        let number = parent.number + 1;
        let timestamp = now.max(parent.timestamp);
        let base_fee = self.params.base_fee;
        let mut accounts: HashMap<Address, Account> = HashMap::new();
        let mut entities: HashMap<B256, Option<EntityData>> = HashMap::new();
        let mut included: Vec<TxRecord> = Vec::new();
        let mut gas_used_total = 0u64;
        let mut log_index = 0u64;
        self.pool.sort_by_key(|p| p.seq);
        loop {
            let mut progressed = false;
            let mut i = 0;
            while i < self.pool.len() {
                let tx = &self.pool[i].tx;
                let acct = accounts
                    .get(&tx.from)
                    .cloned()
                    .unwrap_or_else(|| self.account(&tx.from));
                if tx.nonce < acct.nonce {
                    self.pool.remove(i);
                    continue;
                }
                if tx.nonce > acct.nonce || gas_used_total + tx.gas_limit > self.params.gas_limit {
                    i += 1;
                    continue;
                }
                let price = tx.effective_gas_price(base_fee);
                let max_cost = U256::from(tx.gas_limit) * U256::from(price) + tx.value;
                if acct.balance < max_cost {
                    self.pool.remove(i);
                    continue;
                }
                let mut tx = self.pool.remove(i).tx;
                let mut acct = acct;
                acct.nonce += 1;
                let (status, gas_used, logs, revert_data, fx) = {
                    let view = View {
                        chain: self,
                        accounts: &accounts,
                        entities: &entities,
                        at: None,
                    };
                    run_tx(&view, self.params.chain_id, &tx, number)
                };
                if let Some(fx) = fx {
                    acct.entity_nonce = fx.entity_nonce;
                    entities.extend(fx.entities);
                }
                acct.balance -= U256::from(gas_used) * U256::from(price);
                if status {
                    if let Some(to) = tx.to.filter(|t| *t != ARKIV_ADDRESS && !tx.value.is_zero()) {
                        acct.balance -= tx.value;
                        accounts.insert(tx.from, acct.clone());
                        let mut dest = accounts
                            .get(&to)
                            .cloned()
                            .unwrap_or_else(|| self.account(&to));
                        dest.balance += tx.value;
                        accounts.insert(to, dest);
                    }
                }
                accounts.insert(tx.from, acct);
                gas_used_total += gas_used;
                let n_logs = logs.len() as u64;
                tx.location = Some(TxLocation {
                    number,
                    hash: B256::ZERO,
                    index: included.len() as u64,
                });
                tx.receipt = Some(Receipt {
                    status,
                    gas_used,
                    cumulative_gas_used: gas_used_total,
                    effective_gas_price: price,
                    logs,
                    revert_data,
                    first_log_index: log_index,
                });
                log_index += n_logs;
                included.push(tx);
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        let tx_hashes: Vec<B256> = included.iter().map(|t| t.hash).collect();
        let hash = block_hash(number, &parent.hash, timestamp, &tx_hashes);
        for t in &mut included {
            if let Some(l) = &mut t.location {
                l.hash = hash;
            }
        }
        let block = Block {
            number,
            hash,
            parent_hash: parent.hash,
            timestamp,
            base_fee,
            gas_limit: self.params.gas_limit,
            gas_used: gas_used_total,
            txs: tx_hashes,
        };
        let mut rows: Vec<VersionRow> = Vec::new();
        let mut keys: Vec<_> = entities.into_iter().collect();
        keys.sort_by_key(|(k, _)| *k);
        for (k, e) in keys {
            rows.extend(self.entities.apply(number, k, e));
        }
        let accts: Vec<(Address, Account)> = accounts.into_iter().collect();
        if let Some(db) = &self.db {
            db.commit_block(self.params.chain_id, &block, &included, &accts, &rows)?;
        }
        for (a, s) in accts {
            self.accounts.insert(a, s);
        }
        for t in included {
            self.txs.insert(t.hash, t);
        }
        self.blocks.push(block);
        Ok(number)
    }

    /// Logs of a block with their positions: (tx, log index, log).
    pub fn block_logs(&self, b: &Block) -> Vec<(&TxRecord, u64, &LogEntry)> {
        let mut out = Vec::new();
        for h in &b.txs {
            if let Some(t) = self.txs.get(h) {
                if let Some(r) = &t.receipt {
                    for (i, l) in r.logs.iter().enumerate() {
                        out.push((t, r.first_log_index + i as u64, l));
                    }
                }
            }
        }
        out
    }
}

type TxOutcome = (bool, u64, Vec<LogEntry>, Option<Bytes>, Option<Effects>);

/// Execute one pooled transaction against a view (nonce and fees handled by the caller).
fn run_tx(view: &View<'_>, chain_id: u64, tx: &TxRecord, number: u64) -> TxOutcome {
    let intrinsic = intrinsic_gas(&tx.input);
    if tx.to != Some(ARKIV_ADDRESS) {
        return (true, intrinsic, vec![], None, None);
    }
    let revert = |r: Revert, gas: u64| (false, gas, vec![], Some(r.data()), None);
    let ops = match decode_call(&tx.input) {
        Ok(Call::Execute(ops)) => ops,
        Ok(Call::EntityNonce(_)) => return (true, intrinsic, vec![], None, None),
        Err(r) => return revert(r, intrinsic),
    };
    let needed = intrinsic + ops_gas(&ops);
    if needed > tx.gas_limit {
        return revert(Revert::Message("out of gas".into()), tx.gas_limit);
    }
    match exec::execute(view, chain_id, tx.from, number, &ops) {
        Ok(fx) => (true, needed, fx.logs.clone(), None, Some(fx)),
        Err(r) => revert(r, needed),
    }
}
