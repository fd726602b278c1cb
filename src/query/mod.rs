//! The analyst's query pack (`schemas/queries/*.sql`) and `eddy query`.
//!
//! Queries use ClickHouse's `{name:Type}` parameter syntax, which analysts' clients bind
//! server-side. Debian's 18.16 has no server-side parameters, so eddy binds them here: each
//! value is parsed as its declared type and rendered as a literal of that type (strings
//! escaped), never pasted as text. The same files therefore run on every server version.
use std::collections::BTreeMap;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Why a query could not be bound or run.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// No query by that name (the name, then the ones there are).
    #[error("unknown query `{0}`; available: {1}")]
    Unknown(String, String),
    /// A parameter the query needs was not given.
    #[error("query `{query}` needs parameter `{name}` ({ty}): pass --param {name}=...")]
    MissingParam {
        /// The query.
        query: String,
        /// The parameter.
        name: String,
        /// Its ClickHouse type.
        ty: String,
    },
    /// A parameter's value does not parse as its type.
    #[error("parameter `{name}`: `{value}` is not a valid {ty}")]
    BadValue {
        /// The parameter.
        name: String,
        /// The value given.
        value: String,
        /// Its ClickHouse type.
        ty: String,
    },
    /// The query declares a parameter of a type eddy cannot bind.
    #[error("parameter `{name}` has type {ty}, which eddy does not bind (String, Date, DateTime, Int*/UInt*, Float*)")]
    UnsupportedType {
        /// The parameter.
        name: String,
        /// Its ClickHouse type.
        ty: String,
    },
    /// A parameter was given that the query does not take.
    #[error("unknown parameter `{0}` for this query")]
    UnknownParam(String),
    /// ClickHouse failed the query.
    #[error("ClickHouse: {0}")]
    ClickHouse(#[from] clickhouse::error::Error),
    /// The database, or eddy's tables in it, do not exist: a wrong `clickhouse_database`, or
    /// a worker that never ran against it.
    #[error(
        "ClickHouse has no eddy tables there: {0}. To fix: point clickhouse_database \
         (EDDY_CLICKHOUSE_DATABASE, --clickhouse-database) at the database `eddy run` writes to, \
         or create the tables with `eddy migrate --clickhouse-database <name>` (a worker creates \
         them when it starts)"
    )]
    NoSchema(String),
}

/// (name, modern SQL, legacy SQL for servers without newer functions).
const PACK: &[(&str, &str, Option<&str>)] = &[
    (
        "summary",
        include_str!("../../schemas/queries/summary.sql"),
        None,
    ),
    (
        "health",
        include_str!("../../schemas/queries/health.sql"),
        None,
    ),
    (
        "runs_timeseries",
        include_str!("../../schemas/queries/runs_timeseries.sql"),
        None,
    ),
    (
        "terminations",
        include_str!("../../schemas/queries/terminations.sql"),
        None,
    ),
    (
        "run_loops",
        include_str!("../../schemas/queries/run_loops.sql"),
        Some(include_str!("../../schemas/queries/run_loops.legacy.sql")),
    ),
    (
        "top_looping_tools",
        include_str!("../../schemas/queries/top_looping_tools.sql"),
        None,
    ),
    (
        "loop_onset",
        include_str!("../../schemas/queries/loop_onset.sql"),
        None,
    ),
    (
        "loop_cost_per_agent_day",
        include_str!("../../schemas/queries/loop_cost_per_agent_day.sql"),
        None,
    ),
    (
        "agent_rollup",
        include_str!("../../schemas/queries/agent_rollup.sql"),
        None,
    ),
    (
        "steering",
        include_str!("../../schemas/queries/steering.sql"),
        None,
    ),
];

/// The names of the queries in the pack.
pub fn names() -> Vec<&'static str> {
    PACK.iter().map(|p| p.0).collect()
}

/// The SQL of a query for a server: the legacy variant on ClickHouse < 19.
pub fn sql_for(name: &str, server_version: &str) -> Result<&'static str, QueryError> {
    let (_, modern, legacy) = PACK
        .iter()
        .find(|p| p.0 == name)
        .ok_or_else(|| QueryError::Unknown(name.into(), names().join(", ")))?;
    let major: u32 = server_version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(u32::MAX);
    Ok(match legacy {
        Some(l) if major < 19 => l,
        _ => modern,
    })
}

/// Parameters a SQL text declares, in first-appearance order: (name, type).
pub fn params(sql: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, ty, _, _) in placeholders(sql) {
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, ty));
        }
    }
    out
}

