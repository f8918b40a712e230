//! The check catalogue: every id of docs/checks.md with its group, level and
//! rule. The ids are a public interface (filters, reports, snapshots, people's CI
//! configs): never rename one; retire it instead.

use super::checks::{self, CheckFn};
use crate::report::Level;

/// One row of the catalogue: the check's id, level and rule, and the function
/// that implements it.
#[derive(Debug, Clone, Copy)]
pub struct CheckSpec {
    /// The stable id, `group.name`.
    pub id: &'static str,
    /// must / should / info.
    pub level: Level,
    /// The rule, in one sentence.
    pub rule: &'static str,
    /// What runs it.
    pub(crate) run: CheckFn,
    /// The function's path below `checks`, for the test that ties ids to functions.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) function: &'static str,
}

impl PartialEq for CheckSpec {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for CheckSpec {}

impl CheckSpec {
    /// The group: the part of the id before the dot.
    pub fn group(&self) -> &'static str {
        self.id.split('.').next().unwrap_or(self.id)
    }

    /// Whether it is judged over every call of the run, after the other checks.
    pub fn is_run_wide(&self) -> bool {
        matches!(self.run, CheckFn::RunWide(_))
    }
}

/// A scenario check's entry: the function, boxed to one signature, and its path.
macro_rules! scenario {
    ($group:ident :: $name:ident) => {
        (
            CheckFn::Scenario(|ctx| Box::pin(checks::$group::$name(ctx))),
            concat!(stringify!($group), "::", stringify!($name)),
        )
    };
}

/// A run-wide check's entry.
macro_rules! run_wide {
    ($name:ident) => {
        (
            CheckFn::RunWide(checks::run_wide::$name),
            concat!("run_wide::", stringify!($name)),
        )
    };
}

