//! Restore at scale: N volumes of `sample-plugins/reference` brought back after
//! a reboot (every volume dir removed) by the manager, next to the same N
//! creates run two other ways:
//!
//! - **xargs**: `xargs -P 2 -L 1 env -i DHV_...=... reference create`, one line
//!   per volume with that volume's whole Nomad environment. It pays one extra
//!   exec per call (`env`).
//! - **Nomad's Go path** (when `go` is on `PATH`): a small Go program that
//!   restores as Nomad's client does: a goroutine per volume, each running
//!   `exec.CommandContext` with `cmd.Env` set, stderr into a buffer,
//!   `cmd.Output()`, and the response decoded with `encoding/json`.
//! - **A bare runner**: threads (as many as the manager's default concurrency,
//!   and one per core), each taking the next volume and running its create
//!   with `std::process::Command` (environment cleared and set, stdin
//!   `/dev/null`, both pipes read, the answer decoded with `serde_json`), and
//!   nothing else: no process group, cgroup, subreaper, time limit, sweep or
//!   output cap. It is the floor for any runner of this plugin on the
//!   machine: what the manager pays for its safety nets is its ratio to this
//!   one.
//!
//! ```text
//! cargo bench --bench restore_scale                  # 1000 volumes, 5 rounds
//! cargo bench --bench restore_scale -- 1000 9        # N volumes, rounds
//! ```
//!
//! Every round runs each contender once, in an order that rotates from round to
//! round, so that drift in the machine's load hits all alike; the summary gives
//! medians. Targets (issue 27): the manager's restore at most 0.7x the xargs
//! run and 0.9x Nomad's Go path; the built-in `mkdir` restore of 1,000
//! volumes well under a second (issue 7).
//!
//! CPU is measured too: `getrusage(RUSAGE_CHILDREN)` over a run is the CPU time
//! of every process it started (the plugin, its `mkdir`/`chmod`/`awk`, and for
//! the baselines `xargs`/`env` or the Go program itself), and
//! `getrusage(RUSAGE_SELF)` is the manager's own.

mod common;

use common::Usage;

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dhv_conform::manager::{HostVolumeManager, VolumeSpec};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The bounds (issue 27): restore at most this fraction of the xargs run,
/// and of Nomad's Go path.
const XARGS_TARGET: f64 = 0.7;
const NOMAD_TARGET: f64 = 0.9;

