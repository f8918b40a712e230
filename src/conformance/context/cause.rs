//! One cause, one finding, across checks that run side by side: the shape
//! of a failed call's error ([`Ctx::error_shape`]), by which two checks
//! tell that they met the same cause, and the checks of the run that others
//! wait for ([`Awaited`]), so that a check citing another's finding knows
//! that finding when it ends (nothing changes a verdict afterwards).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::Ctx;

/// An absolute path in an error text: up to a space, a quote or a separator.
static PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"/[^\s'"`:,;()]+"#).expect("valid regex"));

/// The shape of Nomad's error text for a failed call: paths become `{path}`
/// (each check has dirs of its own), then volume ids, names, parts of ids
/// and numbers as a residue's shape has them (see
/// [`residue`](super::residue)): what two failures of one cause share
/// whichever volume, check or round they met it in.
pub(crate) fn error_shape(error: &str, fixture: Option<&str>) -> String {
    let text = PATH.replace_all(error, "{path}");
    super::residue::shape(&text, fixture)
}

impl Ctx {
    /// The shape of a failed call's error text (see [`error_shape`]).
    pub fn error_shape(&self, error: &str) -> String {
        error_shape(error, self.calls.shared.settings.template.name.as_deref())
    }

    /// The id of the check this context runs.
    pub fn check_id(&self) -> &'static str {
        self.calls.asker.id
    }

    /// Publishes a fact for the check whose rule owns it.
    pub fn publish(&self, fact: super::Fact) {
        self.calls.shared.facts.publish(fact);
    }

    /// Waits until the check `id` has ended, when it is one of the run's
    /// checks that others wait for ([`Awaited`]); at once otherwise (it is
    /// not in this run, or it ended already).
    pub async fn after(&self, id: &'static str) {
        self.calls.shared.awaited.ended_of(id).await;
    }
}

/// The checks of the run that others wait for, until each has ended. The
/// engine names them before the run (only those the run selected) and puts
/// them first in their phase, so a check that waits for one never holds
/// the thread that one would run on.
#[derive(Debug)]
pub(crate) struct Awaited(tokio::sync::watch::Sender<BTreeSet<&'static str>>);

impl Default for Awaited {
    fn default() -> Self {
        Awaited(tokio::sync::watch::Sender::new(BTreeSet::new()))
    }
}

impl Awaited {
    /// These checks will run, and others may wait for them.
    pub fn expect(&self, ids: impl IntoIterator<Item = &'static str>) {
        self.0.send_modify(|pending| pending.extend(ids));
    }

    /// The check `id` has ended (its verdict is final).
    pub fn ended(&self, id: &str) {
        self.0.send_if_modified(|pending| pending.remove(id));
    }

    /// Resolves once `id` is not pending.
    async fn ended_of(&self, id: &str) {
        let mut pending = self.0.subscribe();
        // The sender lives as long as the run's shared state, which the
        // waiting check holds: the wait ends only by the check's end.
        let _ = pending.wait_for(|p| !p.contains(id)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cause_has_one_shape_whatever_the_volume_and_the_check() {
        let a = "error creating volume \"0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69\" with plugin \
                 \"p\": exit status 1: cannot lock /tmp/dhv-conform-Ab12/concurrency.create/volumes/.lock: busy";
        let b = "error creating volume \"3f1d4c4e-0b9c-4c4e-9a53-5a691f2d3c4b\" with plugin \
                 \"p\": exit status 1: cannot lock /tmp/dhv-conform-Zz99/lifecycle.restore/volumes/.lock: busy";
        assert_eq!(error_shape(a, None), error_shape(b, None));
        assert_eq!(
            error_shape(a, None),
            "error creating volume \"{id}\" with plugin \"p\": exit status {n}: cannot lock {path}: busy"
        );
        let other = "error creating volume \"3f1d4c4e-0b9c-4c4e-9a53-5a691f2d3c4b\" with plugin \
                     \"p\": exit status 1: no space left";
        assert_ne!(error_shape(a, None), error_shape(other, None));
    }

    #[test]
    fn a_wait_ends_when_the_awaited_check_ends_or_at_once_for_another() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let awaited = std::sync::Arc::new(Awaited::default());
        awaited.expect(["owner.check"]);
        // Not awaited: at once.
        rt.block_on(awaited.ended_of("other.check"));
        let ender = awaited.clone();
        let end = std::thread::spawn(move || ender.ended("owner.check"));
        rt.block_on(async {
            tokio::time::timeout(
                std::time::Duration::from_secs(10),
                awaited.ended_of("owner.check"),
            )
            .await
            .expect("the wait ends when the check ends")
        });
        end.join().unwrap();
    }
}
