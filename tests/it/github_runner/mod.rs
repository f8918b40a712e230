//! A simulated GitHub runner for `action.yml`: its composite steps read from the file,
//! their `${{ ... }}` expressions evaluated, each `run:` step executed the way GitHub
//! does (`bash --noprofile --norc -eo pipefail FILE`, GitHub's environment, a fresh
//! `$GITHUB_OUTPUT` per step, one `$GITHUB_STEP_SUMMARY`), as a user that is not root;
//! the `uses:` steps are recorded with their evaluated inputs (the cache key, the
//! artifact name). A stub `cargo` on `PATH` records every call and "builds" by copying
//! the harness this test run built, so a test can see whether a run compiled.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The unprivileged user the runs use (GitHub's runner user is not root).
pub const USER: &str = "dhv-gate";

/// One step of the composite action, as written.
#[derive(Debug, Default, Clone)]
pub struct Step {
    pub name: String,
    pub id: Option<String>,
    pub cond: Option<String>,
    pub uses: Option<String>,
    pub run: Option<String>,
    pub env: Vec<(String, String)>,
    pub with: Vec<(String, String)>,
}

/// The action: its inputs' defaults and its steps.
pub struct Action {
    pub defaults: BTreeMap<String, String>,
    pub steps: Vec<Step>,
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        v[1..v.len() - 1].replace("''", "'")
    } else if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        v[1..v.len() - 1].to_owned()
    } else {
        v.to_owned()
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Reads the layout `action.yml` uses (block mappings, `|` blocks); enough for it.
pub fn parse(text: &str) -> Action {
    let lines: Vec<&str> = text.lines().collect();
    let mut defaults = BTreeMap::new();
    let mut steps: Vec<Step> = Vec::new();
    let mut section = "";
    let mut input = String::new();
    let mut map: Option<&'static str> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ind = indent(line);
        if ind == 0 {
            section = if t == "inputs:" { "inputs" } else { "" };
            continue;
        }
        if t == "steps:" {
            section = "steps";
            continue;
        }
        let (key, value) = t
            .trim_start_matches("- ")
            .split_once(':')
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .unwrap_or_default();
        // A `|` block: the more-indented lines below, joined.
        let value = if value == "|" {
            let mut block = Vec::new();
            while i < lines.len() && (lines[i].trim().is_empty() || indent(lines[i]) > ind) {
                block.push(lines[i].trim());
                i += 1;
            }
            block.join("\n")
        } else {
            value
        };
        match section {
            "inputs" if ind == 2 => input = key,
            "inputs" if key == "default" => {
                defaults.insert(input.clone(), unquote(&value));
            }
            "steps" if t.starts_with("- ") => {
                steps.push(Step {
                    name: value,
                    ..Step::default()
                });
                map = None;
            }
            "steps" => {
                let step = steps.last_mut().expect("a step");
                if ind == 6 {
                    map = None;
                    match key.as_str() {
                        "id" => step.id = Some(value),
                        "if" => step.cond = Some(value),
                        "uses" => step.uses = Some(value),
                        "run" => step.run = Some(unquote(&value)),
                        "env" => map = Some("env"),
                        "with" => map = Some("with"),
                        "shell" => assert_eq!(value, "bash"),
                        other => panic!("step key {other} not simulated"),
                    }
                } else {
                    let entry = (key, unquote(&value));
                    match map {
                        Some("env") => step.env.push(entry),
                        Some("with") => step.with.push(entry),
                        _ => panic!("unexpected line {line:?}"),
                    }
                }
            }
            _ => {}
        }
    }
    Action { defaults, steps }
}

/// What a run of the action saw and did.
#[derive(Debug, Default)]
pub struct Run {
    /// `steps.<id>.outputs.<name>`.
    pub outputs: BTreeMap<String, BTreeMap<String, String>>,
    /// The `uses:` steps that ran, with their evaluated `with:`.
    pub used: Vec<(String, BTreeMap<String, String>)>,
    /// Exit code of each `run:` step, by step name.
    pub codes: Vec<(String, Option<i32>)>,
    pub stderr: String,
    pub summary: String,
}

impl Run {
    pub fn output(&self, step: &str, name: &str) -> &str {
        self.outputs
            .get(step)
            .and_then(|o| o.get(name))
            .map_or("", String::as_str)
    }

    pub fn used(&self, action: &str) -> Option<&BTreeMap<String, String>> {
        self.used
            .iter()
            .find(|(u, _)| u.starts_with(action))
            .map(|(_, w)| w)
    }

