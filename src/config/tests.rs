//! Loading (file, env, flags), printing with secrets masked, and the checks by setting name.
use super::*;
use std::collections::BTreeMap;

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's own error type
fn flags_beat_env_and_env_beats_defaults() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("EDDY_INPUT_TOPIC", "from.env");
        jail.set_env("EDDY_GROUP_ID", "g-env");
        jail.set_env("EDDY_ENGINE__IDLE_TIMEOUT_MS", "1234");
        // Not settings: injected by Kubernetes or used by scripts. Must not break start-up.
        jail.set_env("EDDY_SERVICE_HOST", "10.0.0.1");
        jail.set_env("EDDY_PORT", "tcp://10.0.0.1:9464");
        jail.set_env("EDDY_STACK_DIR", "/tmp/x");
        let cfg = Config::load(None, &[("group_id", "g-flag".into())]).unwrap();
        assert_eq!(cfg.kafka.topics.input, "from.env");
        assert_eq!(cfg.kafka.group_id, "g-flag");
        assert_eq!(cfg.engine.idle_timeout_ms, 1234);
        assert_eq!(cfg.kafka.topics.output, "agent.signals");
        Ok(())
    });
}

#[test]
fn secrets_are_masked_in_the_printed_config() {
    let mut cfg = Config::default();
    cfg.clickhouse.password = Some("hunter2".into());
    cfg.kafka
        .consumer
        .insert("sasl.password".into(), "s3cret-kafka".into());
    cfg.kafka
        .producer
        .insert("sasl.username".into(), "svc-eddy".into());
    let shown = cfg.redacted().to_string();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(!shown.contains("s3cret-kafka"), "{shown}");
    assert!(
        shown.contains("svc-eddy"),
        "non-secrets stay visible: {shown}"
    );
    // Debug output goes to logs: it must not carry them either.
    let debug = format!("{cfg:?}");
    assert!(
        !debug.contains("hunter2") && !debug.contains("s3cret-kafka"),
        "{debug}"
    );
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's own error type
fn kafka_security_comes_from_env_and_reaches_every_client() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "eddy.toml",
            r#"
                    kafka_security_protocol = "SASL_SSL"
                    kafka_sasl_mechanism = "SCRAM-SHA-512"
                    [kafka_consumer]
                    "sasl.username" = "from-file"
                    "sasl.password" = "file-secret"
                    "fetch.min.bytes" = "1"
                    [kafka_producer]
                    "linger.ms" = "7"
                "#,
        )?;
        jail.set_env("EDDY_KAFKA_SASL_USERNAME", "svc-eddy");
        jail.set_env("EDDY_KAFKA_SASL_PASSWORD", "env-s3cret");
        jail.set_env("EDDY_KAFKA_SSL_CA_LOCATION", "/etc/eddy/ca.pem");
        jail.set_env("EDDY_CLICKHOUSE_URL", "https://ch.example:8443");
        jail.set_env("EDDY_CLICKHOUSE_CA_FILE", "/etc/eddy/ch-ca.pem");
        jail.set_env("EDDY_CLICKHOUSE_PASSWORD", "ch-s3cret");
        let cfg = Config::load(Some(Path::new("eddy.toml")), &[]).unwrap();
        assert_eq!(
            cfg.clickhouse.ca_file.as_deref(),
            Some("/etc/eddy/ch-ca.pem")
        );
        assert_eq!(cfg.clickhouse.password.as_deref(), Some("ch-s3cret"));
        let want = [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "svc-eddy"),
            ("sasl.password", "env-s3cret"),
            ("ssl.ca.location", "/etc/eddy/ca.pem"),
        ];
        let consumer = cfg.kafka.props_for(&cfg.kafka.consumer);
        let producer = cfg.kafka.props_for(&cfg.kafka.producer);
        let others: BTreeMap<_, _> = cfg.kafka.client_props().into_iter().collect();
        for (k, v) in want {
            // The env beats the file's table entry (sasl.username / sasl.password).
            assert_eq!(consumer.get(k).map(String::as_str), Some(v), "consumer {k}");
            assert_eq!(producer.get(k).map(String::as_str), Some(v), "producer {k}");
            assert_eq!(others.get(k).map(String::as_str), Some(v), "admin {k}");
        }
        assert_eq!(
            consumer.get("fetch.min.bytes").map(String::as_str),
            Some("1")
        );
        assert_eq!(producer.get("linger.ms").map(String::as_str), Some("7"));
        assert!(!others.contains_key("fetch.min.bytes"), "{others:?}");
        let shown = format!("{} {cfg:?}", cfg.redacted());
        for secret in ["env-s3cret", "file-secret", "ch-s3cret"] {
            assert!(!shown.contains(secret), "{secret} shown: {shown}");
        }
        assert!(shown.contains("svc-eddy"), "{shown}");
        Ok(())
    });
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's own error type
fn secrets_from_env_are_taken_verbatim() {
    for pw in [
        "123456", "true", "[abc]", "{x = 1}", " spaced ", "a\"b\\c", "1e5",
    ] {
        figment::Jail::expect_with(|jail| {
            jail.set_env("EDDY_KAFKA_SASL_PASSWORD", pw);
            jail.set_env("EDDY_CLICKHOUSE_PASSWORD", pw);
            jail.set_env("EDDY_KAFKA_SASL_USERNAME", "4242");
            jail.set_env("EDDY_GROUP_ID", "12345");
            jail.set_env("EDDY_DELIVERY", "exactly_once");
            let cfg = Config::load(None, &[]).unwrap_or_else(|e| panic!("{pw:?}: {e}"));
            assert_eq!(cfg.kafka.sasl_password.as_deref(), Some(pw));
            assert_eq!(cfg.clickhouse.password.as_deref(), Some(pw));
            assert_eq!(cfg.kafka.sasl_username.as_deref(), Some("4242"));
            assert_eq!(cfg.kafka.group_id, "12345");
            assert_eq!(cfg.kafka.delivery, Delivery::ExactlyOnce);
            Ok(())
        });
    }
}

