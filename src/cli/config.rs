//! `dhv-conform.toml`: a plugin's own config. What an author would otherwise
//! pass as flags (strict, work dir, time-limit scale), the requests to test
//! with, the claims the `volume.*` checks verify, and checks skipped with a
//! reason. `docs/config.md` documents the format; a test holds its example
//! to this parser.
//!
//! Every error is one line naming the file, the line and the key, with the
//! close matches of a misspelt one: a typo must never weaken a gate silently.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::conformance::{Attachment, Claims, Effect, RequestTemplate};

mod sections;

/// The file looked for beside the plugin when `--config` is not given.
pub const FILE_NAME: &str = "dhv-conform.toml";

/// The most a config file may hold: far more than any needs.
const MAX_BYTES: u64 = 1 << 20;

/// One request to run the suite with.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfiguredRequest {
    /// Its name, shown in every report.
    pub name: String,
    /// The fixture it was read from.
    pub fixture: PathBuf,
    /// The request itself.
    pub template: RequestTemplate,
}

/// A config, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file it was read from.
    pub path: PathBuf,
    /// `strict = true`: should-level failures fail the run.
    pub strict: bool,
    /// Where the run's sandboxes go.
    pub work_dir: Option<PathBuf>,
    /// Multiplies every time limit.
    pub timeout_scale: Option<f64>,
    /// The requests, in the file's order (none: the default request).
    pub requests: Vec<ConfiguredRequest>,
    /// The claims, and the skips with their reasons.
    pub claims: Claims,
    /// `[limits]`: each plugin call's `pids.max` and `memory.max` (the
    /// defaults where the file does not set them).
    pub limits: crate::exec::CallLimits,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    strict: Option<bool>,
    work_dir: Option<PathBuf>,
    timeout_scale: Option<f64>,
    #[serde(default)]
    request: Vec<RawRequest>,
    #[serde(default)]
    claims: RawClaims,
    #[serde(default)]
    skip: BTreeMap<String, String>,
    #[serde(default)]
    limits: RawLimits,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    pids_max: Option<u64>,
    memory_max: Option<RawBytes>,
}

/// A size: a number of bytes, or a string such as `"512MiB"`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawBytes {
    Number(u64),
    Text(String),
}

/// The fewest processes a call may be limited to: a shell and a few steps.
const MIN_PIDS_MAX: u64 = 16;
/// The most a call may be allowed: the kernel's own ceiling on pids.
const MAX_PIDS_MAX: u64 = 1 << 22;
/// The least memory a call may be limited to.
const MIN_MEMORY_MAX: u64 = 16 << 20;

