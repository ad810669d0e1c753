//! What really happened in a lab run: who wrote what, from which address, when. Attacks never
//! read it to guess; the lab reads it to score their guesses.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Instant;

use alloy_primitives::{Address, B256};

/// One simulated user.
#[derive(Debug, Clone)]
pub struct User {
    /// Index in the population.
    pub index: usize,
    /// The wallet's address.
    pub wallet: Address,
    /// The network address of the user's device.
    pub ip: IpAddr,
    /// The user holds tokens from an earlier day (the lab's prologue); otherwise a new wallet.
    pub returning: bool,
    /// The user's device runs on the client's default stores (no token store, no scan cache).
    pub default_stores: bool,
    /// The second address the user's device connects from (same stores), if any.
    pub roaming_ip: Option<IpAddr>,
    /// The address of the user's second device (no scan cache, default stores), if any.
    pub second_device_ip: Option<IpAddr>,
}

impl User {
    /// Every address the user sends from.
    pub fn addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        std::iter::once(self.ip)
            .chain(self.roaming_ip)
            .chain(self.second_device_ip)
    }
}

/// One write, as the user saw it.
#[derive(Debug, Clone)]
pub struct Write {
    /// The writer.
    pub user: usize,
    /// The session (index into [`Truth::sessions`]).
    pub session: usize,
    /// When `createEntity` was called.
    pub requested: Instant,
    /// When it resolved.
    pub resolved: Instant,
    /// The written record, or why the write failed.
    pub outcome: Result<Written, String>,
    /// The `minAnonymity` asked for.
    pub min_anonymity: u64,
    /// A payload large enough for the 4 096-byte envelope.
    pub big: bool,
}

/// A record the user saw written.
#[derive(Debug, Clone)]
pub struct Written {
    /// The entity key.
    pub entity_key: B256,
    /// The one-time owner.
    pub owner: Address,
    /// The relayer's URL (empty when recovered).
    pub relayer: String,
}

/// One session of a user.
#[derive(Debug, Clone)]
pub struct Session {
    /// The user.
    pub user: usize,
    /// When the session started building its client.
    pub started: Instant,
    /// When it ended.
    pub ended: Instant,
    /// Why it could not start, if it could not.
    pub error: Option<String>,
    /// The address it sent from.
    pub ip: IpAddr,
    /// It ran on the client's default stores (no token store passed): it could spend only
    /// tokens it fetched itself.
    pub default_stores: bool,
}

/// One `myEntities` call.
#[derive(Debug, Clone)]
pub struct Scan {
    /// The user.
    pub user: usize,
    /// The session.
    pub session: usize,
    /// When it started and ended.
    pub started: Instant,
    /// When it ended.
    pub ended: Instant,
    /// Records it returned.
    pub found: usize,
}

/// Everything the lab knows happened.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    /// The users.
    pub users: Vec<User>,
    /// Their sessions.
    pub sessions: Vec<Session>,
    /// Their writes.
    pub writes: Vec<Write>,
    /// Their scans.
    pub scans: Vec<Scan>,
}

impl Truth {
    /// The user who sends from `ip`.
    pub fn user_of_ip(&self, ip: IpAddr) -> Option<usize> {
        self.users
            .iter()
            .find(|u| u.addresses().any(|a| a == ip))
            .map(|u| u.index)
    }

    /// The session that wrote each one-time owner's record.
    pub fn session_of_owner(&self) -> BTreeMap<Address, usize> {
        self.writes
            .iter()
            .filter_map(|w| w.outcome.as_ref().ok().map(|o| (o.owner, w.session)))
            .collect()
    }

    /// The writer of each written entity.
    pub fn writer_of_entity(&self) -> BTreeMap<B256, usize> {
        self.writes
            .iter()
            .filter_map(|w| w.outcome.as_ref().ok().map(|o| (o.entity_key, w.user)))
            .collect()
    }

    /// The writer of each one-time owner.
    pub fn writer_of_owner(&self) -> BTreeMap<Address, usize> {
        self.writes
            .iter()
            .filter_map(|w| w.outcome.as_ref().ok().map(|o| (o.owner, w.user)))
            .collect()
    }

    /// The users who wrote at least one record.
    pub fn writers(&self) -> BTreeSet<usize> {
        self.writes
            .iter()
            .filter(|w| w.outcome.is_ok())
            .map(|w| w.user)
            .collect()
    }
}
