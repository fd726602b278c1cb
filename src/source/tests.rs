//! The pure parts of the source: rebalance bookkeeping and how connection failures are told
//! apart. The consumer itself is exercised against a real broker (tests/rebalance.rs).
use super::*;
use futures::FutureExt;

fn tpl(topic: &str, parts: &[i32]) -> TopicPartitionList {
    let mut t = TopicPartitionList::new();
    for p in parts {
        t.add_partition(topic, *p);
    }
    t
}

fn partitions(t: &TopicPartitionList) -> Vec<i32> {
    let mut v: Vec<i32> = t.elements().iter().map(|e| e.partition()).collect();
    v.sort_unstable();
    v
}

fn sorted(s: &HashSet<i32>) -> Vec<i32> {
    let mut v: Vec<i32> = s.iter().copied().collect();
    v.sort_unstable();
    v
}

/// Whether the worker loop was woken (a permit is stored when nobody waits yet).
fn woken(a: &Assignment) -> bool {
    a.wake.notified().now_or_never().is_some()
}

#[test]
fn cooperative_assignments_accumulate() {
    let mut a = Assignment::default();
    a.on_assign(&[0, 1]);
    a.on_assign(&[3]);
    assert_eq!(sorted(&a.assigned), vec![0, 1, 3]);
}

#[test]
fn a_revoke_waits_for_the_running_worker_to_drain() {
    let mut a = Assignment {
        defer_revokes: true,
        ..Assignment::default()
    };
    a.on_assign(&[0, 1, 2]);
    assert!(a.on_revoke(&[1], &tpl("in", &[1]), true));
    assert_eq!(sorted(&a.assigned), vec![0, 2]);
    assert!(a.revoked.is_empty(), "a drained partition is not dropped");
    assert_eq!(a.draining.as_ref().map(partitions), Some(vec![1]));
    assert!(woken(&a), "the loop may be idle, waiting for a message");
}

#[test]
fn revokes_arriving_before_the_drain_are_merged() {
    let mut a = Assignment {
        defer_revokes: true,
        ..Assignment::default()
    };
    a.on_assign(&[0, 1, 2, 3]);
    assert!(a.on_revoke(&[1], &tpl("in", &[1]), true));
    assert!(a.on_revoke(&[2, 3], &tpl("in", &[2, 3]), true));
    assert_eq!(a.draining.as_ref().map(partitions), Some(vec![1, 2, 3]));
    assert_eq!(sorted(&a.assigned), vec![0]);
}

#[test]
fn a_lost_or_eager_revoke_drops_the_partitions_at_once() {
    let mut a = Assignment {
        defer_revokes: true,
        ..Assignment::default()
    };
    a.on_assign(&[0, 1]);
    // Lost (session timed out) or eager protocol: the group already gave them away.
    assert!(!a.on_revoke(&[1], &tpl("in", &[1]), false));
    assert_eq!(a.revoked, vec![1]);
    assert!(a.draining.is_none());
    assert!(!woken(&a));
    assert_eq!(sorted(&a.assigned), vec![0]);
}

#[test]
fn a_revoke_while_the_worker_is_not_running_is_not_deferred() {
    // During shutdown (or before the loop starts) nothing would drain a deferred revoke.
    let mut a = Assignment::default();
    a.on_assign(&[0, 1]);
    assert!(!a.on_revoke(&[0, 1], &tpl("in", &[0, 1]), true));
    assert_eq!(a.revoked, vec![0, 1]);
    assert!(a.draining.is_none());
    assert!(a.assigned.is_empty());
}

/// The rebalance callback's context over a worker that is running (its revokes wait for it).
fn running_worker() -> RebalanceContext {
    RebalanceContext {
        topic: "in".into(),
        state: Arc::new(Mutex::new(Assignment {
            defer_revokes: true,
            ..Assignment::default()
        })),
        group: Arc::default(),
    }
}

