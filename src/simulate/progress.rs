//! Progress of a long `eddy simulate`, on a terminal or in a log.
use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar on a terminal; elsewhere (CI logs, pipes) a line per tenth of the work, for
/// work big enough to take a while.
pub(super) struct Progress {
    bar: ProgressBar,
    hidden: bool,
    what: &'static str,
    unit: &'static str,
    every: usize,
    done: usize,
}

impl Progress {
    pub(super) fn new(total: usize, what: &'static str, unit: &'static str, big: usize) -> Self {
        let bar = ProgressBar::new(total as u64);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "simulate: {what} [{{bar:30}}] {{pos}}/{{len}} {unit} {{per_sec}} eta {{eta}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        // Asked once: the bar answers under a lock.
        let hidden = bar.is_hidden();
        Progress {
            bar,
            hidden,
            what,
            unit,
            every: (total / 10).max(big),
            done: 0,
        }
    }

    pub(super) fn tick(&mut self) {
        self.done += 1;
        if self.hidden {
            if self.done.is_multiple_of(self.every) {
                let total = self.bar.length().unwrap_or(0);
                eprintln!(
                    "simulate: {} {}/{total} {}",
                    self.what, self.done, self.unit
                );
            }
        } else {
            self.bar.inc(1);
        }
    }

    pub(super) fn finish(self) {
        self.bar.finish_and_clear();
    }
}