#[test]
fn half_sasl_credentials_and_a_ca_for_plain_http_are_rejected() {
    let mut cfg = Config::default();
    cfg.kafka.sasl_mechanism = Some("SCRAM-SHA-512".into());
    cfg.kafka.sasl_username = Some("svc".into());
    let err = cfg.validate().unwrap_err().to_string();
    assert!(err.contains("EDDY_KAFKA_SASL_PASSWORD"), "{err}");
    let mut cfg = Config::default();
    cfg.clickhouse.ca_file = Some("/ca.pem".into());
    let err = cfg.validate().unwrap_err().to_string();
    assert!(err.contains("clickhouse_ca_file"), "{err}");
    // GSSAPI or OAUTHBEARER need no password: not our business.
    let mut cfg = Config::default();
    cfg.kafka
        .consumer
        .insert("sasl.mechanism".into(), "GSSAPI".into());
    cfg.validate().unwrap();
}

#[test]
fn example_file_documents_exactly_the_defaults() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/eddy.example.toml");
    let from_file: Config = Figment::from(Toml::file(path))
        .extract()
        .expect("eddy.example.toml parses");
    assert_eq!(from_file, Config::default());
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's own error type
fn fleet_settings_are_checked_by_name() {
    let bad = |f: crate::fleet::FleetConfig| {
        Config {
            fleet: f,
            ..Config::default()
        }
        .validate()
        .unwrap_err()
        .to_string()
    };
    let d = crate::fleet::FleetConfig::default;
    let e = bad(crate::fleet::FleetConfig {
        window_seconds: 90,
        ..d()
    });
    assert!(e.contains("fleet.window_seconds"), "{e}");
    let e = bad(crate::fleet::FleetConfig { ratio: 0.5, ..d() });
    assert!(e.contains("fleet.ratio"), "{e}");
    let e = bad(crate::fleet::FleetConfig {
        alert_topic: "agent.signals".into(),
        ..d()
    });
    assert!(e.contains("fleet.alert_topic"), "{e}");
    let e = bad(crate::fleet::FleetConfig { min_runs: 0, ..d() });
    assert!(e.contains("fleet.min_runs"), "{e}");
    figment::Jail::expect_with(|jail| {
        jail.set_env("EDDY_FLEET__WINDOW_SECONDS", "600");
        jail.set_env("EDDY_FLEET__ALERT_TOPIC", "x.alerts");
        let cfg = Config::load(None, &[]).unwrap();
        assert_eq!(cfg.fleet.window_seconds, 600);
        assert_eq!(cfg.fleet.alert_topic, "x.alerts");
        Ok(())
    });
}

