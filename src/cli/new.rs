//! `dhv-conform new --lang sh|python|go DIR`: a plugin that passes every check
//! from its first commit, with its `dhv-conform.toml`, a blessed snapshot and
//! the CI files for GitHub and GitLab. The shell plugin is the bundled
//! reference itself (less the entry point that lets the fault samples reuse
//! it); the Python and Go ones follow it line for line.

use std::path::{Path, PathBuf};

use clap::Parser;

use super::check_args::CheckArgs;
use super::{CliError, CliResult, EXIT_OK, print_stderr};

/// Arguments of `new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The plugin's language: sh, python or go.
    #[arg(long, value_name = "sh|python|go")]
    pub lang: String,
    /// The directory to write (new, or empty); its name is the plugin's id.
    pub dir: PathBuf,
}

const REFERENCE: &str = include_str!("../../sample-plugins/reference");
const PYTHON: &str = include_str!("new/plugin.py");
const GO_MAIN: &str = include_str!("new/main.go");
const GO_MOD: &str = include_str!("new/go.mod");

/// A file `new` writes: where, what, and whether it is executable.
struct File {
    path: PathBuf,
    text: String,
    executable: bool,
}

/// Runs `new`.
pub fn run(rt: &tokio::runtime::Runtime, args: NewArgs) -> CliResult {
    let name = plugin_name(&args.dir)?;
    let files = files(&args.lang, &name)?;
    make_dir(&args.dir)?;
    for f in &files {
        write(&args.dir, f)?;
    }
    let plugin = args.dir.join(&name);
    if args.lang == "go" && !build_go(&args.dir, &name)? {
        print_stderr(&format!(
            "dhv-conform: wrote {}; `go` is not on PATH, so the plugin is not built and no snapshot \
             is blessed: run `go build -o {name} .` there, then `dhv-conform check ./{name} --snapshot \
             snapshots/{name}.snap --bless --accept`\n",
            args.dir.display()
        ));
        return Ok(EXIT_OK);
    }
    let snapshots = args.dir.join("snapshots");
    std::fs::create_dir_all(&snapshots)
        .map_err(|e| CliError::usage(format!("new: cannot create {}: {e}", snapshots.display())))?;
    let code = bless(rt, &plugin, &snapshots.join(format!("{name}.snap")))?;
    if code != EXIT_OK {
        return Err(CliError::harness(format!(
            "the new plugin {} did not pass its own check (exit {code}): this is a bug of dhv-conform new",
            plugin.display()
        )));
    }
    print_stderr(&format!(
        "dhv-conform: wrote a {} plugin in {}: {name}, dhv-conform.toml, snapshots/{name}.snap, \
         .github/workflows/dhv-conform.yml, .gitlab-ci.yml\n",
        args.lang,
        args.dir.display()
    ));
    Ok(EXIT_OK)
}

/// The plugin's id: the dir's name, which Nomad uses as the file name.
fn plugin_name(dir: &Path) -> Result<String, CliError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fine = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if fine {
        Ok(name)
    } else {
        Err(CliError::usage(format!(
            "new: the dir's name is the plugin's id and must be letters, digits, '-', '_' or '.': {:?}",
            dir.display().to_string()
        )))
    }
}

/// Every file of a new plugin in `lang`.
fn files(lang: &str, name: &str) -> Result<Vec<File>, CliError> {
    let file = |path: &str, text: String, executable: bool| File {
        path: PathBuf::from(path),
        text,
        executable,
    };
    let mut out = match lang {
        "sh" => vec![file(name, shell(name), true)],
        "python" => vec![file(name, PYTHON.replace("__NAME__", name), true)],
        "go" => vec![
            file("main.go", GO_MAIN.replace("__NAME__", name), false),
            file("go.mod", GO_MOD.replace("__NAME__", name), false),
            file(".gitignore", format!("/{name}\n"), false),
        ],
        other => {
            return Err(CliError::usage(format!(
                "new: --lang must be sh, python or go, not {other:?}"
            )));
        }
    };
    out.push(file("dhv-conform.toml", config(name), false));
    out.push(file(
        ".github/workflows/dhv-conform.yml",
        github(name, lang),
        false,
    ));
    out.push(file(".gitlab-ci.yml", gitlab(name, lang), false));
    Ok(out)
}

/// Where the reference's entry point begins: the lines that let the fault
/// samples beside it source it as a library. A new plugin is no library.
const SAMPLES_ENTRY: &str = "# The fault samples beside this file";

/// The reference plugin, named `name`, its last line `main "$@"`.
fn shell(name: &str) -> String {
    let code = match REFERENCE.find(SAMPLES_ENTRY) {
        Some(at) => format!("{}main \"$@\"\n", &REFERENCE[..at]),
        None => REFERENCE.to_owned(),
    };
    code.replacen(
        "# reference: a conformant Nomad dynamic host volume (DHV) plugin in POSIX sh.",
        &format!(
            "# {name}: a Nomad dynamic host volume (DHV) plugin in POSIX sh, written by `dhv-conform new`."
        ),
        1,
    )
    .replacen("PROG=reference", &format!("PROG={name}"), 1)
}

