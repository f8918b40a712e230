//! A delete that failed while someone else than the plugin held its volume's
//! device: on a crowded host, another `dhv-conform` run's `losetup --find`
//! probing loop devices, a backup agent or the harness itself can hold a
//! loop device or a mounted file system for seconds, and the plugin's
//! `umount` or `losetup -d` then fails (or its detach is only deferred to the
//! last close) through no fault of its own. Such a failure never fails the
//! plugin: the holders are named, waited for (bounded by [`HELD_BOUND`]), and
//! the delete is made again once they let go, alone in the run; when a
//! holder that is not the plugin's still holds the device after that, the
//! check cannot judge the plugin and ends a skip, "inconclusive: ... held by
//! PID (CMD)", naming it (see [`Calls::inconclusive`]).
//!
//! The plugin's own processes (this run's calls and what they started) are
//! never an excuse: a delete that fails on a device its own daemon holds is
//! the plugin's failure.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{Calls, Shared};
use crate::conformance::host::DeviceHolder;
use crate::conformance::host::Host;

/// How long a delete waits for the holders that are not the plugin's to let
/// go of its volume's device before it is made again: a probe holds a
/// device for milliseconds, a loaded host's for seconds.
pub(super) const HELD_BOUND: Duration = Duration::from_secs(20);

/// The holders other than the plugin's of a device of what lies below
/// `dir`, and the kernel's holders, in words (off the runtime's threads: it
/// reads every process's descriptors).
pub(super) async fn holders(host: &Arc<dyn Host>, dir: &std::path::Path) -> Vec<String> {
    let (host, dir): (Arc<dyn Host>, PathBuf) = (host.clone(), dir.to_path_buf());
    tokio::task::spawn_blocking(move || {
        let (processes, kernel) = host.holders_not_the_plugins(&dir);
        if processes.is_empty() {
            return Vec::new();
        }
        processes
            .iter()
            .map(ToString::to_string)
            .chain(kernel)
            .collect()
    })
    .await
    .unwrap_or_default()
}

/// Waits, up to [`HELD_BOUND`], for the holders other than the plugin's of a
/// device of what lies below `dir` to let go; those still holding one then.
pub(super) async fn wait_let_go(host: &Arc<dyn Host>, dir: &std::path::Path) -> Vec<DeviceHolder> {
    let (host, dir): (Arc<dyn Host>, PathBuf) = (host.clone(), dir.to_path_buf());
    tokio::task::spawn_blocking(move || host.wait_holders_let_go(&dir, HELD_BOUND))
        .await
        .unwrap_or_default()
}

/// "PID 12 (blkid /dev/loop3; another program) has /dev/loop3 open; ...".
pub(super) fn named(holders: &[String]) -> String {
    holders.join("; ")
}

/// The check `id` cannot judge its plugin, for `why` (the first reason kept).
pub(super) fn inconclusive(shared: &Shared, id: &'static str, why: String) {
    crate::lock(&shared.inconclusive).entry(id).or_insert(why);
}

/// The words of a check made inconclusive by `holders` at `step`.
pub(super) fn held_words(step: &str, holders: &[String]) -> String {
    format!(
        "{step}: the delete failed while a device of the volume was held by {} (not the \
         plugin's process; made again once the holder let go, or after {} s, it failed again)",
        named(holders),
        HELD_BOUND.as_secs()
    )
}

/// A delete the manager sent for check `id`, made as [`Route`](super::route::Route)'s are
/// (see the module): `delete` makes the call, once more when a process
/// that is not the plugin's held a device below `dir` as the first failed.
pub(super) async fn delete_managed<F, Fut>(
    shared: &Shared,
    id: &'static str,
    dir: &std::path::Path,
    delete: F,
) -> crate::plugin::PluginCall<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = crate::plugin::PluginCall<()>>,
{
    let first = delete().await;
    if first.result.is_ok() || first.timed_out() {
        return first;
    }
    let held = holders(&shared.host, dir).await;
    if held.is_empty() {
        return first;
    }
    let waited = wait_let_go(&shared.host, dir).await;
    let second = delete().await;
    if second.result.is_err() {
        let still = holders(&shared.host, dir).await;
        if !(still.is_empty() && waited.is_empty()) {
            let holders = if still.is_empty() { held } else { still };
            inconclusive(shared, id, held_words("the manager's delete", &holders));
        }
    }
    second
}

impl Calls {
    /// This check cannot judge its plugin, for `why` (the first reason kept).
    pub(super) fn inconclusive(&self, why: String) {
        inconclusive(&self.shared, self.asker.id, why);
    }

    /// Why this check cannot judge its plugin, if it cannot.
    pub(super) fn why_inconclusive(&self) -> Option<String> {
        crate::lock(&self.shared.inconclusive)
            .get(self.asker.id)
            .cloned()
    }
}
