//! A partition task on fakes (its restore handed in, what it sends kept): what it does with
//! the messages its restored state already covers.
use super::{Cmd, Counters, Epoch, Handle};
use crate::changelog;
use crate::config::WorkerConfig;
use crate::source::restore::Restored;
use crate::worker::fakes::{raw, row_offsets, shared, FakeSink};
use std::ops::Range;
use tokio::sync::oneshot;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// A task for partition 0 whose changelog says its state covers input offsets below `applied`.
fn restored_at(sh: &std::sync::Arc<super::Shared>, sink: &FakeSink, applied: i64) -> Handle {
    Handle::spawn(sh.clone(), 0, sink.clone(), move || {
        Ok(Restored {
            applied_offset: Some(applied),
            ..Restored::default()
        })
    })
}

/// Hand the task the messages at `offsets`, then a barrier; its epoch.
async fn epoch_after(h: &Handle, offsets: Range<i64>) -> Epoch {
    h.tx.send(Cmd::Msgs(offsets.map(|o| raw(0, o)).collect()))
        .unwrap();
    let (tx, rx) = oneshot::channel();
    h.tx.send(Cmd::Barrier(tx)).unwrap();
    rx.await.expect("the task answers its barrier").unwrap()
}

/// The input offset the epoch's meta record says the state covers.
fn meta_offset(e: &Epoch) -> i64 {
    let (key, value) = e.changelog.last().expect("a meta record");
    assert_eq!(
        key.as_slice(),
        changelog::META_KEY,
        "the meta record comes last"
    );
    changelog::decode_meta(value.as_deref().unwrap()).unwrap().0
}

#[test]
fn messages_the_restored_state_covers_are_skipped_and_counted_and_processing_resumes_at_its_offset()
{
    let sh = shared(&WorkerConfig::default());
    let sink = FakeSink::default();
    let e = rt().block_on(async {
        let h = restored_at(&sh, &sink, 5);
        epoch_after(&h, 2..8).await
    });
    // 2, 3 and 4 are in the restored state already; 5 is the first it does not have.
    assert_eq!(row_offsets(&e), vec![5, 6, 7]);
    assert_eq!(Counters::get(&sh.counters.skipped_restored), 3);
    assert_eq!(Counters::get(&sh.counters.events), 3);
    assert_eq!(e.next_offset, Some(8));
    assert_eq!(meta_offset(&e), 8);
    assert!(sink.dead_letters.lock().unwrap().is_empty());
}

#[test]
fn a_batch_the_restored_state_covers_entirely_commits_up_to_its_offset_and_applies_nothing() {
    // A previous owner made 2..5 durable but its commit was refused: the next owner reads them
    // again, and commits where the changelog already stands rather than keep that lag.
    let sh = shared(&WorkerConfig::default());
    let sink = FakeSink::default();
    let e = rt().block_on(async {
        let h = restored_at(&sh, &sink, 5);
        epoch_after(&h, 2..5).await
    });
    assert!(row_offsets(&e).is_empty());
    assert_eq!(Counters::get(&sh.counters.skipped_restored), 3);
    assert_eq!(Counters::get(&sh.counters.events), 0);
    assert_eq!(e.next_offset, Some(5));
    assert_eq!(meta_offset(&e), 5);
}
