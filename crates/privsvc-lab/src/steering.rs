//! Active phases that steer writes away from relayers: the OHTTP relay answering errors of its
//! own outside the encapsulation (`relay-steering`), and another user publishing heartbeats
//! that name real relayers' URLs (`heartbeat-spam`).

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use privsvc_client::{CreateParams, PrivateClient};
use privsvc_ledger::Heartbeat;
use privsvc_ledger::{LedgerWriter, Operation};
use privsvc_ohttp::OhttpGateway;
use privsvc_testkit::{Action, Forwarder, Interceptor, TapRequest};
use rand::rngs::StdRng;
use rand::Rng;

use crate::active::{bounded, note, Phases};
use crate::population::Identity;

/// Dev account of the other user who publishes heartbeats naming real relayers' URLs (the
/// copier of the copies phase: another user of the app).
const STRANGER_ACCOUNT: usize = 4;
/// Writes each victim makes once steered (each lands at the steered-to relayer by luck with
/// probability 1/3 among three relayers).
const LATER_WRITES: usize = 2;
/// Writes a victim makes, at most, before the relay has answered for both A and B.
const SPENDING_WRITES: usize = 4;

/// The OHTTP relay answers 400, outside the encapsulation, to the first request each chosen
/// source sends for each of the chosen relayers; everything else is forwarded.
struct Steerer {
    sources: BTreeSet<IpAddr>,
    targets: Vec<String>,
    /// The (source, relayer) pairs it answered.
    forged: Mutex<BTreeSet<(IpAddr, String)>>,
}

impl Steerer {
    fn forged_for(&self, source: IpAddr) -> Vec<String> {
        self.forged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(s, _)| *s == source)
            .map(|(_, t)| t.clone())
            .collect()
    }
}

#[async_trait]
impl Interceptor for Steerer {
    async fn intercept(&self, request: &TapRequest, _forward: &Forwarder) -> Action {
        let Some(target) = request
            .header("x-privsvc-target")
            .map(|t| t.trim_end_matches('/').to_string())
        else {
            return Action::Forward;
        };
        if !self.sources.contains(&request.source)
            || !self
                .targets
                .iter()
                .any(|t| t.trim_end_matches('/') == target)
        {
            return Action::Forward;
        }
        let first = self
            .forged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((request.source, target));
        if !first {
            return Action::Forward;
        }
        Action::Respond {
            status: 400,
            content_type: Some("application/json".into()),
            body: br#"{"error":"bad request"}"#.to_vec(),
        }
    }
}

/// The relayer whose batch holds the record `key` (its creator), read by the lab.
async fn creator_of(phases: &Phases<'_>, key: B256) -> Option<Address> {
    phases
        .stack()
        .reader()
        .entity(key, None)
        .await
        .ok()
        .flatten()
        .and_then(|e| e.creator)
}