    /// The gate step's exit code.
    pub fn gate_code(&self) -> Option<i32> {
        self.codes
            .iter()
            .find(|(n, _)| n == "Check the plugin")
            .and_then(|(_, c)| *c)
    }
}

/// The job's machine: workspace, runner temp (kept between runs, as the cache
/// restores it), the stub cargo and its call log.
pub struct Runner {
    pub root: PathBuf,
    pub workspace: PathBuf,
    pub runner_temp: PathBuf,
    pub cargo_log: PathBuf,
    bin: PathBuf,
    as_user: bool,
}

/// Creates the unprivileged user once; false when this process is not root (it then
/// is the unprivileged user itself).
fn ensure_user() -> bool {
    if nix::unistd::geteuid().as_raw() != 0 {
        return false;
    }
    let exists = || {
        Command::new("id")
            .arg(USER)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !exists() {
        // Another test binary may create it at the same moment: only the result counts.
        let _ = Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/bin/sh", USER])
            .output();
    }
    assert!(exists(), "cannot create the user {USER} for the runner");
    true
}

fn chown_to_user(path: &Path) {
    let status = Command::new("chown")
        .args(["-R", &format!("{USER}:")])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

impl Runner {
    /// A fresh machine under `root` (a scratch dir the test owns and removes).
    pub fn new(root: &Path) -> Runner {
        let as_user = ensure_user();
        let workspace = root.join("workspace");
        let runner_temp = root.join("runner-temp");
        let bin = root.join("bin");
        for dir in [
            &workspace,
            &runner_temp,
            &bin,
            &root.join("home"),
            &root.join("tmp"),
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let cargo_log = root.join("cargo-calls.log");
        std::fs::write(&cargo_log, "").unwrap();
        let stub = bin.join("cargo");
        std::fs::write(
            &stub,
            format!(
                "#!/bin/sh\n\
                 echo \"$*\" >> '{log}'\n\
                 target=\n\
                 while [ $# -gt 0 ]; do\n\
                 \x20 if [ \"$1\" = --target-dir ]; then target=$2; fi\n\
                 \x20 shift\n\
                 done\n\
                 echo '   Compiling dhv-conform (stub)' >&2\n\
                 mkdir -p \"$target/release\" && cp '{real}' \"$target/release/dhv-conform\"\n",
                log = cargo_log.display(),
                real = assert_cmd::cargo::cargo_bin("dhv-conform").display(),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A sudo that records its arguments and runs the command as the caller.
        let sudo = bin.join("sudo");
        std::fs::write(
            &sudo,
            format!(
                "#!/bin/sh\necho \"$*\" >> '{}'\nif [ \"$1\" = -E ]; then shift; fi\nexec \"$@\"\n",
                root.join("sudo-calls.log").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&sudo, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(root.join("sudo-calls.log"), "").unwrap();
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
        if as_user {
            chown_to_user(root);
        }
        Runner {
            root: root.to_owned(),
            workspace,
            runner_temp,
            cargo_log,
            bin,
            as_user,
        }
    }

    /// Makes the stub cargo fail every build as a compile error does (exit 101).
    pub fn break_build(&self) {
        let stub = self.bin.join("cargo");
        std::fs::write(
            &stub,
            format!(
                "#!/bin/sh\necho \"$*\" >> '{}'\n\
                 echo 'error[E0425]: cannot find value `x` in this scope' >&2\n\
                 exit 101\n",
                self.cargo_log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The stub cargo's `build` calls so far.
    pub fn builds(&self) -> usize {
        std::fs::read_to_string(&self.cargo_log)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("build"))
            .count()
    }

    /// The stub sudo's calls so far.
    pub fn sudo_calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("sudo-calls.log"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Runs the action with `inputs` (the rest at their defaults) as job `job`.
    pub fn run(&self, action: &Action, job: &str, inputs: &[(&str, &str)]) -> Run {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut inputs_map = action.defaults.clone();
        for (k, v) in inputs {
            inputs_map.insert((*k).to_owned(), (*v).to_owned());
        }
        let summary = self.root.join("step-summary.md");
        std::fs::write(&summary, "").unwrap();
        let mut run = Run::default();
        let mut failed = false;
        for (n, step) in action.steps.iter().enumerate() {
            let eval = |text: &str, run: &Run| {
                evaluate(text, &|expr| {
                    lookup(expr, &inputs_map, run, &self.runner_temp, repo)
                })
            };
            let go = match step.cond.as_deref() {
                Some("always()") => true,
                Some("inputs.cache == 'true'") => !failed && inputs_map["cache"] == "true",
                Some(other) => panic!("condition {other} not simulated"),
                None => !failed,
            };
            if !go {
                continue;
            }
            if let Some(uses) = &step.uses {
                let with = step
                    .with
                    .iter()
                    .map(|(k, v)| (k.clone(), eval(v, &run)))
                    .collect();
                run.used.push((uses.clone(), with));
                continue;
            }
            let script = self.root.join(format!("step-{n}.sh"));
            std::fs::write(&script, step.run.as_deref().expect("a run step")).unwrap();
            let output = self.root.join(format!("step-{n}.out"));
            std::fs::write(&output, "").unwrap();
            if self.as_user {
                chown_to_user(&output);
                chown_to_user(&summary);
            }
            let mut env: Vec<(String, String)> = vec![
                (
                    "PATH".into(),
                    format!(
                        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        self.bin.display()
                    ),
                ),
                ("HOME".into(), self.root.join("home").display().to_string()),
                ("TMPDIR".into(), self.root.join("tmp").display().to_string()),
                ("CI".into(), "true".into()),
                ("GITHUB_ACTIONS".into(), "true".into()),
                ("GITHUB_JOB".into(), job.into()),
                (
                    "GITHUB_WORKSPACE".into(),
                    self.workspace.display().to_string(),
                ),
                ("GITHUB_ACTION_PATH".into(), repo.display().to_string()),
                ("GITHUB_OUTPUT".into(), output.display().to_string()),
                ("GITHUB_STEP_SUMMARY".into(), summary.display().to_string()),
                ("RUNNER_TEMP".into(), self.runner_temp.display().to_string()),
                ("RUNNER_OS".into(), "Linux".into()),
                ("RUNNER_ARCH".into(), "X64".into()),
            ];
            for (k, v) in &step.env {
                env.push((k.clone(), eval(v, &run)));
            }
            // runuser would reset HOME and more: `env -i` sets exactly GitHub's.
            let mut cmd = if self.as_user {
                let mut c = Command::new("/usr/sbin/runuser");
                c.args(["-u", USER, "--", "/usr/bin/env", "-i"]);
                c
            } else {
                let mut c = Command::new("/usr/bin/env");
                c.arg("-i");
                c
            };
            cmd.args(env.iter().map(|(k, v)| format!("{k}={v}")))
                .arg("bash")
                .args(["--noprofile", "--norc", "-eo", "pipefail"])
                .arg(&script)
                .current_dir(&self.workspace);
            let out = cmd.output().unwrap();
            run.stderr.push_str(&String::from_utf8_lossy(&out.stderr));
            run.codes.push((step.name.clone(), out.status.code()));
            failed |= !out.status.success();
            if let Some(id) = &step.id {
                let mut outputs = BTreeMap::new();
                for line in std::fs::read_to_string(&output).unwrap().lines() {
                    if let Some((k, v)) = line.split_once('=') {
                        outputs.insert(k.to_owned(), v.to_owned());
                    }
                }
                run.outputs.insert(id.clone(), outputs);
            }
        }
        run.summary = std::fs::read_to_string(&summary).unwrap();
        let left: Vec<_> = std::fs::read_dir(self.root.join("tmp"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "the run left {left:?}");
        run
    }
}

/// Replaces every `${{ expr }}` in `text` with `value(expr)`.
fn evaluate(text: &str, value: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("closed expression") + start;
        out.push_str(&value(rest[start + 3..end].trim()));
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

fn lookup(
    expr: &str,
    inputs: &BTreeMap<String, String>,
    run: &Run,
    runner_temp: &Path,
    repo: &Path,
) -> String {
    if let Some((a, b)) = expr.split_once("||") {
        let a = lookup(a.trim(), inputs, run, runner_temp, repo);
        return if a.is_empty() {
            lookup(b.trim(), inputs, run, runner_temp, repo)
        } else {
            a
        };
    }
    if let Some(name) = expr.strip_prefix("inputs.") {
        return inputs
            .get(name)
            .unwrap_or_else(|| panic!("input {name} is not declared"))
            .clone();
    }
    if let Some(rest) = expr.strip_prefix("steps.") {
        let (id, name) = rest.split_once(".outputs.").expect("steps.ID.outputs.NAME");
        return run.output(id, name).to_owned();
    }
    match expr {
        "runner.temp" => runner_temp.display().to_string(),
        "runner.os" => "Linux".to_owned(),
        "runner.arch" => "X64".to_owned(),
        "github.action_path" => repo.display().to_string(),
        other => panic!("expression {other} not simulated"),
    }
}
