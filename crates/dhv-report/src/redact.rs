//! The one normaliser: turns machine- and run-specific text into stable placeholders.
//!
//! Snapshots, `--snapshot` and insta tests must agree on what "the same behaviour" means,
//! so redaction is declared here once and nowhere else. A snapshot diff should mean the
//! plugin behaved differently, never that it ran on another machine, at another speed, or
//! drew other random ids.
//!
//! Rules, applied in this order (each sees the output of the one before):
//! 1. literal paths added with [`Redactions::path`], longest first, so a plugin path
//!    inside a registered temp dir becomes `[PLUGIN]`, not `[TMP]/plugin`;
//! 2. UUIDs, any case → `[UUID]`;
//! 3. the random part of the volume names the harness makes up: the default name
//!    (`conformance-<hex>`, docs/checks.md) → `conformance-[ID]`, and the path-traversal
//!    names of `input.name-traversal` (`../escape-<hex>`) → `escape-[ID]`;
//! 4. temp names made by `tempfile` (`.tmpAbC123`) and `mktemp` (`tmp.AbC123XyZ`), and
//!    the run's own temp dir (`dhv-conform-AbC123`, as a path component: the engine makes
//!    it with that prefix) → `[TEMP]`;
//! 5. the system temp dirs (`/tmp`, `/var/tmp`, `$TMPDIR`) at a path boundary → `[TMP]`,
//!    and `[TMP]/[TEMP]` (a fresh temp dir) collapses to `[TMP]`. The rest of the path
//!    is kept: below a temp dir the names are the plugin's own choice (`volumes/<id>`),
//!    so they are stable once rules 2–4 have taken out the random parts, and they are
//!    what tells one path from another in a message;
//! 6. `pid 1234`, `pid=1234`, `pid: 1234` (and `pgid`, `ppid`, `sid`) → `pid [PID]`;
//! 7. durations: `123ms`, `1.5s`, `0.25 s`, `12.3 ms`, `40µs`, `7ns`, and Go's compound
//!    `1m30s`/`1h2m3.5s` → `[DURATION]`;
//! 8. loop devices, `/dev/loop3` → `/dev/loop[N]`: a block-device plugin gets whichever
//!    device is free.
//! 9. the host's conditions a timing finding states: `2 cores` → `[N] cores`, `load
//!    average 3.05` → `load average [LOAD]`.
//!
//! Every rule is idempotent, and no placeholder matches any rule, so applying the
//! redactions twice gives the same text as applying them once.

use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::model::Report;

/// Replacement for a system temp dir.
const TMP: &str = "[TMP]";

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
        .expect("valid regex")
});

static VOLUME_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(conformance|escape)-[0-9a-fA-F]{6,32}\b").expect("valid regex")
});

static TEMP_NAME: LazyLock<Regex> = LazyLock::new(|| {
    // `\.tmp` has no leading `\b` because the dot itself is the boundary.
    Regex::new(r"\.tmp[A-Za-z0-9]{6,}\b|\btmp\.[A-Za-z0-9]{6,}\b").expect("valid regex")
});

/// The run's temp dir (`tempfile` with the prefix `dhv-conform-`), only right after a `/`
/// so that prose such as "dhv-conform-report" is left alone. Group 1 keeps the slash.
static RUN_DIR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(/)dhv-conform-[A-Za-z0-9]{6}\b").expect("valid regex"));

static PID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(pid|PID|Pid|pgid|PGID|ppid|PPID|sid|SID)(?: *[=:] *| +)\d+\b")
        .expect("valid regex")
});

static DURATION: LazyLock<Regex> = LazyLock::new(|| {
    // Space only (not `\s`) between number and unit, so a number ending a line is not
    // glued to a unit-like word on the next one.
    Regex::new(r"\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)? ?(?:ns|us|µs|μs|ms|s)\b").expect("valid regex")
});

