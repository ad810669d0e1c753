//! Relayer pins (docs/PROTOCOL.md §8.6): the first account pinned for a relayer URL
//! stays, in memory and on disk beside a file token store; the file is private (0600 in a
//! 0700 directory) and written through an unpredictable temporary name.

use std::sync::Arc;

use alloy_primitives::Address;
use privsvc_tokens::*;

const A: &str = "http://relayer-a.example";
const B: &str = "http://relayer-b.example";

fn exercise(pins: &dyn RelayerPins) {
    let (owner, stranger) = (Address::repeat_byte(1), Address::repeat_byte(3));
    assert_eq!(pins.get(A).unwrap(), None);
    assert_eq!(pins.pin(A, owner).unwrap(), owner);
    // The first account wins: a later pin for the same URL does not replace it.
    assert_eq!(pins.pin(A, stranger).unwrap(), owner);
    assert_eq!(pins.get(A).unwrap(), Some(owner));
    assert_eq!(pins.pin(B, stranger).unwrap(), stranger);
    assert_eq!(
        pins.list().unwrap(),
        vec![(A.to_string(), owner), (B.to_string(), stranger)]
    );
    assert!(pins.unpin(B).unwrap());
    assert!(!pins.unpin(B).unwrap());
    assert_eq!(pins.get(B).unwrap(), None);
}

#[test]
fn memory_pins_keep_the_first_account_and_are_the_stores() {
    exercise(&MemoryRelayerPins::default());
    let store = MemoryTokenStore::default();
    let owner = Address::repeat_byte(1);
    store.relayer_pins().unwrap().pin(A, owner).unwrap();
    // Every call hands out the same pins: a second client given this store sees the pin.
    assert_eq!(store.relayer_pins().unwrap().get(A).unwrap(), Some(owner));
}

#[test]
fn file_pins_survive_a_reopen_and_a_file_store_keeps_them_beside_its_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pins.json");
    exercise(&FileRelayerPins::open(&path).unwrap());
    let reopened = FileRelayerPins::open(&path).unwrap();
    assert_eq!(reopened.get(A).unwrap(), Some(Address::repeat_byte(1)));
    assert_eq!(reopened.get(B).unwrap(), None);

    let tokens = dir.path().join("tokens.json");
    let owner = Address::repeat_byte(9);
    {
        let store = FileTokenStore::open(&tokens).unwrap();
        store.relayer_pins().unwrap().pin(A, owner).unwrap();
    }
    assert!(FileTokenStore::relayer_pins_path(&tokens).exists());
    let store = FileTokenStore::open(&tokens).unwrap();
    let pins: Arc<dyn RelayerPins> = store.relayer_pins().unwrap();
    assert_eq!(pins.get(A).unwrap(), Some(owner));
    assert_eq!(pins.pin(A, Address::repeat_byte(3)).unwrap(), owner);
}

#[test]
fn a_pin_file_that_is_not_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pins.json");
    std::fs::write(&path, b"{not json").unwrap();
    let err = FileRelayerPins::open(&path).unwrap_err();
    assert!(err.to_string().contains("not a relayer pin file"), "{err}");
    std::fs::write(&path, br#"{"version":9,"relayers":{}}"#).unwrap();
    let err = FileRelayerPins::open(&path).unwrap_err();
    assert!(err.to_string().contains("unsupported version"), "{err}");
}

#[cfg(unix)]
#[test]
fn the_pin_file_is_private_and_written_through_an_unpredictable_name() {
    use std::os::unix::fs::{symlink, PermissionsExt as _};

    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("new").join("dir");
    let path = dir.join("pins.json");
    let pins = FileRelayerPins::open(&path).unwrap();
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // A name someone could guess (the process id) is a trap laid in advance: a symlink to a
    // file of the victim's. Writing the pins must neither follow it nor touch its target.
    let victim = root.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    symlink(
        &victim,
        dir.join(format!("pins.json.tmp-{}", std::process::id())),
    )
    .unwrap();
    symlink(
        &victim,
        dir.join(format!(".pins.json.tmp-{}", std::process::id())),
    )
    .unwrap();

    for i in 0..5u8 {
        pins.pin(&format!("http://r{i}.example"), Address::repeat_byte(i))
            .unwrap();
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    // Only the pin file and the two traps: no temporary file is left behind.
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(
        FileRelayerPins::open(&path).unwrap().list().unwrap().len(),
        5
    );
}