fn config(name: &str) -> String {
    format!(
        "# dhv-conform.toml: what `dhv-conform check ./{name}` reads beside the plugin.\n\
         # Every key is documented in dhv-conform's docs/config.md.\n\
         \n\
         # Warnings fail the run too: this plugin starts with none.\n\
         strict = true\n\
         \n\
         [claims]\n\
         # A plain directory: attached as a file system, with no capacity of its own (it\n\
         # reports bytes 0). A plugin that makes real storage says so here, e.g.\n\
         # capacity = \"enforced\", filesystem = \"ext4\", attachment = \"block-device\".\n\
         attachment = \"file-system\"\n\
         \n\
         # [claims.parameters.mode]\n\
         # effect = \"mode\"\n\
         # values = [\"0750\"]\n\
         \n\
         # [skip]\n\
         # \"check.id\" = \"the reason every report shows\"\n"
    )
}

fn build_step(lang: &str, name: &str, indent: &str) -> String {
    if lang == "go" {
        format!("{indent}go build -o {name} .\n")
    } else {
        String::new()
    }
}

fn github(name: &str, lang: &str) -> String {
    let go = if lang == "go" {
        format!(
            "      - uses: actions/setup-go@v5\n        with:\n          go-version: stable\n      - run: |\n{}",
            build_step(lang, name, "          ")
        )
    } else {
        String::new()
    };
    format!(
        "name: conformance\n\
         on: [push, pull_request]\n\
         \n\
         jobs:\n  dhv-conform:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n\
         {go}\
         \x20     # Pin the harness to the version that blessed the snapshot: a newer one may word\n\
         \x20     # a message differently, and the snapshot would differ.\n\
         \x20     - uses: OWNER/dhv-conform@v{version}   # where your copy of dhv-conform lives\n\
         \x20       with:\n\
         \x20         plugin: ./{name}\n\
         \x20         snapshot: snapshots/{name}.snap\n",
        version = env!("CARGO_PKG_VERSION"),
    )
}

fn gitlab(name: &str, lang: &str) -> String {
    let before = if lang == "go" {
        format!(
            "  before_script:\n    - apt-get update -qq && apt-get install -y -qq golang-go\n{}",
            build_step(lang, name, "    - ")
        )
    } else {
        String::new()
    };
    format!(
        "# The dhv-conform gate: the job of dhv-conform's examples/gitlab-ci.yml.\n\
         include:\n  - remote: <raw URL of examples/gitlab-ci.yml in your copy of dhv-conform>\n\
         \n\
         dhv-conform:\n\
         {before}\
         \x20 variables:\n\
         \x20   DHV_CONFORM_REPO: <git URL of your copy of dhv-conform>\n\
         \x20   DHV_CONFORM_REF: v{version}\n\
         \x20   DHV_PLUGIN: ./{name}\n\
         \x20   DHV_SNAPSHOT: snapshots/{name}.snap\n",
        version = env!("CARGO_PKG_VERSION"),
    )
}

/// Makes `dir`, which must be new or empty: `new` overwrites nothing.
fn make_dir(dir: &Path) -> Result<(), CliError> {
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(CliError::usage(format!(
            "new: {} is not empty; give a new directory",
            dir.display()
        ))),
        Ok(false) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)
            .map_err(|e| CliError::usage(format!("new: cannot create {}: {e}", dir.display()))),
        Err(e) => Err(CliError::usage(format!("new: {}: {e}", dir.display()))),
    }
}

fn write(dir: &Path, f: &File) -> Result<(), CliError> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(&f.path);
    let fail =
        |e: std::io::Error| CliError::usage(format!("new: cannot write {}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    let opts = crate::safe_fs::WriteOptions::default();
    crate::safe_fs::write_file(&path, f.text.as_bytes(), &opts)
        .map_err(|e| CliError::usage(format!("new: {e}")))?;
    if f.executable {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    }
    Ok(())
}

/// `go build` when `go` is on PATH; false when it is not.
fn build_go(dir: &Path, name: &str) -> Result<bool, CliError> {
    let out = crate::exec::run_tool(
        "go",
        &["build", "-o", name, "."],
        dir,
        &[("GOFLAGS", "-mod=mod")],
    );
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(CliError::harness(format!("new: cannot run go build: {e}"))),
        Ok(o) if o.status.success() => Ok(true),
        Ok(o) => Err(CliError::harness(format!(
            "new: go build failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
    }
}

/// `check PLUGIN --snapshot SNAP --bless --accept -q`: the snapshot the new
/// plugin's CI compares with, written by the check it must pass (a first
/// snapshot of a plugin just made needs no review).
fn bless(rt: &tokio::runtime::Runtime, plugin: &Path, snapshot: &Path) -> CliResult {
    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        check: CheckArgs,
    }
    let argv = [
        "check".as_ref(),
        plugin.as_os_str(),
        "--snapshot".as_ref(),
        snapshot.as_os_str(),
        "--bless".as_ref(),
        "--accept".as_ref(),
        "-q".as_ref(),
    ];
    let wrapper =
        Wrapper::try_parse_from(argv).map_err(|e| CliError::harness(format!("new: {e}")))?;
    super::check::run(rt, wrapper.check)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shell plugin is the reference under its new name, and runs main
    /// whatever its environment holds: nothing of the samples' library use.
    #[test]
    fn the_shell_plugin_is_the_reference_with_a_plain_entry_point() {
        let text = shell("my-plugin");
        assert!(text.contains("\nPROG=my-plugin\n"), "{text}");
        assert!(
            text.contains("\n# my-plugin: a Nomad dynamic host volume"),
            "{text}"
        );
        assert!(text.ends_with("\n}\n\nmain \"$@\"\n"), "{text}");
        assert!(!text.contains("DHV_SAMPLE_AS_LIBRARY"), "{text}");
        assert!(REFERENCE.contains(SAMPLES_ENTRY));
    }
}