fn main() -> Result<()> {
    let mut numbers = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<usize>().ok());
    let n = numbers.next().unwrap_or(1000);
    let rounds = numbers.next().unwrap_or(5).max(1);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let plugin_dir = root.join("sample-plugins");
    let plugin = plugin_dir.join("reference");
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let work = tempfile::Builder::new().prefix("dhv-bench-").tempdir()?;

    println!("restore_scale: {n} volumes, {rounds} rounds, {cores} cores");
    mkdir_restore(&rt, work.path(), n)?;

    let state = work.path().join("state");
    let volumes = work.path().join("volumes");
    std::fs::create_dir_all(&volumes)?;
    let manager = HostVolumeManager::open(&state)?
        .with_plugin_dir(&plugin_dir)
        .with_volumes_dir(&volumes);
    let started = Instant::now();
    for i in 0..n {
        rt.block_on(manager.create(VolumeSpec::new("reference", format!("v{i}"))))?;
    }
    println!(
        "set-up: {n} creates one after another in {:.1} s (each writes the state file)",
        started.elapsed().as_secs_f64()
    );

    // Every volume's create environment, exactly as the manager sends it.
    let envs: Vec<Vec<(String, String)>> = rt
        .block_on(manager.list())?
        .into_iter()
        .map(|v| v.create_request.ok_or("a created volume has no request"))
        .map(|r| r.map(|r| r.env()))
        .collect::<std::result::Result<_, _>>()?;
    let xargs_input = work.path().join("xargs.lines");
    std::fs::write(&xargs_input, xargs_lines(&envs, &plugin))?;
    let go_input = work.path().join("go.lines");
    std::fs::write(&go_input, go_lines(&envs))?;
    let go = common::build_go(work.path(), "nomad_restore", GO_RESTORE);
    if let Err(e) = &go {
        println!("Nomad's Go path: not measured ({e})");
    }

    let default_concurrency = 4 * cores;
    let mut contenders = vec![
        Contender::new(Way::Manager(default_concurrency)),
        Contender::new(Way::Manager(2)),
        Contender::new(Way::Xargs),
    ];
    if let Ok(go) = go {
        contenders.push(Contender::new(Way::NomadGo(go)));
    }
    contenders.push(Contender::new(Way::Bare(default_concurrency)));
    contenders.push(Contender::new(Way::Bare(cores)));
    let count = contenders.len();
    for round in 0..rounds {
        for k in 0..count {
            let c = &mut contenders[(round + k) % count];
            reboot(&volumes)?;
            let before = Usage::now();
            let started = Instant::now();
            match &c.way {
                Way::Manager(concurrency) => {
                    let manager = HostVolumeManager::open(&state)?
                        .with_plugin_dir(&plugin_dir)
                        .with_volumes_dir(&volumes)
                        .with_restore_concurrency(*concurrency);
                    let results = rt.block_on(manager.restore())?;
                    if let Some(bad) = results.iter().find(|r| !r.is_ok()) {
                        return Err(format!("restore failed: {:?}", bad.error()).into());
                    }
                }
                Way::Xargs => run_quiet(
                    Command::new("xargs")
                        .args(["-P", "2", "-L", "1", "env", "-i"])
                        .stdin(std::fs::File::open(&xargs_input)?),
                )?,
                Way::NomadGo(go) => run_quiet(
                    Command::new(go)
                        .arg(&plugin)
                        .stdin(std::fs::File::open(&go_input)?),
                )?,
                Way::Bare(threads) => bare_restore(&plugin, &envs, *threads)?,
            }
            let wall = started.elapsed();
            let used = Usage::now().since(&before);
            let made = std::fs::read_dir(&volumes)?.count();
            if made != n {
                return Err(format!("{}: {made} of {n} volumes made", c.way).into());
            }
            c.record(wall, used);
        }
    }

    println!("\nmedians over {rounds} rounds:");
    for c in &contenders {
        println!("  {c}");
    }
    // Ratios are taken within a round, where both sides saw the same machine,
    // and then their median: steadier than a ratio of two medians.
    let per_round = |a: &Contender, b: &Contender| -> Vec<f64> {
        a.walls.iter().zip(&b.walls).map(|(x, y)| x / y).collect()
    };
    let (ours, baselines): (Vec<&Contender>, Vec<&Contender>) = contenders
        .iter()
        .partition(|c| matches!(c.way, Way::Manager(_)));
    println!();
    let rounds_of = |a: &Contender, b: &Contender| {
        let rounds = per_round(a, b);
        let each = rounds.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>();
        (median(&rounds), each.join(" "))
    };
    for base in &baselines {
        let target = match base.way {
            Way::Xargs => Some(XARGS_TARGET),
            Way::NomadGo(_) => Some(NOMAD_TARGET),
            _ => None,
        };
        for c in &ours {
            let (r, each) = rounds_of(c, base);
            let verdict = target.map_or(String::from("the cost of the safety nets"), |t| {
                format!("target <= {t}x: {}", common::met(r <= t))
            });
            println!(
                "{} / {}: {r:.2}x ({verdict}; per round {each})",
                c.way, base.way
            );
        }
    }
    // How the baselines stand to xargs: the bare runner's ratio is the
    // lowest any runner of this plugin reaches here.
    if let Some(xargs) = baselines.iter().find(|b| matches!(b.way, Way::Xargs)) {
        for other in baselines.iter().filter(|b| !matches!(b.way, Way::Xargs)) {
            let (r, each) = rounds_of(other, xargs);
            println!("{} / {}: {r:.2}x (per round {each})", other.way, xargs.way);
        }
    }
    Ok(())
}