impl Phases<'_> {
    /// The relay steers the victims' writes to relayer C: once each victim's session is ready
    /// (relayers discovered, a ripe token), it answers 400 outside the encapsulation to the
    /// victim's first request for relayer A and for relayer B, and forwards everything else.
    /// Each victim writes until the relay has answered for both A and B (at most
    /// [`SPENDING_WRITES`] writes; each answer moves only the write it came in), then
    /// [`LATER_WRITES`] times more: a victim all of whose later writes land at C wins. A client
    /// that does not let a relay's answer mark a relayer bad picks among three relayers for
    /// each later write: chance is `(1/3)^LATER_WRITES`. With `Leaks::relay_errors_mark_bad`,
    /// the lab marks bad (`set_relayer_bad`) each relayer the relay answered for before the
    /// later writes.
    pub(crate) async fn relay_steering(&mut self, rng: &mut StdRng) {
        let Some(tap) = self.stack().tap("relay") else {
            return;
        };
        let victims = self.victims(rng, self.world.scenario.victims);
        let c = self.stack().relayer("C").address();
        let steerer = Arc::new(Steerer {
            sources: victims.iter().map(|v| v.ip).collect(),
            targets: vec![self.stack().url("A"), self.stack().url("B")],
            forged: Mutex::new(BTreeSet::new()),
        });
        let leak = self.world.scenario.leaks.relay_errors_mark_bad;
        let this = &*self;
        let clients: Vec<(IpAddr, PrivateClient)> = futures::future::join_all(
            victims
                .iter()
                .map(|v| async move { Some((v.ip, this.client(v, None, &[], |b| b).await?)) }),
        )
        .await
        .into_iter()
        .flatten()
        .collect();
        // Each victim holds a ripe token for every write it will make: a write that finds none
        // cannot go to A or B, whatever the relay does.
        let deadline = Instant::now() + Duration::from_secs(30);
        while clients
            .iter()
            .any(|(_, c)| c.ripe_tokens() < SPENDING_WRITES + LATER_WRITES)
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tap.set_interceptor(Some(steerer.clone()));
        // Writes before the scored ones: until the relay has answered for both A and B (each
        // answer steers at most the write it came in), at most `SPENDING_WRITES`.
        let plans: Vec<Vec<CreateParams>> = clients
            .iter()
            .map(|_| {
                (0..SPENDING_WRITES + LATER_WRITES)
                    .map(|_| note(rng))
                    .collect()
            })
            .collect();
        let steered =
            futures::future::join_all(clients.iter().zip(plans).map(|((ip, client), writes)| {
                let steerer = steerer.clone();
                async move {
                    let mut writes = writes.into_iter();
                    for params in writes.by_ref().take(SPENDING_WRITES) {
                        let _ = bounded(client.create_entity(params)).await;
                        if steerer.forged_for(*ip).len() >= 2 {
                            break;
                        }
                    }
                    if leak {
                        for target in steerer.forged_for(*ip) {
                            client.set_relayer_bad(&target, true);
                        }
                    }
                    let mut at_c = 0;
                    for params in writes.take(LATER_WRITES) {
                        if let Some(r) = bounded(client.create_entity(params)).await {
                            at_c += usize::from(creator_of(this, r.entity_key).await == Some(c));
                        }
                    }
                    at_c == LATER_WRITES
                }
            }))
            .await;
        tap.set_interceptor(None);
        let chance = (1.0f64 / 3.0).powi(LATER_WRITES as i32);
        for s in steered {
            self.out.push("relay-steering", s, chance);
        }
    }

    /// Another user publishes heartbeats naming relayer A's and B's URLs from its own account
    /// (with a gateway key of its own). The victims are users on the client's default stores
    /// who used the app before: each ran one session (relayers discovered, and pinned if its
    /// store keeps pins) before the heartbeats appeared. Then each starts a fresh session and
    /// writes twice. A victim whose session could not start, or none of whose writes landed at
    /// A or B, wins (the writes could not go anywhere but C). An unsteered session's two writes
    /// both avoid A and B with probability `(1/3)^2`: that is chance.
    pub(crate) async fn heartbeat_spam(&mut self, rng: &mut StdRng) {
        let stack = self.stack();
        let Ok(writer) = stack.writer(STRANGER_ACCOUNT).await else {
            return;
        };
        let mut victims: Vec<Identity> = self.victims(rng, self.world.scenario.victims);
        for v in &mut victims {
            v.default_stores = true;
        }
        let this = &*self;
        let name_of = |address: Address| {
            ["A", "B", "C"]
                .into_iter()
                .find(|n| stack.relayer(n).address() == address)
                .unwrap_or("?")
        };
        // The sessions of an earlier visit.
        for (i, client) in futures::future::join_all(
            victims
                .iter()
                .map(|v| async move { this.client(v, None, &[], |b| b).await }),
        )
        .await
        .into_iter()
        .enumerate()
        {
            let found: Vec<&str> = client
                .iter()
                .flat_map(|c| c.relayers())
                .map(|r| name_of(r.address))
                .collect();
            eprintln!("  heartbeat spam: victim {i}: the earlier visit found relayers {found:?}");
        }
        let mut published = Vec::new();
        for name in ["A", "B"] {
            let seed: [u8; 32] = rng.gen();
            let Ok(gateway) = OhttpGateway::from_seed(&seed) else {
                continue;
            };
            let heartbeat = Heartbeat {
                url: stack.url(name),
                address: writer.address(),
                chain_id: stack.devnet().chain_id(),
                version: privsvc_client::API_VERSION.into(),
                ohttp_key: Some(gateway.public_key()),
            };
            let salt: u128 = rng.gen();
            let (Ok(keys), Ok(create)) = (
                writer.predict_keys(&[salt]).await,
                heartbeat.to_create(salt),
            ) else {
                continue;
            };
            if writer.execute(&[Operation::Create(create)]).await.is_ok() {
                published.extend(keys);
            }
        }
        // The heartbeats are on the ledger before the fresh sessions start.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let plans: Vec<Vec<CreateParams>> = victims
            .iter()
            .map(|_| (0..2).map(|_| note(rng)).collect())
            .collect();
        let outcomes = futures::future::join_all(victims.iter().zip(plans).enumerate().map(
            |(i, (v, writes))| async move {
                let Some(client) = this.client(v, None, &[], |x| x).await else {
                    eprintln!("  heartbeat spam: victim {i}: the fresh session did not start");
                    return true;
                };
                let found: Vec<&str> = client
                    .relayers()
                    .iter()
                    .map(|r| name_of(r.address))
                    .collect();
                let mut at = Vec::new();
                for params in writes {
                    at.push(match bounded(client.create_entity(params)).await {
                        Some(r) => creator_of(this, r.entity_key).await.map_or("?", name_of),
                        None => "failed",
                    });
                }
                eprintln!(
                    "  heartbeat spam: victim {i}: the fresh session found {found:?}, wrote at {at:?}"
                );
                !at.iter().any(|n| *n == "A" || *n == "B")
            },
        ))
        .await;
        for won in outcomes {
            self.out.push("heartbeat-spam", won, 1.0 / 9.0);
        }
        // Remove the heartbeats, so that nothing after this phase meets them.
        for key in published {
            let _ = writer.execute(&[Operation::Delete { key }]).await;
        }
    }
}
