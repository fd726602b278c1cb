"""Client settings the way eddy's server reads them: `EDDY_*` variables of the same names, then
librdkafka properties passed as keywords. An argument given explicitly wins over the
environment; a keyword property wins over both.

| variable | client setting |
|---|---|
| `EDDY_KAFKA_BROKERS` | `bootstrap.servers` (Emitter, Guard) |
| `EDDY_INPUT_TOPIC` | the Emitter's topic (default `agent.steps`) |
| `EDDY_OUTPUT_TOPIC` | the Guard's topic (default `agent.signals`) |
| `EDDY_KAFKA_SECURITY_PROTOCOL` | `security.protocol` |
| `EDDY_KAFKA_SASL_MECHANISM` | `sasl.mechanism` |
| `EDDY_KAFKA_SASL_USERNAME` | `sasl.username` |
| `EDDY_KAFKA_SASL_PASSWORD` | `sasl.password` |
| `EDDY_KAFKA_SSL_CA_LOCATION` | `ssl.ca.location` |
| `EDDY_PROJECT_ID`, `EDDY_AGENT_NAME` | the Emitter's `project_id`, `agent_name` (client only) |
| `EDDY_INGEST_URL`, `EDDY_INGEST_API_KEY` | HttpGuard's bridge and key (client only) |
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

# The server's security keys, each the librdkafka property of the same name.
SECURITY_ENV = {
    "EDDY_KAFKA_SECURITY_PROTOCOL": "security.protocol",
    "EDDY_KAFKA_SASL_MECHANISM": "sasl.mechanism",
    "EDDY_KAFKA_SASL_USERNAME": "sasl.username",
    "EDDY_KAFKA_SASL_PASSWORD": "sasl.password",
    "EDDY_KAFKA_SSL_CA_LOCATION": "ssl.ca.location",
}

# confluent-kafka's own keys, not librdkafka properties: passed as they are. Their values are
# Python callables (AWS MSK IAM and OAUTHBEARER logins need `oauth_cb`) or a logger.
PASSTHROUGH = frozenset({"error_cb", "throttle_cb", "stats_cb", "oauth_cb", "on_delivery",
                         "on_commit", "logger"})


def env(name: str) -> Optional[str]:
    """The variable's value; an empty one means unset, as for the server."""
    v = os.environ.get(name)
    return v if v else None


def setting(given: Optional[str], name: str, default: Optional[str] = None) -> Optional[str]:
    return given if given else (env(name) or default)


def conf_key(k: str) -> str:
    """A keyword as a librdkafka property: `linger_ms` means `linger.ms`; confluent-kafka's own
    keys (`error_cb`, `oauth_cb`...) stay as they are."""
    if k in PASSTHROUGH or "." in k:
        return k
    return k.replace("_", ".")


def kafka_conf(brokers: Optional[str], user: Dict[str, Any]) -> Dict[str, Any]:
    """`bootstrap.servers` and security from the arguments and the environment, then the
    caller's keyword properties (which win)."""
    brokers = setting(brokers, "EDDY_KAFKA_BROKERS")
    if not brokers:
        raise ValueError("brokers is required (or set EDDY_KAFKA_BROKERS, as for the server)")
    conf: Dict[str, Any] = {"bootstrap.servers": brokers}
    for var, prop in SECURITY_ENV.items():
        v = env(var)
        if v is not None:
            conf[prop] = v
    conf.update({conf_key(k): v for k, v in user.items()})
    return conf
