//! The word lists the step view classifies by, in one place: what an output, an error or a
//! failure says is read against these (words lowercase, as `crate::engine::text::Words` gives
//! them). A change here changes verdicts, which the replays show.

/// States that say "not finished yet": a call answering one of them is a status check, and
/// the same answer several times in a row is waiting, not a loop.
pub(super) const IN_PROGRESS: &[&str] = &[
    "queued",
    "pending",
    "running",
    "in_progress",
    "inprogress",
    "in-progress",
    "starting",
    "creating",
    "containercreating",
    "provisioning",
    "building",
    "deploying",
    "waiting",
    "processing",
    "initializing",
    "initialising",
    "scheduled",
    "not_started",
];

/// The fields of an error object that hold its text, read in this order.
pub(super) const ERROR_FIELDS: &[&str] = &[
    "error",
    "errors",
    "err",
    "message",
    "msg",
    "detail",
    "details",
    "reason",
    "status",
    "status_code",
    "statusCode",
    "code",
    "stderr",
    "exception",
    "type",
    "title",
    "description",
    "error_message",
    "errorMessage",
];

/// The first words of a text output that make it a failure (when no success flag says).
pub(super) const FAILURE_MARKERS: &[&str] = &[
    "error",
    "traceback",
    "exception",
    "fatal",
    "failed",
    "failure",
];

/// Words and phrases of an error that say retrying may help.
pub(super) const RETRYABLE_WORDS: &[&str] = &[
    "408",
    "429",
    "500",
    "502",
    "503",
    "504",
    "timeout",
    "timedout",
    "etimedout",
    "econnreset",
    "econnrefused",
    "throttled",
    "throttling",
    "ratelimit",
    "ratelimited",
    "rate-limit",
    "rate-limited",
    "unavailable",
    "temporarily",
    "overloaded",
    "busy",
    "retry-after",
];
pub(super) const RETRYABLE_PHRASES: &[&[&str]] = &[
    &["rate", "limit"],
    &["rate", "limited"],
    &["timed", "out"],
    &["try", "again"],
    &["too", "many", "requests"],
    &["connection", "reset"],
    &["connection", "refused"],
    &["bad", "gateway"],
    &["service", "unavailable"],
    &["internal", "server", "error"],
];
/// Words and phrases of an error that say retrying cannot help.
pub(super) const PERMANENT_WORDS: &[&str] = &[
    "400",
    "401",
    "403",
    "404",
    "405",
    "410",
    "422",
    "unauthorized",
    "unauthenticated",
    "forbidden",
    "permission",
    "permissions",
    "denied",
    "auth",
    "authentication",
    "authorization",
    "credentials",
    "invalid",
    "schema",
    "enoent",
    "eacces",
    "eperm",
    "notfound",
    "validation",
    "malformed",
    "unsupported",
    "nonexistent",
    "modulenotfounderror",
    "filenotfounderror",
    // AWS error codes (`AccessDenied`, `AccessDeniedException`, EC2's `UnauthorizedOperation`),
    // BigQuery's "Unrecognized name".
    "accessdenied",
    "accessdeniedexception",
    "unauthorizedoperation",
    "unrecognized",
];
pub(super) const PERMANENT_PHRASES: &[&[&str]] = &[
    &["not", "found"],
    &["no", "such"],
    &["does", "not", "exist"],
    &["doesn't", "exist"],
    &["bad", "request"],
    &["missing", "required"],
    &["required", "field"],
    &["unknown", "tool"],
    &["unknown", "function"],
    &["unknown", "command"],
    &["unknown", "parameter"],
    &["unknown", "argument"],
    &["not", "allowed"],
    &["not", "permitted"],
    &["api", "key"],
    &["is", "required"],
    &["no", "module", "named"],
    &["cannot", "import", "name"],
    // IAM: "User: arn:... is not authorized to perform: s3:GetObject on resource: ...".
    &["not", "authorized"],
];

/// Words and phrases of a permanent error that say the thing asked for does not exist: a batch
/// of lookups meets them for every entity that is missing, each a different refusal. Unless the
/// missing thing is part of a schema ([`SCHEMA_WORDS`]): a column that does not exist is a
/// query to rewrite, not an entity to skip.
pub(super) const NOT_FOUND_WORDS: &[&str] = &["404", "410", "enoent", "notfound", "nonexistent"];
pub(super) const NOT_FOUND_PHRASES: &[&[&str]] = &[
    &["not", "found"],
    &["no", "such"],
    &["does", "not", "exist"],
    &["doesn't", "exist"],
];

pub(super) const SCHEMA_WORDS: &[&str] = &[
    "column",
    "relation",
    "table",
    "field",
    "attribute",
    "property",
    "parameter",
    "argument",
    "function",
];

/// A successful output made of one of these alone acknowledges, and carries nothing else.
pub(super) const ACK_WORDS: &[&str] = &[
    "ok",
    "okay",
    "done",
    "success",
    "succeeded",
    "saved",
    "updated",
    "written",
    "created",
    "deleted",
    "moved",
    "true",
    "applied",
    "complete",
    "completed",
];
/// How a successful text output says it found nothing.
pub(super) const EMPTY_PREFIXES: &[&str] = &[
    "no results",
    "no result",
    "no matches",
    "no match",
    "0 results",
    "found 0",
    "nothing found",
    "no files found",
    "no entries",
    "no items",
    "no records",
    "no rows",
    "empty",
];
