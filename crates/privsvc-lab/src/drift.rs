//! The cover-drift phase: covers chosen among batches that expire before the user's record are
//! replaced by others once they expire, and the RPC, intersecting a user's fetch sets from
//! before and after, is left with the user's batch (`cover-drift`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_primitives::Address;
use privsvc_client::{BatchId, CreateParams, EntitiesQuery, Expires, PrivateClient, Wallet};
use rand::rngs::StdRng;
use rand::Rng;
use serde_json::Value;

use crate::active::{bounded, Phases};
use crate::population::Identity;
use crate::scenario::APP;

/// Blocks of an hour's lifetime (the shortest bucket) at the client's 2 s a block.
const HOUR_BLOCKS: u64 = 3_600 / privsvc_client::BLOCK_TIME_SECONDS;

/// Victims of the phase at most (relayer B takes `minAnonymity` up to 10 in the lab).
const MAX_VICTIMS: usize = 8;

/// A batch: `(block, creator)`.
type Batch = (u64, Address);

impl Phases<'_> {
    /// Two users of the crowd write records of an hour straight to relayer C, all along; the
    /// victims (twice the scenario's number, at most [`MAX_VICTIMS`]), each in a session of its
    /// own through the relay, write one record of a week to relayer B at the same time, all in
    /// one batch (`minAnonymity` the number of victims). Once the covers of the victims'
    /// batches are final (16 blocks), each victim scans (`my_entities` with `refresh`); the
    /// crowd stops; the devnet mines past the crowd's lifetime, so that every record of an
    /// hour expires; each victim scans again. The RPC intersects each victim's two fetch sets
    /// and guesses among what both share (among the first set when they share nothing); a
    /// guess of the victim's own batch wins. Chance is one batch of the first fetch set.
    /// With `Leaks::covers_from_live_listing`, every scan of a victim also fetches its batch
    /// with covers ranked by its key among the batches of its window listed at that moment.
    pub(crate) async fn cover_drift(&mut self, rng: &mut StdRng) {
        let stack = self.stack();
        let c = stack.url("C");
        let crowd = self.victims(rng, 2);
        let victims = self.victims(rng, (2 * self.world.scenario.victims).min(MAX_VICTIMS));
        let leak = self.world.scenario.leaks.covers_from_live_listing;
        let stop = Arc::new(AtomicBool::new(false));
        let mut crowd_tasks = Vec::new();
        for id in &crowd {
            let Some(client) = self.direct_client(id, &c).await else {
                continue;
            };
            crowd_tasks.push(crate::active::spawn_crowd_writer(
                client,
                stop.clone(),
                rng.gen(),
                300..1_500,
            ));
        }
        // The crowd's batches fill the windows before and around the victims'.
        tokio::time::sleep(Duration::from_secs(4)).await;
        // The victims write to B, all in one batch (each asks for as many records in its batch
        // as there are victims): no batch of the crowd's (at C) holds a record that outlives
        // it, and no other victim's batch can be a cover.
        let b_url = stack.url("B");
        let together = victims.len() as u64;
        let this = &*self;
        let clients: Vec<(Identity, PrivateClient)> =
            futures::future::join_all(victims.iter().map(|v| {
                let b_url = b_url.clone();
                async move {
                    let client = this
                        .client(v, Some(vec![b_url]), &[], |b| {
                            b.min_anonymity(together).max_hold_ms(30_000)
                        })
                        .await?;
                    Some((v.clone(), client))
                }
            }))
            .await
            .into_iter()
            .flatten()
            .collect();
        let params: Vec<CreateParams> = clients
            .iter()
            .map(|_| {
                CreateParams::new(
                    format!("kept note {}", rng.gen::<u32>()).into_bytes(),
                    "text/plain",
                    Expires::Weeks(1),
                )
                .attribute("kind", "note")
            })
            .collect();
        let written = futures::future::join_all(clients.iter().zip(params).map(
            |((_, client), p)| async move {
                match tokio::time::timeout(Duration::from_secs(60), client.create_entity(p)).await {
                    Ok(Ok(w)) => Some(w),
                    Ok(Err(e)) => {
                        eprintln!("  cover drift: a victim's write failed: {e}");
                        None
                    }
                    Err(_) => {
                        eprintln!("  cover drift: a victim's write took over 60 s");
                        None
                    }
                }
            },
        ))
        .await;
        let mut own: BTreeMap<IpAddr, BatchId> = BTreeMap::new();
        for ((v, _), w) in clients.iter().zip(written) {
            let Some(w) = w else { continue };
            if let Some(b) = crate::leaky::batches_of(stack, &[w.entity_key])
                .await
                .first()
            {
                own.insert(v.ip, *b);
            }
        }
        self.out.ran("cover-drift");
        eprintln!(
            "  cover drift: {} victims, {} with a session, {} records located",
            victims.len(),
            clients.len(),
            own.len()
        );
        // Everything the victims fetch from here until the crowd's records expire is "before"
        // (a client fetches its own batch when its timer finds it due, not when asked).
        let first_scan = Instant::now();
        // The covers of every victim's batch are final 16 blocks after it, and a client fetches
        // its own batch once it is as old as the age it drew (at most `fetch_age_blocks.1`):
        // the devnet mines past both, the crowd's batches still live.
        let newest = own.values().map(|b| b.block).max().unwrap_or(0);
        let due = crate::population::lab_schedule(&self.world.scenario)
            .fetch_age_blocks
            .1;
        let final_at = newest + privsvc_client::COVER_WINDOW_BLOCKS.max(due) + 1;
        if let Ok(head) = stack.reader().block_number().await {
            if head < final_at {
                let _ = stack.devnet().mine_blocks(final_at - head);
            }
        }
        // Each victim's scan timer has run at least once past that age.
        let scan_max = crate::population::lab_schedule(&self.world.scenario).scan.1;
        tokio::time::sleep(scan_max + Duration::from_secs(2)).await;
        self.drift_scans(&clients, &own, leak).await;
        // The scans the clients' timers make after the app's (a client fetches on its timer).
        tokio::time::sleep(scan_max + Duration::from_secs(2)).await;
        stop.store(true, Ordering::SeqCst);
        for t in crowd_tasks {
            t.abort();
        }
        // Every record of an hour (the crowd's) expires.
        let second_scan = Instant::now();
        match stack.devnet().mine_blocks(HOUR_BLOCKS + 5) {
            Ok(head) => eprintln!("  cover drift: mined to block {head}"),
            Err(e) => eprintln!("  cover drift: the devnet did not mine: {e}"),
        }
        self.drift_scans(&clients, &own, leak).await;
        tokio::time::sleep(scan_max + Duration::from_secs(2)).await;

        let before = self.fetched_between(first_scan, second_scan);
        let after = self.fetched_between(second_scan, Instant::now());
        for (ip, mine) in &own {
            let mut first = before.get(ip).cloned().unwrap_or_default();
            let mine = (mine.block, mine.creator);
            let second = after.get(ip).cloned().unwrap_or_default();
            if !first.contains(&mine) {
                if !second.contains(&mine) {
                    continue;
                }
                // Fetched only after the crowd's records expired: that set alone.
                first = second.clone();
            }
            let shared: Vec<Batch> = first.intersection(&second).copied().collect();
            eprintln!(
                "  cover drift: {ip}: {} batches fetched before, {} after, {} in both",
                first.len(),
                second.len(),
                shared.len()
            );
            let candidates: Vec<Batch> = if shared.is_empty() {
                first.iter().copied().collect()
            } else {
                shared
            };
            let guess = crate::attacks::pick(&candidates, rng);
            self.out.push(
                "cover-drift",
                guess == Some(mine),
                drift_chance(first.len()),
            );
        }
    }

    /// Each victim's scan, all at once; with the leak, each also fetches its batch with covers
    /// ranked by its key among the batches listed now.
    async fn drift_scans(
        &self,
        clients: &[(Identity, PrivateClient)],
        own: &BTreeMap<IpAddr, BatchId>,
        leak: bool,
    ) {
        let stack = self.stack();
        futures::future::join_all(clients.iter().map(|(v, client)| async move {
            let _ = bounded(client.my_entities(&EntitiesQuery::new().refresh())).await;
            if let (true, Some(b)) = (leak, own.get(&v.ip)) {
                let group =
                    crate::leaky::keyed_group(stack, &[*b], v.wallet.address().as_slice(), false)
                        .await;
                let _ = privsvc_client::fetch_batches(v.reader(stack).as_ref(), APP, &group, None)
                    .await;
            }
        }))
        .await;
    }

    /// The batches each source fetched between `from` and `to`, as the RPC saw them.
    fn fetched_between(&self, from: Instant, to: Instant) -> BTreeMap<IpAddr, BTreeSet<Batch>> {
        let mut out: BTreeMap<IpAddr, BTreeSet<Batch>> = BTreeMap::new();
        let Some(tap) = self.stack().tap("rpc") else {
            return out;
        };
        for e in tap
            .exchanges()
            .into_iter()
            .filter(|e| e.at >= from && e.at < to)
        {
            let calls = match serde_json::from_slice(&e.request.body) {
                Ok(Value::Array(calls)) => calls,
                Ok(call) => vec![call],
                Err(_) => continue,
            };
            for call in calls {
                if call["method"] != "arkiv_query" {
                    continue;
                }
                if let Some(expression) = call["params"][0].as_str() {
                    out.entry(e.request.source)
                        .or_default()
                        .extend(crate::attacks::batches_in(expression));
                }
            }
        }
        out
    }
}

/// The chance of a `cover-drift` guess: one in the group of the user's batch and its covers
/// (what covers promise a batch fetched more than once: fetched twice with the same covers,
/// the group is what two fetch sets share), or one in the first fetch set when that is larger.
/// Covers that drift leave the user's batch alone in the intersection, and the guess beats
/// this.
fn drift_chance(first_fetch_set: usize) -> f64 {
    let group = crate::leaky::COVERS + 1;
    (1.0 / first_fetch_set.max(1) as f64).max(1.0 / group as f64)
}