#[test]
fn rejects_bad_values_with_the_setting_name() {
    let mut cfg = Config::default();
    cfg.clickhouse.database = "eddy; DROP".into();
    let err = cfg.validate().unwrap_err().to_string();
    assert!(err.contains("clickhouse_database"), "{err}");
}

#[test]
fn refuses_kafka_properties_that_would_break_the_commit_rule() {
    for (table, key) in [
        ("kafka_consumer", "enable.auto.commit"),
        ("kafka_consumer", "ENABLE.AUTO.OFFSET.STORE"),
        ("kafka_consumer", "isolation.level"),
        ("kafka_consumer", "group.id"),
        ("kafka_producer", "enable.idempotence"),
        ("kafka_producer", "transactional.id"),
        ("kafka_producer", "acks"),
    ] {
        let mut cfg = Config::default();
        let t = if table == "kafka_consumer" {
            &mut cfg.kafka.consumer
        } else {
            &mut cfg.kafka.producer
        };
        t.insert(key.into(), "x".into());
        let err = cfg.validate().unwrap_err().to_string();
        assert!(
            err.contains(table) && err.contains(&key.to_ascii_lowercase()),
            "{table} {key}: {err}"
        );
    }
    // Tuning properties still pass through.
    let mut cfg = Config::default();
    cfg.kafka
        .consumer
        .insert("fetch.max.bytes".into(), "52428800".into());
    cfg.kafka
        .producer
        .insert("compression.type".into(), "zstd".into());
    cfg.validate().unwrap();
}

