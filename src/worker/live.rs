//! The coordinator's `Background` on the real servers: partition tasks that send through forks
//! of the worker's producer and restore from the changelog, flushes on ClickHouse and Kafka
//! (`super::Flusher`), and a rewind's transaction abort.
use super::coordinator::Backoff;
use super::partition::{self, Epoch};
use super::seams::{Background, Flushed};
use super::{Flusher, WorkerError};
use crate::emit::Producer;
use crate::source::{self, restore::restore_with};
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub(super) struct Live {
    flusher: Flusher,
    shared: Arc<partition::Shared>,
    /// Forked into each new partition task: the same producer as the flusher's, replaced with
    /// it when a rewind finds the producer unusable.
    forker: Arc<Mutex<Producer>>,
}

impl Live {
    pub fn new(flusher: Flusher, shared: Arc<partition::Shared>, forker: Producer) -> Self {
        Self {
            flusher,
            shared,
            forker: Arc::new(Mutex::new(forker)),
        }
    }
}

fn forker_poisoned() -> WorkerError {
    WorkerError::Poisoned(source::Poisoned("the partition tasks' producer"))
}

impl Background for Live {
    fn partition(&self, p: i32) -> Result<partition::Handle, WorkerError> {
        let emitter = self.forker.lock().map_err(|_| forker_poisoned())?.fork();
        let props = self.shared.kafka.client_props();
        let topic = self.shared.changelog_topic.clone();
        Ok(partition::Handle::spawn(
            self.shared.clone(),
            p,
            emitter,
            move || restore_with(&props, &topic, p),
        ))
    }

    fn flush(
        &self,
        epochs: Vec<Epoch>,
        carry: Vec<(i32, i64)>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, Flushed> {
        let f = self.flusher.clone();
        Box::pin(async move { f.flush(epochs, carry, &shutdown).await })
    }

    fn abort(&self, renew: bool) -> BoxFuture<'static, Result<(), WorkerError>> {
        let emitter = self.flusher.emitter.clone();
        let kafka = self.flusher.kafka.clone();
        let forker = self.forker.clone();
        let timeout = Duration::from_millis(self.flusher.worker.flush_timeout_ms);
        Box::pin(async move {
            let mut backoff = Backoff::new();
            let mut renew = renew;
            // Abort the transaction (exactly_once), retried while the brokers are away; or,
            // the producer being unusable, replace it (which aborts what it left open).
            loop {
                let mut em = emitter.clone().lock_owned().await;
                if renew {
                    let kafka = kafka.clone();
                    let made = tokio::task::spawn_blocking(move || Producer::new(&kafka))
                        .await
                        .map_err(WorkerError::Join)?;
                    match made {
                        Ok(new) => {
                            tracing::warn!("the Kafka producer was unusable: replaced it");
                            metrics::counter!("eddy_producer_renewals_total").increment(1);
                            // New partition tasks send through the new producer.
                            *forker.lock().map_err(|_| forker_poisoned())? = new.fork();
                            *em = new;
                            return Ok(());
                        }
                        Err(e) if e.is_fenced() => return Err(WorkerError::Emit(e)),
                        Err(e) => {
                            drop(em);
                            tokio::time::sleep(backoff.next("making a new producer", &e)).await;
                            continue;
                        }
                    }
                }
                let aborted =
                    tokio::task::spawn_blocking(move || em.abort_transaction(timeout).map(|_| em))
                        .await
                        .map_err(WorkerError::Join)?;
                match aborted {
                    Ok(_) => return Ok(()),
                    Err(e) if e.is_fenced() => return Err(WorkerError::Emit(e)),
                    Err(e) if e.needs_new_producer() => renew = true,
                    Err(e) => {
                        tokio::time::sleep(backoff.next("aborting the transaction", &e)).await
                    }
                }
            }
        })
    }
}