/// (name, type, start, end) of each `{name:Type}` placeholder outside string literals.
fn placeholders(sql: &str) -> Vec<(String, String, usize, usize)> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'\'' => in_str = !in_str,
            // A `--` comment runs to the end of the line; quotes inside it are prose.
            b'-' if !in_str && b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'{' if !in_str => {
                if let Some(len) = sql[i + 1..].find('}') {
                    let inner = &sql[i + 1..i + 1 + len];
                    if let Some((n, t)) = inner.split_once(':') {
                        let n = n.trim();
                        if !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        {
                            out.push((n.to_string(), t.trim().to_string(), i, i + len + 2));
                        }
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Render `value` as a ClickHouse literal of type `ty`.
pub(crate) fn literal(name: &str, ty: &str, value: &str) -> Result<String, QueryError> {
    let bad = || QueryError::BadValue {
        name: name.into(),
        value: value.into(),
        ty: ty.into(),
    };
    match ty {
        "String" => {
            let mut s = String::with_capacity(value.len() + 2);
            s.push('\'');
            for c in value.chars() {
                match c {
                    '\\' => s.push_str("\\\\"),
                    '\'' => s.push_str("\\'"),
                    '\n' => s.push_str("\\n"),
                    '\r' => s.push_str("\\r"),
                    '\t' => s.push_str("\\t"),
                    '\0' => s.push_str("\\0"),
                    c => s.push(c),
                }
            }
            s.push('\'');
            Ok(s)
        }
        "UInt8" | "UInt16" | "UInt32" | "UInt64" => value
            .trim()
            .parse::<u64>()
            .map(|v| format!("to{ty}({v})"))
            .map_err(|_| bad()),
        "Int8" | "Int16" | "Int32" | "Int64" => value
            .trim()
            .parse::<i64>()
            .map(|v| format!("to{ty}({v})"))
            .map_err(|_| bad()),
        "Float32" | "Float64" => match value.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(format!("to{ty}({v:?})")),
            _ => Err(bad()),
        },
        "DateTime" => {
            let secs = parse_datetime(value).ok_or_else(bad)?;
            Ok(format!("toDateTime({secs}, 'UTC')"))
        }
        "Date" => {
            let secs = parse_datetime(&format!("{}T00:00:00Z", value.trim())).ok_or_else(bad)?;
            Ok(format!("toDate(toDateTime({secs}, 'UTC'))"))
        }
        _ => Err(QueryError::UnsupportedType {
            name: name.into(),
            ty: ty.into(),
        }),
    }
}

/// RFC 3339, `YYYY-MM-DD hh:mm:ss` (UTC), or epoch seconds.
pub fn parse_datetime(v: &str) -> Option<i64> {
    let v = v.trim();
    if let Ok(n) = v.parse::<i64>() {
        return Some(n);
    }
    let iso = if v.len() == 19 && v.as_bytes().get(10) == Some(&b' ') {
        format!("{}T{}Z", &v[..10], &v[11..])
    } else {
        v.to_string()
    };
    OffsetDateTime::parse(&iso, &Rfc3339)
        .ok()
        .map(|d| d.unix_timestamp())
}

/// Bind every placeholder of `sql` from `values`.
pub fn bind(
    query: &str,
    sql: &str,
    values: &BTreeMap<String, String>,
) -> Result<String, QueryError> {
    let declared = params(sql);
    for k in values.keys() {
        if !declared.iter().any(|(n, _)| n == k) {
            return Err(QueryError::UnknownParam(k.clone()));
        }
    }
    let mut out = String::with_capacity(sql.len());
    let mut last = 0;
    for (name, ty, start, end) in placeholders(sql) {
        let value = values.get(&name).ok_or_else(|| QueryError::MissingParam {
            query: query.into(),
            name: name.clone(),
            ty: ty.clone(),
        })?;
        out.push_str(&sql[last..start]);
        out.push_str(&literal(&name, &ty, value)?);
        last = end;
    }
    out.push_str(&sql[last..]);
    Ok(out)
}

/// Rows as (column names, text cells); `*_hex` columns come back as base64 without the suffix.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// The rows, each value as ClickHouse printed it.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The position of the column called `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// Writes the table aligned, for a terminal.
    pub fn print<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if let Some(wd) = widths.get_mut(i) {
                    *wd = (*wd).max(c.chars().count());
                }
            }
        }
        let line = |cells: &[String]| -> String {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
        };
        writeln!(w, "{}", line(&self.columns))?;
        writeln!(
            w,
            "{}",
            widths
                .iter()
                .map(|n| "-".repeat(*n))
                .collect::<Vec<_>>()
                .join("  ")
        )?;
        for r in &self.rows {
            writeln!(w, "{}", line(r))?;
        }
        writeln!(w, "({} rows)", self.rows.len())
    }
}

/// Execute a pack query against `client` (whose database is eddy's).
pub async fn execute(
    client: &clickhouse::Client,
    name: &str,
    values: &BTreeMap<String, String>,
) -> Result<Table, QueryError> {
    let version: String = client.query("SELECT version()").fetch_one().await?;
    let sql = sql_for(name, &version)?;
    let bound = bind(name, sql, values)?;
    fetch_tsv(client, &bound).await
}