/// The built-in plugin: N volumes created, then restored after a reboot.
fn mkdir_restore(rt: &tokio::runtime::Runtime, work: &Path, n: usize) -> Result<()> {
    let state = work.join("mkdir-state");
    let volumes = work.join("mkdir-volumes");
    std::fs::create_dir_all(&volumes)?;
    let manager = HostVolumeManager::open(&state)?.with_volumes_dir(&volumes);
    for i in 0..n {
        rt.block_on(manager.create(VolumeSpec::new("mkdir", format!("v{i}"))))?;
    }
    let mut times = Vec::new();
    for _ in 0..5 {
        reboot(&volumes)?;
        let manager = HostVolumeManager::open(&state)?.with_volumes_dir(&volumes);
        let started = Instant::now();
        let results = rt.block_on(manager.restore())?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
        if results.iter().any(|r| !r.is_ok()) || std::fs::read_dir(&volumes)?.count() != n {
            return Err("mkdir restore failed".into());
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "built-in mkdir: restore of {n} volumes, median of 5: {:.1} ms (target: well under 1 s)",
        times[times.len() / 2]
    );
    Ok(())
}

/// One `env -i` command line per volume: its variables, then the plugin.
fn xargs_lines(envs: &[Vec<(String, String)>], plugin: &Path) -> String {
    let mut out = String::new();
    for env in envs {
        for (k, v) in env {
            assert!(
                !v.contains(|c: char| c.is_whitespace() || "\"'\\".contains(c)),
                "xargs would split {k}={v}"
            );
            write!(out, "{k}={v} ").expect("write to a String");
        }
        writeln!(out, "{} create", plugin.display()).expect("write to a String");
    }
    out
}

/// One line per volume for the Go program: its variables, tab-separated.
fn go_lines(envs: &[Vec<(String, String)>]) -> String {
    envs.iter()
        .map(|env| {
            let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            vars.join("\t") + "\n"
        })
        .collect()
}

/// The bare runner: `threads` threads, each running the next volume's create
/// with `std::process::Command` and decoding its answer, and nothing more.
fn bare_restore(plugin: &Path, envs: &[Vec<(String, String)>], threads: usize) -> Result<()> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let create = |env: &Vec<(String, String)>| -> std::result::Result<(), String> {
        let out = Command::new(plugin)
            .arg("create")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("bare runner: {e}"))?;
        if !out.status.success() {
            return Err(format!("bare runner: create {}", out.status));
        }
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .map(drop)
            .map_err(|e| format!("bare runner: the answer: {e}"))
    };
    std::thread::scope(|scope| {
        let lanes: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> std::result::Result<(), String> {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(env) = envs.get(i) else {
                            return Ok(());
                        };
                        create(env)?;
                    }
                })
            })
            .collect();
        lanes.into_iter().try_for_each(|lane| {
            lane.join()
                .map_err(|_| "bare runner: a thread panicked".to_string())?
        })
    })?;
    Ok(())
}

/// What a reboot with volumes on a tmpfs does: every volume dir is gone.
fn reboot(volumes: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(volumes)? {
        std::fs::remove_dir_all(entry?.path())?;
    }
    Ok(())
}

fn run_quiet(cmd: &mut Command) -> Result<()> {
    let status = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status()?;
    if !status.success() {
        return Err(format!("{cmd:?}: {status}").into());
    }
    Ok(())
}

/// A way of bringing the volumes back.
enum Way {
    /// The manager's restore at this concurrency.
    Manager(usize),
    /// `xargs -P 2 env -i`, one line per volume.
    Xargs,
    /// The Go program at this path, restoring as Nomad does.
    NomadGo(PathBuf),
    /// `std::process::Command` from this many threads, and no safety net.
    Bare(usize),
}

impl std::fmt::Display for Way {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Way::Manager(c) => write!(f, "manager restore, concurrency {c}"),
            Way::Xargs => f.write_str("xargs -P 2 env -i (shell)"),
            Way::NomadGo(_) => f.write_str("Nomad's Go path (goroutine each)"),
            Way::Bare(n) => write!(f, "bare Command, {n} threads, no safety net"),
        }
    }
}

/// One way of bringing the volumes back, and its runs.
struct Contender {
    way: Way,
    walls: Vec<f64>,
    own_cpu: Vec<f64>,
    child_cpu: Vec<f64>,
}

impl Contender {
    fn new(way: Way) -> Contender {
        Contender {
            way,
            walls: Vec::new(),
            own_cpu: Vec::new(),
            child_cpu: Vec::new(),
        }
    }

    fn record(&mut self, wall: Duration, used: Usage) {
        self.walls.push(wall.as_secs_f64());
        self.own_cpu.push(used.own);
        self.child_cpu.push(used.children);
    }
}

impl std::fmt::Display for Contender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<40} wall {:>6.3} s   CPU: started processes {:>6.3} s, in-process {:>6.3} s",
            self.way.to_string(),
            median(&self.walls),
            median(&self.child_cpu),
            median(&self.own_cpu),
        )
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Nomad's restore, reduced to its process work: read one line of tab-separated
/// `DHV_*` variables per volume from stdin, then run create for all of them at
/// once, a goroutine each, the way the client's host volume manager runs a
/// plugin, and decode each response.
const GO_RESTORE: &str = r#"package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

type createResponse struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

func create(plugin string, env []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugin, "create")
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	var resp createResponse
	return json.Unmarshal(out, &resp)
}

func main() {
	var envs [][]string
	scan := bufio.NewScanner(os.Stdin)
	scan.Buffer(make([]byte, 1<<20), 1<<20)
	for scan.Scan() {
		envs = append(envs, strings.Split(scan.Text(), "\t"))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(envs))
	for _, env := range envs {
		wg.Add(1)
		go func(env []string) {
			defer wg.Done()
			if err := create(os.Args[1], env); err != nil {
				errs <- err
			}
		}(env)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
"#;