#[test]
fn the_callback_defers_a_cooperative_revoke_to_a_healthy_running_worker() {
    let ctx = running_worker();
    let (assign, _) = ctx.answer(Rebalance::Assign, &[0, 1], &tpl("in", &[0, 1]));
    assert_eq!(assign, Answer::Assign { paused: false });
    let revoke = Rebalance::Revoke {
        cooperative: true,
        lost: false,
    };
    let (answer, _) = ctx.answer(revoke, &[1], &tpl("in", &[1]));
    assert_eq!(answer, Answer::Defer);
}

#[test]
fn a_poisoned_assignment_still_answers_librdkafka_and_wakes_the_worker() {
    let ctx = running_worker();
    let state = ctx.state.clone();
    let panicked = std::thread::spawn(move || {
        let _held = state.lock().unwrap();
        panic!("poisoning the assignment on purpose");
    })
    .join();
    assert!(panicked.is_err());
    // A revoke the healthy worker would drain is let go at once: nobody will drain it.
    let revoke = Rebalance::Revoke {
        cooperative: true,
        lost: false,
    };
    let (answer, held) = ctx.answer(revoke, &[1], &tpl("in", &[1]));
    assert_eq!(answer, Answer::Release);
    assert!(held.is_none());
    // Assigned partitions are taken, held back: nothing will process them.
    let (answer, _) = ctx.answer(Rebalance::Assign, &[2], &tpl("in", &[2]));
    assert_eq!(answer, Answer::Assign { paused: true });
    // The worker does not wait for its next message to find out.
    assert!(woken(&ctx.state.lock().unwrap_or_else(|p| p.into_inner())));
    let e = lock_assignment(&ctx.state).err().expect("still poisoned");
    assert!(e.to_string().contains("poisoned"), "{e}");
}

#[test]
fn only_credentials_and_unverifiable_certificates_end_the_connect_wait() {
    use RDKafkaErrorCode as C;
    assert!(is_refusal(
        Some(C::Authentication),
        "SASL authentication error"
    ));
    assert!(is_refusal(
        Some(C::SSL),
        "SSL handshake failed: certificate verify failed"
    ));
    assert!(is_refusal(
        Some(C::SSL),
        "broker certificate could not be VERIFIED"
    ));
    // A handshake cut short by a restarting broker is retried.
    assert!(!is_refusal(
        Some(C::SSL),
        "SSL handshake failed: connection reset"
    ));
    assert!(!is_refusal(Some(C::BrokerTransportFailure), "certificate"));
    assert!(!is_refusal(None, "certificate verify failed"));
}

#[test]
fn a_refused_login_names_the_user_and_mechanism_to_check() {
    let cfg = KafkaConfig {
        brokers: "b:9093".into(),
        sasl_username: Some("alice".into()),
        sasl_mechanism: Some("SCRAM-SHA-512".into()),
        ..KafkaConfig::default()
    };
    let SourceError::Security {
        brokers,
        reason,
        fix,
    } = security_error(&cfg, RDKafkaErrorCode::Authentication, "bad creds".into())
    else {
        panic!("not a security error");
    };
    assert_eq!(brokers, "b:9093");
    assert_eq!(reason, "bad creds");
    assert!(fix.contains("`alice`"), "{fix}");
    assert!(fix.contains("SCRAM-SHA-512"), "{fix}");
}

#[test]
fn an_unverified_certificate_names_the_ca_setting() {
    let cfg = KafkaConfig {
        ssl_ca_location: Some("/etc/ca.pem".into()),
        ..KafkaConfig::default()
    };
    let SourceError::Security { fix, .. } =
        security_error(&cfg, RDKafkaErrorCode::SSL, "verify failed".into())
    else {
        panic!("not a security error");
    };
    assert!(fix.contains("/etc/ca.pem"), "{fix}");
    assert!(fix.contains("kafka_ssl_ca_location"), "{fix}");
}