const fn entry(
    id: &'static str,
    level: Level,
    rule: &'static str,
    (run, function): (CheckFn, &'static str),
) -> CheckSpec {
    CheckSpec {
        id,
        level,
        rule,
        run,
        function,
    }
}

const fn must(id: &'static str, rule: &'static str, f: (CheckFn, &'static str)) -> CheckSpec {
    entry(id, Level::Must, rule, f)
}

const fn should(id: &'static str, rule: &'static str, f: (CheckFn, &'static str)) -> CheckSpec {
    entry(id, Level::Should, rule, f)
}

const fn info(id: &'static str, rule: &'static str, f: (CheckFn, &'static str)) -> CheckSpec {
    entry(id, Level::Info, rule, f)
}

/// Every check, in catalogue order.
pub const CATALOGUE: &[CheckSpec] = &[
    // fingerprint
    must(
        "fingerprint.runs",
        "`PLUGIN fingerprint` starts and exits 0",
        scenario!(fingerprint::runs),
    ),
    must(
        "fingerprint.json",
        "fingerprint stdout decodes as Nomad decodes it: one JSON object, white space around it only",
        scenario!(fingerprint::json),
    ),
    must(
        "fingerprint.version",
        "`version` is a JSON string that go-version accepts",
        scenario!(fingerprint::version),
    ),
    should(
        "fingerprint.version-semver",
        "`version` is strict SemVer 2.0",
        scenario!(fingerprint::version_semver),
    ),
    must(
        "fingerprint.deadline",
        "every fingerprint call made alone finishes within 1 s (Nomad's effective limit); overruns seen only under the run's own load are evidence, not failures, and one made alone that the host's CPU wait explains counts only when it repeats alone",
        run_wide!(fingerprint_deadline),
    ),
    should(
        "fingerprint.stable",
        "repeated and concurrent (8 at once) fingerprints return the same version",
        scenario!(fingerprint::stable),
    ),
    should(
        "fingerprint.lookup",
        "a plugin given by path is one Nomad's lookup finds by its file name in its own dir (confined to the dir: no symlink leading outside)",
        scenario!(fingerprint::lookup),
    ),
    // create
    must(
        "create.succeeds",
        "create with the default request exits 0 within 60 s",
        scenario!(create::succeeds),
    ),
    must(
        "create.response",
        "create stdout decodes as Nomad decodes it: `path` a string, `bytes` an int64 if present",
        scenario!(create::response),
    ),
    must(
        "create.path-exists",
        "`path` is non-empty, absolute, and exists on disk after create",
        scenario!(create::path_exists),
    ),
    should(
        "create.path-in-volumes-dir",
        "`path` lies inside DHV_VOLUMES_DIR",
        scenario!(create::path_in_volumes_dir),
    ),
    should(
        "create.bytes-in-range",
        "when bytes > 0: capacity min <= bytes <= capacity max (when max > 0)",
        scenario!(create::bytes_in_range),
    ),
    must(
        "create.idempotent",
        "the same create again exits 0 with the same path, and the volume's files survive; a changed `bytes` is reported at should level",
        scenario!(create::idempotent),
    ),
    must(
        "create.distinct",
        "two volumes get different paths; creating the second leaves the first intact",
        scenario!(create::distinct),
    ),
    should(
        "create.update",
        "create again with the same id and a doubled capacity min exits 0 with the same path",
        scenario!(create::update),
    ),
    should(
        "create.parameters",
        "create with parameters `{}` and with hostile parameter values succeeds or fails cleanly; nothing runs from them",
        scenario!(create::parameters),
    ),
    must(
        "create.deadline",
        "every create call made alone finishes within 60 s",
        run_wide!(create_deadline),
    ),
    // delete
    must(
        "delete.succeeds",
        "delete of a created volume holding a file (as a volume in use does) exits 0 within 60 s",
        scenario!(delete::succeeds),
    ),
    must(
        "delete.removes",
        "the created path no longer exists after delete",
        scenario!(delete::removes),
    ),
    must(
        "delete.idempotent",
        "a second delete of the same volume exits 0",
        scenario!(delete::idempotent),
    ),
    must(
        "delete.never-created",
        "delete of a volume id that was never created exits 0",
        scenario!(delete::never_created),
    ),
    must(
        "delete.isolated",
        "deleting one volume leaves every other volume and its files intact",
        scenario!(delete::isolated),
    ),
    should(
        "delete.no-residue",
        "after every volume is deleted, nothing the plugin made remains in or beside the volumes dir; other checks that find the same leftovers cite this one",
        scenario!(delete::no_residue),
    ),
    should(
        "delete.auto-delete-safe",
        "Nomad's compensating delete (DHV_CREATED_PATH = the volumes dir, empty name and namespace) removes no other volume",
        scenario!(delete::auto_delete_safe),
    ),
    must(
        "delete.deadline",
        "every delete call made alone finishes within 60 s",
        run_wide!(delete_deadline),
    ),
    // lifecycle
    must(
        "lifecycle.restore",
        "after 4 creates, create again for all 4 at once (an agent restart) keeps paths and files",
        scenario!(lifecycle::restore),
    ),
    should(
        "lifecycle.reboot",
        "after creates that hold files, a reboot takes away every mount and loop device the plugin made (nothing is deleted); create again for every volume at once (client start) keeps paths and files, then each deletes cleanly",
        scenario!(lifecycle_reboot::reboot),
    ),
    should(
        "lifecycle.recreate",
        "create, delete, create of the same id succeeds and the new volume is empty",
        scenario!(lifecycle::recreate),
    ),
    should(
        "lifecycle.crash-create",
        "create killed part way (SIGKILL to its group), then create again succeeds and delete leaves nothing",
        scenario!(lifecycle::crash_create),
    ),
    should(
        "lifecycle.crash-delete",
        "delete killed part way, then delete again succeeds and the path is gone",
        scenario!(lifecycle::crash_delete),
    ),
    // concurrency
    must(
        "concurrency.create",
        "8 creates of distinct volumes at once (started aligned; 3 rounds, fresh volumes each) all succeed with distinct, existing paths",
        scenario!(concurrency::create),
    ),
    must(
        "concurrency.delete",
        "8 deletes of distinct volumes at once, racing 4 creates of new volumes (started aligned; 3 rounds), all succeed: the deleted paths are gone, the created ones exist",
        scenario!(concurrency::delete),
    ),
    should(
        "concurrency.same-volume",
        "6 identical creates of one volume at once (started aligned; 8 rounds, a fresh volume each) all exit 0 with the same path",
        scenario!(concurrency::same_volume),
    ),
    // failure
    must(
        "failure.clean",
        "every failed create of the run, and one the suite provokes on purpose, leaves nothing new in the volumes dir and no process behind",
        run_wide!(failure_clean),
    ),
    should(
        "failure.error-json",
        "every failing create or delete of the run (and the provoked one) prints `{\"error\": \"...\"}` on stdout, or nothing",
        run_wide!(failure_error_json),
    ),
    should(
        "failure.unknown-operation",
        "`PLUGIN <unknown op>` exits non-zero and changes nothing",
        scenario!(failure::unknown_operation),
    ),
    // process
    must(
        "process.no-stdio-leak",
        "no process started by the plugin keeps stdout or stderr open after the plugin exits",
        run_wide!(process_no_stdio_leak),
    ),
    should(
        "process.no-orphans",
        "no process started by the plugin is alive after the plugin exits (one that holds stdout or stderr is process.no-stdio-leak's finding)",
        run_wide!(process_no_orphans),
    ),
    must(
        "process.env-self-contained",
        "the plugin works with exactly Nomad's environment (no PATH, HOME, LANG)",
        scenario!(process::env_self_contained),
    ),
    should(
        "process.cwd-independent",
        "the plugin works from an unrelated read-only working directory and writes nothing there",
        scenario!(process::cwd_independent),
    ),
    must(
        "process.repeatable",
        "the same call made again alone gives the same outcome: a call that fails inside a check about another operation is made again alone, and one that then succeeds is a race in the plugin",
        run_wide!(process_repeatable),
    ),
    // input
    must(
        "input.name-traversal",
        "volume names such as `../../escape` and `a/b` create or remove nothing outside the volumes dir",
        scenario!(input::name_traversal),
    ),
    must(
        "input.name-injection",
        "volume names holding shell syntax run no command; create succeeds or fails cleanly",
        scenario!(input::name_injection),
    ),
    should(
        "input.capacity-edge",
        "capacity 0/0, min > max and min = 2^63-1 each succeed or fail cleanly",
        scenario!(input::capacity_edge),
    ),
    // volume
    should(
        "volume.bytes-true",
        "the `bytes` create reports is what the volume has: the block device's size, the mounted filesystem's (within its own overhead), or 0 for a plain directory",
        scenario!(volume::bytes_true),
    ),
    should(
        "volume.capacity-enforced",
        "claimed by `capacity = \"enforced\"`: writing past the reported size fails (ENOSPC or EDQUOT), the data before it is intact and the volume still works",
        scenario!(volume::capacity_enforced),
    ),
    should(
        "volume.parameters",
        "claimed by `[claims.parameters]` and `filesystem` (the built-in mkdir claims Nomad's `mode`, `uid`, `gid`): each parameter's effect holds on the volume made with it",
        scenario!(volume::parameters),
    ),
    should(
        "volume.block-device",
        "claimed by `attachment = \"block-device\"`: the path is a block device at least capacity min large, readable and writable, and the same device on create again",
        scenario!(volume::block_device),
    ),
    // timing
    should(
        "timing.margin",
        "p95 of each operation's duration, over calls made alone and less the time they waited for a CPU because the host was busy, is under half its limit (an operation that overruns its limit alone is its deadline check's finding); a p95 within 25% of that bound is reported, not pinned in a snapshot",
        run_wide!(timing_margin),
    ),
    info(
        "timing.profile",
        "count, p50, p95 and max duration of each operation over the run",
        run_wide!(timing_profile),
    ),
];

/// Looks a check up by id.
pub fn find(id: &str) -> Option<&'static CheckSpec> {
    CATALOGUE.iter().find(|c| c.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_grouped() {
        let mut ids: Vec<_> = CATALOGUE.iter().map(|c| c.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), CATALOGUE.len());
        for c in CATALOGUE {
            assert!(
                [
                    "fingerprint",
                    "create",
                    "delete",
                    "lifecycle",
                    "concurrency",
                    "failure",
                    "process",
                    "input",
                    "volume",
                    "timing"
                ]
                .contains(&c.group()),
                "{}",
                c.id
            );
        }
    }

    /// Every entry has its own function, named after it (`create.path-exists`
    /// is `create::path_exists`; a run-wide check's name ends in its own and
    /// holds its group). Every check function has an entry: one without is
    /// dead code, which the build refuses (`-D warnings`).
    #[test]
    fn every_entry_has_its_own_function_named_after_it() {
        let mut functions: Vec<_> = CATALOGUE.iter().map(|c| c.function).collect();
        functions.sort();
        functions.dedup();
        assert_eq!(
            functions.len(),
            CATALOGUE.len(),
            "two entries share a function"
        );
        for c in CATALOGUE {
            let name = c.id.split('.').nth(1).unwrap_or_default().replace('-', "_");
            assert!(c.function.ends_with(&name), "{} runs {}", c.id, c.function);
            assert!(
                c.function.contains(c.group()),
                "{} runs {}",
                c.id,
                c.function
            );
            let run_wide = c.function.starts_with("run_wide::");
            assert_eq!(c.is_run_wide(), run_wide, "{}", c.id);
        }
    }

    #[test]
    fn every_id_of_the_published_catalogue_is_here() {
        let doc = include_str!("catalogue_ids.txt");
        for id in doc.lines().filter(|l| !l.trim().is_empty()) {
            assert!(find(id.trim()).is_some(), "{id} missing");
        }
        assert_eq!(
            doc.lines().filter(|l| !l.trim().is_empty()).count(),
            CATALOGUE.len()
        );
    }
}
