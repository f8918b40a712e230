//! The prose behind each check: why Nomad cares, how a plugin author fixes a
//! failure, and which sample plugin shows the fault.
//!
//! Kept apart from the catalogue (which holds the id, level and one-line rule the
//! engine needs) because this text is for people: `dhv-conform explain`, the
//! generated `docs/checks.md`, and the hint under every failure. A test holds the
//! two lists to the same ids, so a new check cannot ship without its explanation.

/// The explanation of one check, keyed by its catalogue id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The catalogue id this text explains.
    pub id: &'static str,
    /// What goes wrong in Nomad (or for its users) when the rule does not hold.
    pub why: &'static str,
    /// What the plugin should do instead.
    pub fix: &'static str,
    /// Sample plugins (in `sample-plugins/`) whose header expects this check to
    /// fail or warn: the fault, shown in a few lines of sh.
    pub samples: &'static [&'static str],
}

const fn rule(
    id: &'static str,
    why: &'static str,
    fix: &'static str,
    samples: &'static [&'static str],
) -> Rule {
    Rule {
        id,
        why,
        fix,
        samples,
    }
}

/// The explanation of every check, in catalogue order.
pub const RULES: &[Rule] = &[
    rule(
        "fingerprint.runs",
        "A Nomad client fingerprints every plugin in its plugin dir when it starts and on SIGHUP. A plugin that cannot start or exits non-zero is left out of the node's attributes, so no volume can be created with it on that node.",
        "Make the file executable (`chmod +x`), start it with a valid shebang (`#!/bin/sh`, LF line endings, an interpreter that exists), and exit 0 for `fingerprint` without relying on PATH, HOME or any other variable Nomad does not pass.",
        &[
            "crlf-shebang",
            "missing-shebang",
            "not-executable",
            "needs-path",
        ],
    ),
    rule(
        "fingerprint.json",
        "Nomad decodes fingerprint stdout with Go's encoding/json: anything but one JSON object with white space around it is a decoding error and the plugin is left out.",
        "Print exactly `{\"version\": \"1.0.0\"}` on stdout and send every log line to stderr (`echo ... >&2`).",
        &[],
    ),
    rule(
        "fingerprint.version",
        "The version is parsed with hashicorp/go-version. A rejected string leaves the plugin out; `{}`, `null` or `{\"version\": null}` leave the version unset, which crashes the Nomad agent with a nil dereference.",
        "Print the version as a JSON string that go-version accepts, such as `\"1.2.3\"` or `\"1.2.3-rc.1\"`.",
        &["bad-version", "missing-version", "null-version"],
    ),
    rule(
        "fingerprint.version-semver",
        "Nomad accepts versions such as `1.2` or `1.2.3beta`, but constraints and tools that compare versions as SemVer read them differently or reject them.",
        "Use a strict SemVer 2.0 version: three numeric parts without leading zeros, then an optional `-pre.release` and `+build`.",
        &["non-semver-version"],
    ),
    rule(
        "fingerprint.deadline",
        "Nomad wraps node fingerprinting in a 1 s context, so a fingerprint slower than 1 s is killed and the plugin is left out of the node (although the call's own limit reads 5 s).",
        "Answer `fingerprint` at once with a constant version; do no I/O, probing or network calls there.",
        &["slow-fingerprint"],
    ),
    rule(
        "fingerprint.stable",
        "Nomad fingerprints again on SIGHUP and publishes whatever version comes back; a version that changes between calls makes job constraints on it flap.",
        "Return the same version on every call, from a constant in the plugin.",
        &[],
    ),
    rule(
        "fingerprint.lookup",
        "Nomad 2.0.5 looks a plugin up by its id in `client.host_volume_plugin_dir`, confined to that dir (Go's os.Root, CVE-2026-7474): a symlink that leads outside the dir is `no such plugin: \"ID\"`, so the plugin is never fingerprinted and no volume can be created with it, although running the file by path works.",
        "Install the executable itself in the plugin dir (copy it, or link to a file inside the dir), not a symlink to a file elsewhere.",
        &[],
    ),
    rule(
        "create.succeeds",
        "Without a successful create no volume can exist: `nomad volume create` fails with the plugin's exit error. Most other checks need it and are skipped when it fails.",
        "Exit 0 within 60 s after creating the volume, using only the DHV_* variables Nomad passes; run the reproduce line to see the failure by hand.",
        &[
            "hanging-create",
            "ignores-sigterm",
            "needs-home",
            "realtime-signal",
        ],
    ),
    rule(
        "create.response",
        "Nomad decodes create stdout with Go's encoding/json into `{path, bytes}`: a log line before the JSON, a second object after it, or `bytes` as a string or a float make the create fail although the volume was made.",
        "Print one JSON object, e.g. `{\"path\": \"/abs/path\", \"bytes\": 0}`, with `bytes` an integer; send every log line to stderr.",
        &["logs-on-stdout", "string-bytes"],
    ),
    rule(
        "create.path-exists",
        "Nomad publishes `path` as the volume's host path and bind-mounts it into tasks: an empty, relative or missing path makes every allocation using the volume fail to start.",
        "Return the absolute path of the directory (or mount point) you created, after it exists.",
        &["nonexistent-path", "relative-path"],
    ),
    rule(
        "create.path-in-volumes-dir",
        "Operators size, back up and clean DHV_VOLUMES_DIR; a volume placed elsewhere escapes all of that, and the harness cannot check it for residue.",
        "Create volumes under `$DHV_VOLUMES_DIR`, e.g. `$DHV_VOLUMES_DIR/$DHV_VOLUME_ID`.",
        &["relative-path"],
    ),
    rule(
        "create.bytes-in-range",
        "Nomad shows `bytes` as the volume's capacity; a figure outside the capacity the user asked for misleads scheduling decisions and users.",
        "Report the capacity you provisioned, between `DHV_CAPACITY_MIN_BYTES` and `DHV_CAPACITY_MAX_BYTES` (when max > 0), or 0 when you do not know it.",
        &["bytes-out-of-range"],
    ),
    rule(
        "create.idempotent",
        "Nomad calls create again with the same request when the agent restarts (restore) and when a volume is updated. A create that fails or moves the volume on the second call loses the volume or its data.",
        "When the volume already exists, return its path unchanged and exit 0: `mkdir -p`, and check each step before doing it again.",
        &["fails-on-existing-dir"],
    ),
    rule(
        "create.distinct",
        "Each volume id is a separate volume: two volumes sharing a path see each other's files, and deleting one deletes the other.",
        "Derive the path from `DHV_VOLUME_ID` (unique, a UUID), never from a constant or a counter.",
        &["shared-path"],
    ),
    rule(
        "create.update",
        "`nomad volume create` with an existing id updates the volume: the plugin gets create again with a new capacity, and a failure there is shown to the user as a failed update.",
        "Treat create of an existing volume as an update: resize if you can, otherwise keep the volume and exit 0 with the same path.",
        &[],
    ),
    rule(
        "create.parameters",
        "Parameters come from the user's volume spec and are untrusted: characters such as `<>&\"'$` must not run anything or break the plugin's parsing.",
        "Parse `DHV_PARAMETERS` as JSON (e.g. with jq), never with eval; refuse unknown keys with `{\"error\": \"...\"}` and a non-zero exit.",
        &[],
    ),
    rule(
        "create.deadline",
        "Nomad allows 60 s for the whole create RPC and then kills the plugin (SIGKILL to the process only): the volume may be half made and the user sees a timeout.",
        "Finish within 60 s; move slow provisioning out of the call, or make it resumable so the next create finishes it.",
        &["hanging-create", "ignores-sigterm"],
    ),
    rule(
        "delete.succeeds",
        "A failing delete keeps the volume in Nomad's state: `nomad volume delete` fails and the volume cannot be removed from the node.",
        "Remove the volume at `$DHV_CREATED_PATH`, with whatever it holds, and exit 0 within 60 s; print `{\"error\": \"...\"}` when you really cannot.",
        &["rmdir-delete"],
    ),
    rule(
        "delete.removes",
        "Nomad forgets the volume after a successful delete; anything left at the path is invisible to Nomad and fills the disk.",
        "Remove everything at the created path (unmount first if you mounted it), and only then exit 0.",
        &[],
    ),
    rule(
        "delete.idempotent",
        "Nomad may send delete again (a retried RPC, an operator running the command twice): failing because the volume is already gone leaves a volume that cannot be deleted.",
        "Treat a volume that is already gone as deleted: `rm -rf`, `umount` only when mounted, exit 0.",
        &["fails-on-missing-dir"],
    ),
    rule(
        "delete.never-created",
        "Nomad sends delete for volumes whose create failed part way or never ran; failing there keeps a broken volume in the state forever.",
        "Exit 0 when there is nothing to delete.",
        &["fails-on-missing-dir"],
    ),
    rule(
        "delete.isolated",
        "A delete that touches other volumes destroys other jobs' data.",
        "Remove only `$DHV_CREATED_PATH` (and the files the plugin keeps for that one volume id).",
        &[],
    ),
    rule(
        "delete.no-residue",
        "Images, lock files and state left by a delete accumulate on the node and are found by no one; a mount left behind keeps a device busy and exposes whatever it shows to anything that cleans up the volumes dir.",
        "Unmount the volume (every stacked mount) before removing anything, then remove every file the plugin made for the volume: images, lock and state files, mount points.",
        &["side-file"],
    ),
    rule(
        "delete.auto-delete-safe",
        "When Nomad fails to save a new volume's state it deletes the volume with `DHV_CREATED_PATH` set to the volumes dir itself and an empty name and namespace: a plugin that runs `rm -rf \"$DHV_CREATED_PATH\"` wipes every volume on the node.",
        "Derive what to remove from `DHV_VOLUME_ID`, or refuse a `DHV_CREATED_PATH` equal to `DHV_VOLUMES_DIR`.",
        &["blind-delete"],
    ),
    rule(
        "delete.deadline",
        "Nomad allows 60 s for the delete RPC, then kills the plugin: the volume stays in Nomad's state, half deleted.",
        "Finish within 60 s; make delete resumable so the next call completes it.",
        &[],
    ),
    rule(
        "lifecycle.restore",
        "When a Nomad agent restarts it calls create again, concurrently, for every volume it created. A plugin that fails here drops the volumes from the node; one that returns new paths hides the data.",
        "Make create idempotent and safe to run for many volumes at once: return the existing volume's path untouched.",
        &[],
    ),
    rule(
        "lifecycle.reboot",
        "A node reboot takes every mount and loop device away, and the Nomad client calls create for every volume when it starts. A plugin that formats again what it finds unmounted wipes every volume of the node; `lifecycle.restore` cannot see it, as the mounts are still up there. A volume that a tmpfs backs loses its files by nature: the finding says so rather than blaming the plugin.",
        "In create, tell a volume that exists but is not mounted (its image or data is on disk) from one never made: mount it again (attaching its image anew), and format only an image that was never complete.",
        &["mkfs-on-reboot"],
    ),
    rule(
        "lifecycle.recreate",
        "Users delete a volume and create one with the same id; a stale leftover of the first volume would leak old data into the new one.",
        "Leave nothing of a deleted volume behind, so the next create starts empty.",
        &[],
    ),
    rule(
        "lifecycle.crash-create",
        "Nomad kills a create that overruns its limit, and nodes crash; the next create of that volume must repair or finish it, not report a half-made volume as ready.",
        "Do the work under a temporary name and rename at the end, or check every step before skipping it; record \"done\" only after the work.",
        &["crash-unsafe"],
    ),
    rule(
        "lifecycle.crash-delete",
        "A delete killed part way is retried; if the retry fails, the volume can never be deleted.",
        "Make each step of delete tolerate the previous attempt's partial work (`rm -rf`, unmount only when mounted).",
        &[],
    ),
    rule(
        "concurrency.create",
        "Nomad creates volumes concurrently (several jobs at once, restore at agent start); plugins that share a counter or file without a lock hand two volumes one path.",
        "Use a per-volume path from `DHV_VOLUME_ID`, and lock (e.g. `flock`) any shared file.",
        &["busy-pool", "racy-concurrency"],
    ),
    rule(
        "concurrency.delete",
        "Several volumes are deleted at once (jobs stopping together); a race between deletes leaves volumes behind or fails them.",
        "Keep deletes independent of each other; lock any shared file.",
        &["busy-pool"],
    ),
    rule(
        "concurrency.same-volume",
        "Restore and an update can race on one volume: both calls create the same volume at the same time.",
        "Make create of one volume safe to run twice at once: `mkdir -p`, or a per-volume lock around the steps.",
        &["check-then-mkdir"],
    ),
    rule(
        "failure.clean",
        "A failed create is not recorded by Nomad, so nothing will ever delete what it left behind: half-made directories and processes stay on the node.",
        "On any error, undo what the create did before exiting non-zero (a `trap` in sh), and leave no process running.",
        &[],
    ),
    rule(
        "failure.error-json",
        "When a call fails Nomad decodes `{\"error\": \"...\"}` from stdout and shows that text to the user; plain text is dropped, and the user sees only `exit status 1`.",
        "On failure, print `{\"error\": \"what went wrong\"}` on stdout and the details on stderr. Printing nothing is allowed, but then the user sees only `exit status 1`.",
        &["text-error"],
    ),
    rule(
        "failure.unknown-operation",
        "A future Nomad may send operations this plugin does not know; answering them with success, or acting on them, would mislead it.",
        "Exit non-zero for any operation other than fingerprint, create and delete, and change nothing.",
        &[],
    ),
    rule(
        "process.no-stdio-leak",
        "Nomad reads the plugin's stdout and stderr until both close, with no wait delay: a background process that keeps them open blocks the Nomad client until that process exits.",
        "Start background processes with their output redirected (`cmd >/dev/null 2>&1 &`), or do not start them.",
        &["leaked-child"],
    ),
    rule(
        "process.no-orphans",
        "A process the plugin leaves running outlives the call and is managed by no one: it holds resources and may change the volume later.",
        "Wait for every process you start before exiting; run daemons through the system's service manager, not from the plugin.",
        &["setsid-daemon"],
    ),
    rule(
        "process.env-self-contained",
        "Nomad clears the environment: the plugin gets only the DHV_* variables, with no PATH, HOME or LANG. A plugin that works in a shell can fail under Nomad.",
        "Set what you need inside the plugin (`PATH=/usr/sbin:/usr/bin:/sbin:/bin`, `HOME=/root`), or use absolute paths.",
        &["needs-home", "needs-path"],
    ),
    rule(
        "process.repeatable",
        "Nomad never retries a plugin call: a create that fails by chance loses the volume request, and a delete that fails by chance leaves the volume stuck for good. A call that fails, then succeeds made again alone with the same request, is a race inside the plugin (a pipeline that breaks under `pipefail`, a check-then-act on a shared file, a `losetup -f` taken by a neighbour).",
        "Find the race from the two outcomes and their stderr: make each step safe to run while other calls run (locks per volume, `mkdir -p`, no `cmd | grep -q` under `pipefail`), and check the state a step needs rather than assuming it.",
        &[],
    ),
    rule(
        "process.cwd-independent",
        "The plugin inherits the Nomad agent's working directory, often `/`, which may be read-only; files written there land in the agent's directory.",
        "Use absolute paths and never write into the working directory.",
        &["writes-cwd"],
    ),
    rule(
        "input.name-traversal",
        "Volume names come from users. A plugin that builds paths from `DHV_VOLUME_NAME` lets `../../x` create or delete files anywhere on the node.",
        "Build paths from `DHV_VOLUME_ID` (always a UUID), never from the name; if you must use the name, reject `/` and `..`.",
        &["name-as-path"],
    ),
    rule(
        "input.name-injection",
        "Volume names come from users; a plugin that passes them through eval or unquoted into a shell runs the user's commands as the Nomad agent (often root).",
        "Quote every variable (`\"$DHV_VOLUME_NAME\"`) and never eval input.",
        &["eval-name"],
    ),
    rule(
        "input.capacity-edge",
        "Capacities come from users: 0/0, min > max or 2^63-1 must not hang the plugin or leave half-made volumes.",
        "Validate the capacity first and fail with `{\"error\": \"...\"}` before making anything, or succeed cleanly.",
        &[],
    ),
    rule(
        "volume.bytes-true",
        "Nomad records the `bytes` a create reports as the volume's capacity, and schedulers and operators trust it. A plugin that reports the size it was asked for rather than what it made (a size computed in MiB and truncated, an image smaller than the request, a plain directory with no limit at all) promises storage that is not there: a job fills it and fails with ENOSPC long before the capacity Nomad shows.",
        "Report what the volume really holds: the size of the block device or image you made (`stat -c %s`, `blockdev --getsize64`), or 0 when the volume is a plain directory with no limit. Compute sizes in bytes, not whole MiB, and round up, not down.",
        &["lies-about-bytes"],
    ),
    rule(
        "volume.capacity-enforced",
        "A capacity that is not enforced is a promise one volume's job can break for every other volume on the node: it fills the host's disk. A plugin that claims enforcement (`capacity = \"enforced\"` in dhv-conform.toml) is held to it.",
        "Back each volume with storage of its own size (a filesystem image on a loop device, an LVM volume, an XFS project quota), or do not claim enforcement.",
        &[],
    ),
    rule(
        "volume.parameters",
        "Jobs ask for a volume's mode, owner or filesystem through its `parameters` block; a plugin that accepts a parameter and ignores it hands the task a volume it cannot use (permission denied) or one that is not what the operator chose.",
        "Apply every parameter you accept (chmod, chown after creating the root; mkfs with the type asked for) and refuse the ones you do not support with an {\"error\": ...}; list what each parameter sets under [claims.parameters] in dhv-conform.toml.",
        &[],
    ),
    rule(
        "volume.block-device",
        "A volume with `attachment_mode = \"block-device\"` is handed to the task as a device node. A path that is not a block device, a device smaller than asked for, or a different device after an agent restart loses the task's data or fails its mount.",
        "Return the device node (`/dev/loopN`, `/dev/mapper/...`) of storage at least capacity min large, and return the same device when create is called again for the volume (look it up, do not attach a second one).",
        &[],
    ),
    rule(
        "timing.margin",
        "A plugin that needs more than half its limit on a quiet machine will overrun it on a busy node.",
        "Keep fingerprint well under 0.5 s and create/delete under 30 s; move slow work out of the call.",
        &[],
    ),
    rule(
        "timing.profile",
        "A measurement for the plugin author, never a failure: how long each operation takes (count, p50, p95, max).",
        "Nothing to fix; compare the figures with Nomad's limits (1 s fingerprint, 60 s create and delete).",
        &[],
    ),
];

