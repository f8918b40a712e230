//! The plugin that ran is the plugin reported: a plugin file that changes
//! mid-run makes the verdict inconclusive (exit 4), said in every format,
//! and the report's sha256 is the file's at the start.

use crate::util;

use std::fs;

use sha2::{Digest as _, Sha256};

/// A plugin that, in its first create, replaces its own file with another
/// (the reference plugin plus one line): the calls after it run that one.
#[test]
fn a_plugin_that_rewrites_itself_mid_run_is_inconclusive_in_every_format() {
    let dir = util::Scratch::new();
    let path = dir.path().join("shifty");
    let d = dir.path().display();
    let body = format!(
        "#!/bin/sh\n\
         if [ \"$1\" = create ] && /bin/mkdir {d}/rewritten 2>/dev/null; then\n\
         /bin/cp {p} {p}.new && echo '# version B' >> {p}.new && /bin/mv {p}.new {p}\n\
         fi\n\
         exec {} \"$@\"\n",
        util::sample("reference"),
        p = path.display()
    );
    let plugin = dir.plugin("shifty", &body);
    let start_sha: String = Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let junit = dir.path().join("junit.xml");
    let markdown = dir.path().join("summary.md");
    let html = dir.path().join("report.html");
    let json = dir.path().join("report.json");
    let snapshot = dir.path().join("shifty.snap");
    let out = util::check::check([
        plugin.as_os_str(),
        "--snapshot".as_ref(),
        snapshot.as_os_str(),
        "--bless".as_ref(),
        "create.".as_ref(),
        "--color".as_ref(),
        "never".as_ref(),
        "--json".as_ref(),
        json.as_os_str(),
        "--junit".as_ref(),
        junit.as_os_str(),
        "--markdown".as_ref(),
        markdown.as_os_str(),
        "--html".as_ref(),
        html.as_os_str(),
    ])
    .run();
    assert!(dir.path().join("rewritten").exists(), "{}", out.stderr);
    assert_eq!(out.code, Some(4), "{}\n{}", out.stdout, out.stderr);
    assert!(!snapshot.exists(), "a run of an unknown plugin was blessed");
    assert!(
        !dir.path().join("shifty.snap.new").exists(),
        "a run of an unknown plugin was proposed"
    );
    assert!(
        out.stderr.contains("neither compared nor written"),
        "{}",
        out.stderr
    );

    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["summary"]["verdict"], "inconclusive");
    assert_eq!(
        report["plugin"]["sha256"],
        start_sha.as_str(),
        "the file pinned at the start"
    );
    let changed = &report["plugin_changed"];
    assert_eq!(changed["sha256_before"], start_sha.as_str());
    assert_ne!(changed["sha256_after"], changed["sha256_before"]);
    assert!(changed["calls_before"].as_u64().unwrap() >= 1, "{changed}");
    assert!(
        changed["detail"].as_str().unwrap().contains("inode"),
        "{changed}"
    );

    let said = "plugin file changed mid-run";
    assert!(out.stdout.contains(said), "terminal: {}", out.stdout);
    assert!(
        out.stdout.contains("INCONCLUSIVE"),
        "terminal: {}",
        out.stdout
    );
    let xml = fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("name=\"plugin_changed\""), "{xml}");
    assert!(
        xml.contains("name=\"verdict\" value=\"inconclusive\""),
        "{xml}"
    );
    let md = fs::read_to_string(&markdown).unwrap();
    assert!(md.contains("Plugin changed mid-run"), "{md}");
    let page = fs::read_to_string(&html).unwrap();
    assert!(page.contains("id=\"plugin-changed\""), "html");
    assert!(page.contains("data-verdict=\"inconclusive\""), "html");
}

/// A plugin whose file stays as it was has no `plugin_changed`, and its
/// verdict stands.
#[test]
fn a_plugin_left_alone_is_judged_as_usual() {
    let out = util::check::check([
        util::sample("reference").as_str(),
        "create.succeeds",
        "--json",
        "-",
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stdout.contains("plugin_changed"), "{}", out.stdout);
}
