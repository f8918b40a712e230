//! The end-to-end tests, in one test binary: each module is one subject (a
//! command, a report format, a safety promise), and `util` is what they share.
//!
//! One binary links once, where a file each linked fifty times over: the
//! tests build in a fraction of the time and the disk. Run one subject with
//! `cargo test --test it <module>::`, e.g. `cargo test --test it reports::`.

mod github_runner;
mod samples;
mod util;

mod blind_spots;
mod block_device;
mod call_limits;
mod catalogue_power;
mod check_repeat;
mod ci_gate;
mod ci_github;
mod cli_check;
mod cli_check_reports;
mod cli_manager;
mod cli_run;
mod cli_ux;
mod cli_words;
mod cli_work_dir;
mod config;
mod determinism_samples;
mod device_holders;
mod exec;
mod exit_signals;
mod explore;
mod failure_path;
mod fleet;
mod forced_races;
mod host_seam;
mod hostile_fixtures;
mod html_browser;
mod interrupt;
mod junit_schema;
mod killed_run;
mod library;
mod library_scratch;
mod lifecycle_reboot;
mod loop_ext4;
mod manager;
mod manager_discovery;
mod manager_restore;
mod manager_safety;
mod manager_state;
mod mounts;
mod mounts_over_root;
mod mutants;
mod nomad_fidelity_corners;
mod nomad_fidelity_run;
mod nomad_job;
mod one_finding;
mod outputs;
mod plugin_pin;
mod processes;
mod repeatable;
mod report_html;
mod reports;
mod robustness;
mod robustness_parsers;
mod safety_fs;
mod scaffold;
mod small_disk;
mod snapshot_gate;
mod special_files;
mod sweep;
mod teardown;
mod terminal;
mod terminal_escapes;
mod timeouts_alone;
mod two_suites;
mod volume_measured;