/// `4GiB`, `512 MiB`, `1048576`: bytes, with a binary unit or none.
fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let n: u64 = text[..digits].parse().ok()?;
    let unit = match text[digits..].trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(unit)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    name: String,
    fixture: PathBuf,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawClaims {
    capacity: Option<Capacity>,
    attachment: Option<RawAttachment>,
    ephemeral: Option<bool>,
    filesystem: Option<String>,
    #[serde(default)]
    parameters: BTreeMap<String, RawParameter>,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum Capacity {
    Enforced,
    None,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RawAttachment {
    FileSystem,
    BlockDevice,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParameter {
    effect: RawEffect,
    values: Vec<String>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum RawEffect {
    Mode,
    Uid,
    Gid,
    FsType,
}

impl From<RawEffect> for Effect {
    fn from(e: RawEffect) -> Effect {
        match e {
            RawEffect::Mode => Effect::Mode,
            RawEffect::Uid => Effect::Uid,
            RawEffect::Gid => Effect::Gid,
            RawEffect::FsType => Effect::FsType,
        }
    }
}

/// The config to use: `--config FILE`, else `dhv-conform.toml` beside the
/// plugin when there is one, else none.
pub fn find(flag: Option<&Path>, plugin: &str) -> Result<Option<Config>, String> {
    if let Some(path) = flag {
        return load(path).map(Some);
    }
    if plugin == "mkdir" {
        return Ok(None);
    }
    let beside = Path::new(plugin)
        .parent()
        .map(|d| d.join(FILE_NAME))
        .filter(|p| p.is_file());
    beside.map(|p| load(&p)).transpose()
}

/// Reads and checks the config at `path`.
pub fn load(path: &Path) -> Result<Config, String> {
    let text = read_bounded(path)?;
    parse(path, &text)
}

/// The config's text: a regular file (a link to one is followed, as for every
/// input a user names), at most [`MAX_BYTES`], through the one bounded reader.
fn read_bounded(path: &Path) -> Result<String, String> {
    crate::safe_fs::read_text_bounded(path, MAX_BYTES, crate::safe_fs::Links::Follow)
        .map_err(|e| format!("config {e}"))
}

/// Parses a config's text; `path` names it in errors and anchors its
/// relative paths (fixtures, the work dir).
pub fn parse(path: &Path, text: &str) -> Result<Config, String> {
    let shown = path.display();
    let raw: RawConfig = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| line_of(text, s.start))
            .map(|l| format!(":{l}"))
            .unwrap_or_default();
        format!("{shown}{line}: {}", with_close_match(e.message()))
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let at = |key: &str| format!("{shown}:{}", line_of_key(text, key));
    sections::timeout_scale(raw.timeout_scale, &at)?;
    let limits = limits(&raw.limits, &at)?;
    let requests = sections::requests(raw.request, base, &at)?;
    let skips = sections::skips(raw.skip, &at)?;
    let c = raw.claims;
    let parameters = sections::parameters(c.parameters, &at)?;
    Ok(Config {
        path: path.to_path_buf(),
        strict: raw.strict.unwrap_or(false),
        work_dir: raw.work_dir.map(|d| base.join(d)),
        timeout_scale: raw.timeout_scale,
        requests,
        claims: Claims {
            capacity_enforced: c.capacity == Some(Capacity::Enforced),
            attachment: match c.attachment {
                Some(RawAttachment::BlockDevice) => Attachment::BlockDevice,
                _ => Attachment::FileSystem,
            },
            ephemeral: c.ephemeral.unwrap_or(false),
            filesystem: c.filesystem,
            parameters,
            skips,
            implicit: false,
        },
        limits,
    })
}

/// `[limits]`, checked: each within bounds a plugin can run in and the
/// kernel accepts; the defaults for what it does not set.
fn limits(raw: &RawLimits, at: &dyn Fn(&str) -> String) -> Result<crate::exec::CallLimits, String> {
    let mut limits = crate::exec::CallLimits::default();
    if let Some(n) = raw.pids_max {
        if !(MIN_PIDS_MAX..=MAX_PIDS_MAX).contains(&n) {
            return Err(format!(
                "{}: [limits] pids_max must be from {MIN_PIDS_MAX} to {MAX_PIDS_MAX}, not {n}",
                at("pids_max")
            ));
        }
        limits.pids_max = n;
    }
    if let Some(m) = &raw.memory_max {
        let bytes = match m {
            RawBytes::Number(n) => Some(*n),
            RawBytes::Text(t) => parse_bytes(t),
        };
        match bytes {
            Some(b) if b >= MIN_MEMORY_MAX => limits.memory_max = b,
            _ => {
                return Err(format!(
                    "{}: [limits] memory_max must be bytes (a number, or a string such as \"512MiB\" or \"4GiB\") of at least 16MiB",
                    at("memory_max")
                ));
            }
        }
    }
    Ok(limits)
}

/// The 1-based line of byte `offset`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The first line that sets or names `key` (bare or quoted), for errors found
/// after parsing; 1 when none does.
fn line_of_key(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix('[').unwrap_or(l).trim_start_matches('[');
            let quoted = format!("\"{key}\"");
            l.starts_with(&quoted)
                || (l.starts_with(key)
                    && !l[key.len()..]
                        .starts_with(|c: char| c.is_alphanumeric() || c == '-' || c == '_'))
                || l.contains(&format!("= {quoted}"))
        })
        .map_or(1, |i| i + 1)
}

/// toml's message for an unknown key or value, with the expected one closest
/// to it named first: "unknown field `strct`; did you mean `strict`?".
fn with_close_match(message: &str) -> String {
    let message = message.trim();
    let Some((head, expected)) = message.split_once(", expected ") else {
        return message.to_owned();
    };
    let Some(got) = head.split('`').nth(1) else {
        return message.to_owned();
    };
    let options: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let best = options
        .iter()
        .map(|o| (distance(got, o), *o))
        .min()
        .filter(|(d, _)| *d <= 3);
    match best {
        Some((_, o)) => format!("{head}; did you mean `{o}`? (expected {expected})"),
        None => format!("{head} (expected {expected})"),
    }
}

fn distance(a: &str, b: &str) -> usize {
    super::explain::distance(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Config, String> {
        parse(Path::new("/plugins/dhv-conform.toml"), text)
    }

    #[test]
    fn claims_skips_and_settings_are_read() {
        let c = parse_text(
            r#"
strict = true
timeout_scale = 2.5

[claims]
capacity = "enforced"
attachment = "block-device"
filesystem = "ext4"

[claims.parameters.perm]
effect = "mode"
values = ["0750"]

[skip]
"lifecycle.crash-create" = "killing mkfs part way needs a manual fsck"
"#,
        )
        .unwrap();
        assert!(c.strict);
        assert_eq!(c.timeout_scale, Some(2.5));
        assert!(c.claims.capacity_enforced);
        assert_eq!(c.claims.attachment, Attachment::BlockDevice);
        assert_eq!(c.claims.filesystem.as_deref(), Some("ext4"));
        assert_eq!(c.claims.parameters[0].effect, Effect::Mode);
        assert_eq!(
            c.claims.skip_reason("lifecycle.crash-create"),
            Some("killing mkfs part way needs a manual fsck")
        );
    }

    #[test]
    fn a_misspelt_key_names_its_line_and_the_close_match() {
        let err = parse_text("strict = true\nstrct = false\n").unwrap_err();
        assert!(err.starts_with("/plugins/dhv-conform.toml:2: "), "{err}");
        assert!(err.contains("did you mean `strict`?"), "{err}");
        let err = parse_text("[claims]\ncapacity = \"enforce\"\n").unwrap_err();
        assert!(err.contains(":2: "), "{err}");
        assert!(err.contains("did you mean `enforced`?"), "{err}");
    }

    #[test]
    fn a_skip_needs_a_known_id_and_a_reason() {
        let err = parse_text("[skip]\n\"create.idempotnt\" = \"x\"\n").unwrap_err();
        assert!(err.contains(":2: [skip] names no check"), "{err}");
        assert!(err.contains("create.idempotent"), "{err}");
        let err = parse_text("\n[skip]\n\"create.idempotent\" = \" \"\n").unwrap_err();
        assert!(
            err.contains(":3: [skip] \"create.idempotent\" needs a reason"),
            "{err}"
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let err = parse_text("timeout_scale = 0\n").unwrap_err();
        assert!(err.contains(":1: timeout_scale must be"), "{err}");
        let err =
            parse_text("[claims.parameters.m]\neffect = \"mode\"\nvalues = []\n").unwrap_err();
        assert!(err.contains("needs at least one value"), "{err}");
        let err = parse_text("[claims.parameters.m]\neffect = \"colour\"\nvalues = [\"1\"]\n")
            .unwrap_err();
        assert!(err.contains("unknown variant `colour`"), "{err}");
        assert!(parse_text("strict = \n").is_err());
    }

    #[test]
    fn the_documented_example_is_valid() {
        let doc = include_str!("../../docs/config.md");
        let example = doc
            .split("```toml\n")
            .nth(1)
            .and_then(|s| s.split("```").next())
            .expect("docs/config.md has a ```toml example");
        // Its requests name fixtures of the repository.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/dhv-conform.toml");
        let config = parse(&path, example).unwrap_or_else(|e| panic!("{e}"));
        assert!(config.claims.any());
        for effect in Effect::ALL.map(Effect::as_str) {
            assert!(
                doc.contains(&format!("`{effect}`")),
                "docs/config.md misses {effect}"
            );
        }
    }

    #[test]
    fn limits_have_defaults_bounds_and_units() {
        let c = parse_text("").unwrap();
        assert_eq!(c.limits, crate::exec::CallLimits::default());
        let c = parse_text("[limits]\npids_max = 256\nmemory_max = \"512MiB\"\n").unwrap();
        assert_eq!(c.limits.pids_max, 256);
        assert_eq!(c.limits.memory_max, 512 << 20);
        let c = parse_text("[limits]\nmemory_max = 1073741824\n").unwrap();
        assert_eq!(c.limits.memory_max, 1 << 30);
        let err = parse_text("[limits]\npids_max = 2\n").unwrap_err();
        assert!(
            err.contains(":2: [limits] pids_max must be from 16"),
            "{err}"
        );
        let err = parse_text("[limits]\nmemory_max = \"4GB\"\n").unwrap_err();
        assert!(err.contains("memory_max must be bytes"), "{err}");
        let err = parse_text("[limits]\nmemory_max = \"1KiB\"\n").unwrap_err();
        assert!(err.contains("at least 16MiB"), "{err}");
        let err = parse_text("[limits]\npid_max = 20\n").unwrap_err();
        assert!(err.contains("did you mean `pids_max`"), "{err}");
    }
}
