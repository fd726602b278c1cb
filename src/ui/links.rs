//! The pages' links. Ids go into paths and query strings percent-encoded, so a `/`, `?` or `#`
//! in a run id stays part of that id; the template engine then escapes the URL as an attribute.
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// One path segment or query value.
fn part(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

/// A run's page.
pub(crate) fn run(project: &str, run: &str) -> String {
    format!("/runs/{}/{}", part(project), part(run))
}

/// The search for an agent's runs.
pub(crate) fn agent_runs(agent: &str) -> String {
    format!("/search?agent={}", part(agent))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_stay_inside_their_segment() {
        assert_eq!(super::run("p/1", "r 2?"), "/runs/p%2F1/r%202%3F");
        assert_eq!(super::agent_runs("a&b=c"), "/search?agent=a%26b%3Dc");
    }
}
