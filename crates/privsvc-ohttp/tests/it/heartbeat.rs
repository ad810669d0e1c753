//! Reading live heartbeats from a devnet written by RpcWriter.

use std::time::Duration;

use privsvc_ohttp::{live_heartbeats, live_window_blocks};

use crate::common::{addr, Chain};

#[tokio::test]
async fn live_heartbeats_newest_first_within_two_intervals() {
    let chain = Chain::start().await;
    let interval = Duration::from_secs(10); // live window: 10 blocks
    assert_eq!(live_window_blocks(interval), 10);

    chain.heartbeat(3, "http://old.test", None).await;
    chain.mine(11);
    chain
        .heartbeat(0, "HTTP://Relayer-A.test/", Some("0102"))
        .await;
    chain.heartbeat(1, "http://relayer-b.test:8080", None).await;
    // The payload claims account 0 but account 2 created it: dropped.
    chain
        .heartbeat_claiming(2, addr(0), "http://relayer-a.test", None)
        .await;

    let live = live_heartbeats(chain.reader.as_ref(), interval)
        .await
        .unwrap();
    let urls: Vec<&str> = live.iter().map(|h| h.url.as_str()).collect();
    assert_eq!(
        urls,
        ["http://relayer-b.test:8080", "http://relayer-a.test"]
    );
    assert_eq!(live[0].creator, addr(1));
    assert_eq!(live[0].address, Some(addr(1)));
    assert_eq!(live[0].ohttp_key, None);
    assert_eq!(live[1].creator, addr(0));
    assert_eq!(live[1].ohttp_key.as_deref(), Some("0102"));
    assert!(live[0].created_at > live[1].created_at);

    // With a long interval the old heartbeat is live again.
    let all = live_heartbeats(chain.reader.as_ref(), Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all.last().unwrap().url, "http://old.test");
}