static LOOP_DEVICE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"/dev/loop\d+\b").expect("valid regex"));
static HOST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b\d+ cores\b|\bload average \d+(?:\.\d+)?").expect("valid regex")
});

/// The set of redactions applied to report text before it is compared or snapshotted.
///
/// Built-in rules (UUIDs, durations, pids, temp names and dirs) are always on; literal
/// paths are added per run. See the module docs for the rules and their order.
#[derive(Debug, Clone)]
pub struct Redactions {
    /// Literal substitutions, kept sorted longest first.
    paths: Vec<(String, String)>,
    /// Matches the system temp dirs, longest alternative first.
    tmp_dirs: Regex,
}

impl Default for Redactions {
    fn default() -> Self {
        Redactions::new()
    }
}

impl Redactions {
    /// The built-in rules, with the system temp dirs taken from this process's
    /// environment (`/tmp`, `/var/tmp` and [`std::env::temp_dir`]).
    pub fn new() -> Redactions {
        let mut dirs = vec!["/tmp".to_owned(), "/var/tmp".to_owned()];
        let env_tmp = std::env::temp_dir();
        let env_tmp = env_tmp.to_string_lossy();
        let env_tmp = env_tmp.trim_end_matches('/');
        // A TMPDIR of `/` would turn every absolute path into `[TMP]`.
        if !env_tmp.is_empty() && !dirs.iter().any(|d| d == env_tmp) {
            dirs.push(env_tmp.to_owned());
        }
        dirs.sort_by_key(|d| std::cmp::Reverse(d.len()));
        let alternatives: Vec<String> = dirs.iter().map(|d| regex::escape(d)).collect();
        let tmp_dirs =
            Regex::new(&alternatives.join("|")).expect("escaped literals form a valid regex");
        Redactions {
            paths: Vec::new(),
            tmp_dirs,
        }
    }

    /// The built-in rules plus the paths a report itself names: the plugin path →
    /// `[PLUGIN]` and the fixture path → `[FIXTURE]`. The one place that decides how a
    /// report's own paths are redacted, so `--snapshot` and the tests cannot drift apart;
    /// callers add the run's temp dirs with [`Redactions::path`].
    ///
    /// A path without a `/` (the built-in `mkdir`, or a bare file name) is left alone:
    /// replacing a plain word would rewrite messages that merely mention it.
    pub fn for_report(report: &Report) -> Redactions {
        let mut redactions = Redactions::new();
        let named = [
            (Some(report.plugin.path.as_str()), "[PLUGIN]"),
            (report.options.fixture.as_deref(), "[FIXTURE]"),
        ];
        for (path, placeholder) in named {
            if let Some(path) = path.filter(|p| p.contains('/')) {
                redactions = redactions.path(path, placeholder);
            }
        }
        redactions
    }

    /// Adds a literal substitution: every occurrence of `path` becomes `placeholder`
    /// (e.g. the plugin path → `[PLUGIN]`, a check's volumes dir → `[TMP]`). Longer paths
    /// are replaced first, whatever the order they were added in. A trailing `/` is
    /// dropped so `/a/b/` also covers `/a/b`; an empty path or `/` is ignored, since it
    /// would swallow every path.
    pub fn path(mut self, path: &str, placeholder: &str) -> Redactions {
        let trimmed = path.trim_end_matches('/');
        if trimmed.is_empty() {
            return self;
        }
        self.paths
            .push((trimmed.to_owned(), placeholder.to_owned()));
        // Stable, so equal lengths keep the order they were added in.
        self.paths.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        self
    }