/// Run SQL whose values are already literals (see `literal`) and read every cell as text.
pub async fn fetch_tsv(client: &clickhouse::Client, sql: &str) -> Result<Table, QueryError> {
    // `?` is the crate's own bind marker; our SQL never needs it, so escape any literal one.
    let text = format!("{} FORMAT TabSeparatedWithNames", sql.replace('?', "??"));
    let fetched = async {
        client
            .query(&text)
            .fetch_bytes("TabSeparatedWithNames")?
            .collect()
            .await
    };
    match fetched.await {
        Ok(bytes) => Ok(parse_tsv(&String::from_utf8_lossy(&bytes))),
        Err(e) => Err(match missing_schema(&e.to_string()) {
            Some(what) => QueryError::NoSchema(what),
            None => QueryError::ClickHouse(e),
        }),
    }
}

/// The server's own words when a query names a database or table that does not exist
/// (codes 81 and 60, the same on 18.16 and today's servers), else None.
fn missing_schema(message: &str) -> Option<String> {
    let unknown = ["Code: 81", "Code: 60", "UNKNOWN_DATABASE", "UNKNOWN_TABLE"];
    if !unknown.iter().any(|c| message.contains(c)) {
        return None;
    }
    // "... DB::Exception: Table demo.runs doesn't exist. (UNKNOWN_TABLE) ..."
    let from = message
        .find("Exception: ")
        .map_or(0, |i| i + "Exception: ".len());
    let what = &message[from..];
    let end = what
        .find("doesn't exist")
        .map_or(what.len(), |i| i + "doesn't exist".len());
    Some(what[..end].trim().to_string())
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some('0') => out.push('\0'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Parse `TabSeparatedWithNames` output into a [`Table`] (as [`execute`] returns it).
pub fn parse_tsv(text: &str) -> Table {
    let mut lines = text.lines();
    let mut columns: Vec<String> = lines
        .next()
        .map(|h| h.split('\t').map(unescape).collect())
        .unwrap_or_default();
    let mut rows: Vec<Vec<String>> = lines
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').map(unescape).collect())
        .collect();
    for (i, c) in columns.iter_mut().enumerate() {
        if let Some(base) = c.strip_suffix("_hex") {
            *c = base.to_string();
            for r in rows.iter_mut() {
                if let Some(cell) = r.get_mut(i) {
                    if let Ok(bytes) = hex::decode(cell.as_str()) {
                        use base64::Engine;
                        *cell = base64::engine::general_purpose::STANDARD.encode(bytes);
                    }
                }
            }
        }
    }
    Table { columns, rows }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_missing_database_or_table_is_named_in_the_servers_words() {
        let old = "bad response: Code: 81, e.displayText() = DB::Exception: Database nope doesn't exist, e.what() = DB::Exception";
        assert_eq!(
            missing_schema(old).as_deref(),
            Some("Database nope doesn't exist")
        );
        let new = "Code: 60. DB::Exception: Table demo.runs doesn't exist. (UNKNOWN_TABLE) (version 24.8)";
        assert_eq!(
            missing_schema(new).as_deref(),
            Some("Table demo.runs doesn't exist")
        );
        assert_eq!(
            missing_schema("Code: 241. DB::Exception: Memory limit exceeded"),
            None
        );
    }

    use super::*;

    #[test]
    fn strings_are_escaped_never_pasted() {
        let l = literal("p", "String", "x' OR 1=1 --\\").unwrap();
        assert_eq!(l, r"'x\' OR 1=1 --\\'");
        assert!(literal("n", "UInt32", "1; DROP TABLE runs").is_err());
        assert!(literal("f", "Float64", "NaN").is_err());
        assert_eq!(
            literal("t", "DateTime", "2026-01-01T00:00:00Z").unwrap(),
            "toDateTime(1767225600, 'UTC')"
        );
        assert_eq!(
            literal("t", "DateTime", "2026-01-01 00:00:00").unwrap(),
            "toDateTime(1767225600, 'UTC')"
        );
    }

    #[test]
    fn every_pack_query_declares_what_it_binds() {
        for name in names() {
            for version in ["18.16.1", "25.8.1"] {
                let sql = sql_for(name, version).unwrap();
                let ps = params(sql);
                assert!(!ps.is_empty(), "{name}");
                let values: BTreeMap<String, String> = ps
                    .iter()
                    .map(|(n, t)| {
                        let v = match t.as_str() {
                            "String" => "p",
                            "DateTime" => "2026-01-01T00:00:00Z",
                            _ => "60",
                        };
                        (n.clone(), v.to_string())
                    })
                    .collect();
                let bound = bind(name, sql, &values).unwrap();
                assert!(
                    placeholders(&bound).is_empty(),
                    "{name}: unbound placeholder left"
                );
            }
        }
    }

    #[test]
    fn missing_and_unknown_params_are_named() {
        let sql = sql_for("summary", "25.1").unwrap();
        let e = bind("summary", sql, &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs parameter `from` (DateTime)"), "{e}");
        let mut v = BTreeMap::new();
        v.insert("nope".to_string(), "1".to_string());
        assert!(bind("summary", sql, &v).is_err());
    }

    #[test]
    fn hex_columns_become_base64() {
        let t = parse_tsv("fingerprint_hex\thits\n616263\t2\n");
        assert_eq!(t.columns, vec!["fingerprint", "hits"]);
        assert_eq!(t.rows[0][0], "YWJj");
    }
}
