//! The check catalogue: every id of CONFORMANCE.md with its group, level and
//! rule. The ids are a public interface (filters, reports, snapshots, people's CI
//! configs): never rename one; retire it instead.

use crate::report::Level;

/// One row of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckSpec {
    /// The stable id, `group.name`.
    pub id: &'static str,
    /// must / should / info.
    pub level: Level,
    /// The rule, in one sentence.
    pub rule: &'static str,
    /// Evaluated over every call of the run, after the other checks finished.
    pub aggregate: bool,
}

impl CheckSpec {
    /// The group: the part of the id before the dot.
    pub fn group(&self) -> &'static str {
        self.id.split('.').next().unwrap_or(self.id)
    }
}

const fn must(id: &'static str, rule: &'static str) -> CheckSpec {
    CheckSpec {
        id,
        level: Level::Must,
        rule,
        aggregate: false,
    }
}

const fn should(id: &'static str, rule: &'static str) -> CheckSpec {
    CheckSpec {
        id,
        level: Level::Should,
        rule,
        aggregate: false,
    }
}

const fn over_run(mut spec: CheckSpec) -> CheckSpec {
    spec.aggregate = true;
    spec
}

/// Every check, in catalogue order.
pub const CATALOGUE: &[CheckSpec] = &[
    // fingerprint
    must(
        "fingerprint.runs",
        "`PLUGIN fingerprint` starts and exits 0",
    ),
    must(
        "fingerprint.json",
        "fingerprint stdout decodes as Nomad decodes it: one JSON object, white space around it only",
    ),
    must(
        "fingerprint.version",
        "`version` is a JSON string that go-version accepts",
    ),
    should(
        "fingerprint.version-semver",
        "`version` is strict SemVer 2.0",
    ),
    over_run(must(
        "fingerprint.deadline",
        "every fingerprint call finishes within 1 s (Nomad's effective limit)",
    )),
    should(
        "fingerprint.stable",
        "repeated and concurrent (8 at once) fingerprints return the same version",
    ),
    // create
    must(
        "create.succeeds",
        "create with the default request exits 0 within 60 s",
    ),
    must(
        "create.response",
        "create stdout decodes as Nomad decodes it: `path` a string, `bytes` an int64 if present",
    ),
    must(
        "create.path-exists",
        "`path` is non-empty, absolute, and exists on disk after create",
    ),
    should(
        "create.path-in-volumes-dir",
        "`path` lies inside DHV_VOLUMES_DIR",
    ),
    should(
        "create.bytes-in-range",
        "when bytes > 0: capacity min <= bytes <= capacity max (when max > 0)",
    ),
    must(
        "create.idempotent",
        "the same create again exits 0 with the same path and bytes, and the volume's files survive",
    ),
    must(
        "create.distinct",
        "two volumes get different paths; creating the second leaves the first intact",
    ),
    should(
        "create.update",
        "create again with the same id and a doubled capacity min exits 0 with the same path",
    ),
    should(
        "create.parameters",
        "create with parameters `{}` and with hostile parameter values succeeds or fails cleanly; nothing runs from them",
    ),
    over_run(must(
        "create.deadline",
        "every create call finishes within 60 s",
    )),
    // delete
    must(
        "delete.succeeds",
        "delete of a created volume exits 0 within 60 s",
    ),
    must(
        "delete.removes",
        "the created path no longer exists after delete",
    ),
    must(
        "delete.idempotent",
        "a second delete of the same volume exits 0",
    ),
    must(
        "delete.never-created",
        "delete of a volume id that was never created exits 0",
    ),
    must(
        "delete.isolated",
        "deleting one volume leaves every other volume and its files intact",
    ),
    should(
        "delete.no-residue",
        "after every volume is deleted, the volumes dir holds nothing the plugin made",
    ),
    should(
        "delete.auto-delete-safe",
        "Nomad's compensating delete (DHV_CREATED_PATH = the volumes dir, empty name and namespace) removes no other volume",
    ),
    over_run(must(
        "delete.deadline",
        "every delete call finishes within 60 s",
    )),
    // lifecycle
    must(
        "lifecycle.restore",
        "after 4 creates, create again for all 4 at once (an agent restart) keeps paths and files",
    ),
    should(
        "lifecycle.recreate",
        "create, delete, create of the same id succeeds and the new volume is empty",
    ),
    should(
        "lifecycle.crash-create",
        "create killed part way (SIGKILL to its group), then create again succeeds and delete leaves nothing",
    ),
    should(
        "lifecycle.crash-delete",
        "delete killed part way, then delete again succeeds and the path is gone",
    ),
    // concurrency
    must(
        "concurrency.create",
        "8 creates of distinct volumes at once all succeed with distinct, existing paths",
    ),
    must(
        "concurrency.delete",
        "8 deletes of distinct volumes at once all succeed and all paths are gone",
    ),
    should(
        "concurrency.same-volume",
        "4 identical creates of one volume at once all exit 0 with the same path",
    ),
    // failure
    over_run(must(
        "failure.clean",
        "a failed create leaves nothing new in the volumes dir and no process behind",
    )),
    over_run(should(
        "failure.error-json",
        "a failing create or delete prints `{\"error\": \"...\"}` on stdout, or nothing",
    )),
    should(
        "failure.unknown-operation",
        "`PLUGIN <unknown op>` exits non-zero and changes nothing",
    ),
    // process
    over_run(must(
        "process.no-stdio-leak",
        "no process started by the plugin keeps stdout or stderr open after the plugin exits",
    )),
    over_run(should(
        "process.no-orphans",
        "no process started by the plugin is alive after the plugin exits",
    )),
    must(
        "process.env-self-contained",
        "the plugin works with exactly Nomad's environment (no PATH, HOME, LANG)",
    ),
    should(
        "process.cwd-independent",
        "the plugin works from an unrelated read-only working directory and writes nothing there",
    ),
    // input
    must(
        "input.name-traversal",
        "volume names such as `../../escape` and `a/b` create or remove nothing outside the volumes dir",
    ),
    must(
        "input.name-injection",
        "volume names holding shell syntax run no command; create succeeds or fails cleanly",
    ),
    should(
        "input.capacity-edge",
        "capacity 0/0, min > max and min = 2^63-1 each succeed or fail cleanly",
    ),
    // timing
    over_run(should(
        "timing.margin",
        "p95 of each operation's duration is under half its limit",
    )),
    over_run(CheckSpec {
        id: "timing.profile",
        level: Level::Info,
        rule: "count, p50, p95 and max duration of each operation over the run",
        aggregate: false,
    }),
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
                    "timing"
                ]
                .contains(&c.group()),
                "{}",
                c.id
            );
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