#[test]
fn topic_replication_defaults_to_the_brokers_and_refuses_zero() {
    assert_eq!(Config::default().kafka.topics.replication, None);
    let mut cfg = Config::default();
    cfg.kafka.topics.replication = Some(0);
    let err = cfg.validate().unwrap_err().to_string();
    assert!(err.contains("topic_replication"), "{err}");
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's own error type
fn flat_keys_reach_their_sections_and_print_back_flat() {
    figment::Jail::expect_with(|jail| {
        // Numbers and booleans from the environment arrive as figment literals.
        jail.set_env("EDDY_TOPIC_PARTITIONS", "7");
        jail.set_env("EDDY_CREATE_TOPICS", "false");
        jail.set_env("EDDY_MIGRATE_ON_START", "false");
        jail.set_env("EDDY_BATCH_MAX_MESSAGES", "1000");
        jail.set_env("EDDY_TOPIC_REPLICATION", "3");
        jail.set_env("EDDY_TOPIC_MAX_MESSAGE_BYTES", "2000000");
        jail.set_env("EDDY_CLICKHOUSE_RETENTION_DAYS", "30");
        jail.set_env("EDDY_DLQ_MAX_PAYLOAD_BYTES", "1234");
        jail.set_env("EDDY_UI_ADDR", "0.0.0.0:1");
        jail.set_env("EDDY_OTLP_DEFAULT_PROJECT", "99");
        let flags = [("clickhouse_url", "http://ch:8123".to_string())];
        let cfg = Config::load(None, &flags).unwrap();
        assert_eq!(cfg.kafka.topics.partitions, 7);
        assert!(!cfg.kafka.topics.create);
        assert!(!cfg.worker.migrate_on_start);
        assert_eq!(cfg.worker.batch_max_messages, 1000);
        assert_eq!(cfg.kafka.topics.replication, Some(3));
        assert_eq!(cfg.kafka.topics.max_message_bytes, Some(2_000_000));
        assert_eq!(cfg.clickhouse.retention_days, 30);
        assert_eq!(cfg.kafka.dlq_max_payload_bytes, 1234);
        assert_eq!(cfg.ui.addr, "0.0.0.0:1");
        assert_eq!(cfg.ingest.otlp_default_project, "99");
        assert_eq!(cfg.clickhouse.url, "http://ch:8123");
        let printed = serde_json::to_value(&cfg).unwrap();
        assert_eq!(printed["topic_partitions"], 7);
        assert_eq!(printed["create_topics"], false);
        let back: Config = serde_json::from_value(printed).unwrap();
        assert_eq!(back, cfg);
        Ok(())
    });
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's own error type
fn unknown_and_mistyped_keys_are_named_with_their_source() {
    figment::Jail::expect_with(|jail| {
        jail.create_file("eddy.toml", "bogus_key = 1\n")?;
        let err = Config::load(Some(Path::new("eddy.toml")), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown field: found `bogus_key`") && err.contains("eddy.toml"),
            "{err}"
        );
        jail.set_env("EDDY_TOPIC_PARTITIONS", "abc");
        let err = Config::load(None, &[]).unwrap_err().to_string();
        assert!(
            err.contains("expected i32 for key \"TOPIC_PARTITIONS\""),
            "{err}"
        );
        Ok(())
    });
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's own error type
fn secret_tables_read_the_same_from_file_and_env_and_are_masked() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "eddy.toml",
            r#"
                ui_trusted_proxies = ["10.0.0.0/8"]
                [ingest_api_keys]
                "kw_FILEKEYFILEKEY" = "from-file"
                [ui_tokens]
                "file-token-0123456789" = "file-user"
            "#,
        )?;
        let cfg = Config::load(Some(Path::new("eddy.toml")), &[]).unwrap();
        assert_eq!(cfg.ingest.api_keys["kw_FILEKEYFILEKEY"], "from-file");
        assert_eq!(cfg.ui.tokens["file-token-0123456789"], "file-user");
        assert_eq!(cfg.ui.trusted_proxies, ["10.0.0.0/8"]);
        // The environment's text form replaces the file's table; upper case and base64
        // padding survive, which EDDY_INGEST_API_KEYS__<key> names cannot carry.
        jail.set_env(
            "EDDY_INGEST_API_KEYS",
            "kw_UPPERCASEKEY=proj-a,\nkw_other=proj-b",
        );
        jail.set_env("EDDY_UI_TOKENS", "QUJDREVGR0hJSktMTU5PUA===ops");
        jail.set_env("EDDY_UI_TRUSTED_PROXIES", "127.0.0.2, 10.1.0.0/16");
        jail.set_env("EDDY_UI_PROXY_USER_HEADER", "X-Auth-Request-User");
        let cfg = Config::load(Some(Path::new("eddy.toml")), &[]).unwrap();
        let keys: Vec<(&str, &str)> = cfg
            .ingest
            .api_keys
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            keys,
            [("kw_UPPERCASEKEY", "proj-a"), ("kw_other", "proj-b")]
        );
        let tokens: Vec<(&str, &str)> = cfg
            .ui
            .tokens
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(tokens, [("QUJDREVGR0hJSktMTU5PUA==", "ops")]);
        assert_eq!(cfg.ui.trusted_proxies, ["127.0.0.2", "10.1.0.0/16"]);
        assert_eq!(cfg.ui.proxy_user_header, "X-Auth-Request-User");
        let shown = format!("{} {cfg:?}", cfg.redacted());
        for secret in ["UPPERCASEKEY", "kw_other", "QUJDREVG"] {
            assert!(!shown.contains(secret), "{secret} shown: {shown}");
        }
        for name in ["proj-a", "proj-b", "\"ops\"", "10.1.0.0/16"] {
            assert!(shown.contains(name), "{name} not shown: {shown}");
        }
        // A malformed entry is named by position, never by its text.
        jail.set_env(
            "EDDY_UI_TOKENS",
            "QUJDREVGR0hJSktMTU5PUA==ops,NOEQUALSIGNSECRET",
        );
        let err = Config::load(None, &[]).unwrap_err().to_string();
        assert!(
            err.contains("entry #2") && err.contains("ui_tokens"),
            "{err}"
        );
        assert!(!err.contains("NOEQUALSIGNSECRET"), "{err}");
        Ok(())
    });
}