/// The explanation of the check `id`, if there is one.
pub fn find(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::CATALOGUE;

    #[test]
    fn every_check_has_prose_and_every_prose_a_check() {
        for spec in CATALOGUE {
            assert!(
                find(spec.id).is_some(),
                "{} has no entry in src/conformance/rules.rs",
                spec.id
            );
        }
        for rule in RULES {
            assert!(
                CATALOGUE.iter().any(|c| c.id == rule.id),
                "rules.rs explains {}, which is not in the catalogue",
                rule.id
            );
        }
        assert_eq!(RULES.len(), CATALOGUE.len(), "an id is explained twice");
    }

    /// The samples named here are the ones whose `# expect:` header names the
    /// check, and the other way round: the docs cannot point at the wrong file.
    #[test]
    fn samples_agree_with_their_expect_headers() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins");
        let mut expected: Vec<(String, String)> = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("sample-plugins") {
            let path = entry.expect("entry").path();
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            for line in text.lines() {
                if let Some(rest) = line.strip_prefix("# expect: ") {
                    let id = rest.split_whitespace().next().unwrap_or_default();
                    expected.push((id.to_owned(), name.clone()));
                }
            }
        }
        for (id, sample) in &expected {
            let rule = find(id).unwrap_or_else(|| panic!("{sample} expects unknown check {id}"));
            assert!(
                rule.samples.contains(&sample.as_str()),
                "sample-plugins/{sample} expects {id}: add it to that check's samples in src/conformance/rules.rs"
            );
        }
        for rule in RULES {
            for sample in rule.samples {
                assert!(
                    expected.iter().any(|(id, s)| id == rule.id && s == sample),
                    "rules.rs names sample {sample} for {}, but its header does not expect it",
                    rule.id
                );
            }
        }
    }
}