    /// Applies every rule to `s`.
    pub fn apply(&self, s: &str) -> String {
        let mut text = s.to_owned();
        for (path, placeholder) in &self.paths {
            if text.contains(path.as_str()) {
                text = text.replace(path.as_str(), placeholder);
            }
        }
        let text = UUID.replace_all(&text, "[UUID]");
        let text = VOLUME_NAME.replace_all(&text, "${1}-[ID]");
        let text = TEMP_NAME.replace_all(&text, "[TEMP]");
        let text = RUN_DIR.replace_all(&text, "${1}[TEMP]");
        let text = self.redact_tmp_dirs(&text);
        let text = text.replace("[TMP]/[TEMP]", TMP);
        let text = PID.replace_all(&text, "$1 [PID]");
        let text = DURATION.replace_all(&text, "[DURATION]");
        let text = LOOP_DEVICE.replace_all(&text, "/dev/loop[N]");
        let text = HOST.replace_all(&text, |caps: &Captures<'_>| {
            if caps[0].ends_with("cores") {
                "[N] cores".to_owned()
            } else {
                "load average [LOAD]".to_owned()
            }
        });
        text.into_owned()
    }

    /// Replaces a system temp dir only where it is a whole path prefix: `/tmp` in
    /// `/tmp/x` or `(/tmp)`, not in `/tmpfs` or `/usr/tmp`. The regex crate has no
    /// look-around, so the boundaries are checked by hand around each match.
    fn redact_tmp_dirs(&self, text: &str) -> String {
        let is_path_char = |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '~');
        self.tmp_dirs
            .replace_all(text, |caps: &Captures<'_>| {
                let m = caps.get(0).expect("group 0 always matches");
                let before = text[..m.start()].chars().next_back();
                let after = text[m.end()..].chars().next();
                let starts = before.is_none_or(|c| !is_path_char(c) && c != '/');
                let ends = after.is_none_or(|c| !is_path_char(c));
                if starts && ends {
                    TMP.to_owned()
                } else {
                    m.as_str().to_owned()
                }
            })
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_rules() {
        let r = Redactions::new();
        let cases = [
            // UUIDs, any case.
            (
                "volume 0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69 created",
                "volume [UUID] created",
            ),
            ("id=0B9C8F6E-3F1D-4C4E-9A53-1F2D3C4B5A69.", "id=[UUID]."),
            ("not-a-uuid-0b9c8f6e-3f1d", "not-a-uuid-0b9c8f6e-3f1d"),
            // Durations.
            ("took 123ms", "took [DURATION]"),
            ("took 1.5s (limit 1s)", "took [DURATION] (limit [DURATION])"),
            ("0.25 s and 12.3 ms", "[DURATION] and [DURATION]"),
            (
                "40µs, 40μs, 40us, 7ns",
                "[DURATION], [DURATION], [DURATION], [DURATION]",
            ),
            ("timed out after 1m0s", "timed out after [DURATION]"),
            ("1h2m3.5s", "[DURATION]"),
            // The host's conditions.
            (
                "host: 2 cores, load average 15.04; waited",
                "host: [N] cores, load average [LOAD]; waited",
            ),
            ("4 seconds", "4 seconds"),
            ("10 MiB, 8 volumes, exit 1", "10 MiB, 8 volumes, exit 1"),
            ("version 1.2.3, nomad-1.10", "version 1.2.3, nomad-1.10"),
            ("v1s", "v1s"),
            // Pids.
            ("pid 1234", "pid [PID]"),
            ("pid=1234", "pid [PID]"),
            ("sleep (pid 1234) left", "sleep (pid [PID]) left"),
            ("PID: 99", "PID [PID]"),
            ("pgid 77 killed", "pgid [PID] killed"),
            (
                "path \"/dev/loop12\", bytes 0",
                "path \"/dev/loop[N]\", bytes 0",
            ),
            ("rapid 12", "rapid 12"),
            // Temp names and dirs.
            ("/tmp/.tmpAbC123/volumes/x", "[TMP]/volumes/x"),
            ("/tmp/tmp.Xy3kQ9aZ1b/state.json", "[TMP]/state.json"),
            ("wrote ./.tmpQwErTy", "wrote ./[TEMP]"),
            ("/var/tmp/cache", "[TMP]/cache"),
            ("(/tmp)", "([TMP])"),
            ("/tmpfs/x and /usr/tmp/x", "/tmpfs/x and /usr/tmp/x"),
            ("/tmp /tmp", "[TMP] [TMP]"),
            ("a.tmp file", "a.tmp file"),
            // Volume names the harness makes up.
            ("name conformance-0b9c8f6e", "name conformance-[ID]"),
            ("conformance-tests", "conformance-tests"),
            (
                r#"name "../../escape-1b0aa451": created"#,
                r#"name "../../escape-[ID]": created"#,
            ),
            ("escape-hatch", "escape-hatch"),
            // The run's temp dir, as a path component only.
            (
                "/tmp/dhv-conform-xO8tpb/create.succeeds/volumes",
                "[TMP]/create.succeeds/volumes",
            ),
            ("/opt/dhv-conform-Ab12Cd/x", "/opt/[TEMP]/x"),
            ("see dhv-conform-report", "see dhv-conform-report"),
            ("/srv/dhv-conform-reports/x", "/srv/dhv-conform-reports/x"),
            // Everything at once, including a UUID below a temp dir.
            (
                "create of /tmp/.tmpAbC123/volumes/0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69 took 2.5s (pid 4711)",
                "create of [TMP]/volumes/[UUID] took [DURATION] (pid [PID])",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(r.apply(input), want, "{input:?}");
        }
    }

    #[test]
    fn literal_paths_longest_first() {
        let r = Redactions::new()
            .path("/home/ci/work", "[WORK]")
            .path("/home/ci/work/plugins/example", "[PLUGIN]")
            .path("", "[NOTHING]")
            .path("/", "[ROOT]");
        let cases = [
            ("/home/ci/work/plugins/example create", "[PLUGIN] create"),
            ("/home/ci/work/fixtures/a.json", "[WORK]/fixtures/a.json"),
            ("/home/ci/other", "/home/ci/other"),
        ];
        for (input, want) in cases {
            assert_eq!(r.apply(input), want, "{input:?}");
        }
    }

    #[test]
    fn literal_paths_win_over_temp_dirs() {
        let r = Redactions::new()
            .path("/tmp/.tmpAbC123/", "[VOLUMES]")
            .path("/tmp/.tmpAbC123/plugin", "[PLUGIN]");
        assert_eq!(r.apply("/tmp/.tmpAbC123/plugin create"), "[PLUGIN] create");
        assert_eq!(r.apply("/tmp/.tmpAbC123/vol"), "[VOLUMES]/vol");
        assert_eq!(r.apply("/tmp/.tmpZzZzZz/vol"), "[TMP]/vol");
    }

    #[test]
    fn for_report_names_plugin_and_fixture_paths() {
        let mut report = crate::sample::report(false);
        report.options.fixture = Some("/home/ci/fixtures/volume.hcl".to_owned());
        let r = Redactions::for_report(&report);
        assert_eq!(
            r.apply("/opt/nomad/plugins/example create with /home/ci/fixtures/volume.hcl"),
            "[PLUGIN] create with [FIXTURE]"
        );

        report.plugin.path = "mkdir".to_owned();
        report.plugin.builtin = true;
        let r = Redactions::for_report(&report);
        assert_eq!(r.apply("mkdir: cannot create"), "mkdir: cannot create");
    }

    #[test]
    fn system_temp_dir_is_covered() {
        let dir = std::env::temp_dir();
        let dir = dir.to_string_lossy();
        let text = format!("{}/x", dir.trim_end_matches('/'));
        assert_eq!(Redactions::new().apply(&text), "[TMP]/x");
    }

    #[test]
    fn idempotent() {
        let r = Redactions::new().path("/opt/plugin", "[PLUGIN]");
        let input = "/opt/plugin: /tmp/.tmpAbC123/v/0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69 \
                     took 1m2s, pid=12, conformance-abcdef12, tmp.ABCdef123, \
                     ../escape-0a1b2c3d /tmp/dhv-conform-AbC123/x";
        let once = r.apply(input);
        assert_eq!(r.apply(&once), once);
    }
}