#[test]
fn ui_access_settings_are_checked_by_name() {
    let bad = |f: &dyn Fn(&mut UiConfig)| {
        let mut cfg = Config::default();
        f(&mut cfg.ui);
        cfg.validate().unwrap_err().to_string()
    };
    let e = bad(&|u| {
        u.tokens.insert("short-SECRET".into(), "ops".into());
    });
    assert!(
        e.contains("ui_tokens: token #1") && !e.contains("SECRET"),
        "{e}"
    );
    let e = bad(&|u| {
        u.tokens
            .insert("with a space SECRET-0123".into(), "ops".into());
    });
    assert!(e.contains("token #1") && !e.contains("SECRET"), "{e}");
    let e = bad(&|u| u.trusted_proxies = vec!["10.0.0.0/33".into()]);
    assert!(
        e.contains("ui_trusted_proxies") && e.contains("10.0.0.0/33"),
        "{e}"
    );
    let e = bad(&|u| u.proxy_user_header = "X User".into());
    assert!(e.contains("ui_proxy_user_header"), "{e}");
    let e = bad(&|u| {
        u.insecure_open = true;
        u.trusted_proxies = vec!["127.0.0.1".into()];
    });
    assert!(e.contains("ui_insecure_open"), "{e}");
    // Nothing configured is valid configuration (the worker reads the same file); `eddy ui`
    // itself refuses to start (ui::auth).
    Config::default().validate().unwrap();
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's own error type
fn destinations_come_from_file_and_environment_with_secrets_verbatim_and_masked() {
    use crate::config::notify::Destination;
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "eddy.toml",
            r#"
[fleet.notify.destinations.oncall]
kind = "pagerduty"
severity = "critical"

[fleet.notify.destinations.team]
kind = "slack"
url = "https://hooks.slack.com/services/T0/B0/FROMFILE"
"#,
        )?;
        // A routing key of digits stays text, leading zero included.
        jail.set_env(
            "EDDY_FLEET__NOTIFY__DESTINATIONS__ONCALL__ROUTING_KEY",
            "0123456789",
        );
        jail.set_env(
            "EDDY_FLEET__NOTIFY__DESTINATIONS__TEAM__URL",
            "https://hooks.slack.com/services/T1/B1/SLACKSECRET",
        );
        // A destination from the environment alone.
        jail.set_env("EDDY_FLEET__NOTIFY__DESTINATIONS__HOOK__KIND", "webhook");
        jail.set_env(
            "EDDY_FLEET__NOTIFY__DESTINATIONS__HOOK__URL",
            "https://receiver.example/eddy?token=QUERYSECRET",
        );
        jail.set_env(
            "EDDY_FLEET__NOTIFY__DESTINATIONS__HOOK__SECRET",
            "1234567890123456789",
        );
        jail.set_env("EDDY_FLEET__NOTIFY__MAX_ATTEMPTS", "3");
        let cfg = Config::load(Some(std::path::Path::new("eddy.toml")), &[]).unwrap();
        let n = &cfg.fleet.notify;
        assert_eq!(n.max_attempts, 3);
        let Destination::Pagerduty {
            routing_key,
            severity,
            url,
        } = &n.destinations["oncall"]
        else {
            panic!("oncall is not pagerduty")
        };
        assert_eq!(
            (routing_key.as_str(), severity.as_str(), url.as_str()),
            (
                "0123456789",
                "critical",
                "https://events.pagerduty.com/v2/enqueue"
            )
        );
        assert!(matches!(&n.destinations["team"],
            Destination::Slack { url } if url.ends_with("SLACKSECRET")));
        assert!(matches!(&n.destinations["hook"],
            Destination::Webhook { secret, .. } if secret == "1234567890123456789"));
        let shown = cfg.redacted().to_string();
        for secret in [
            "0123456789",
            "SLACKSECRET",
            "FROMFILE",
            "QUERYSECRET",
            "1234567890123456789",
        ] {
            assert!(!shown.contains(secret), "{secret}: {shown}");
        }
        for visible in [
            "oncall",
            "critical",
            "hooks.slack.com",
            "receiver.example",
            "webhook",
        ] {
            assert!(shown.contains(visible), "{visible}: {shown}");
        }
        assert!(!format!("{cfg:?}").contains("SLACKSECRET"));
        Ok(())
    });
}
