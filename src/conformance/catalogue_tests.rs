//! The catalogue's own tests: what a check's definition must hold to, and the
//! two things kept outside it in the repo, the samples' `# expect:` headers and
//! the list of published ids, held to the definitions.

use super::*;
use crate::contract::Operation;
use std::path::{Path, PathBuf};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn ids_are_well_formed_unique_and_grouped() {
    let mut ids: Vec<_> = CATALOGUE.iter().map(|c| c.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), CATALOGUE.len(), "two checks share an id");
    let well_formed = regex::Regex::new(r"^[a-z]+\.[a-z0-9]+(-[a-z0-9]+)*$").unwrap();
    for c in CATALOGUE {
        assert!(well_formed.is_match(c.id), "{:?} is not `group.name`", c.id);
    }
    let mut groups = Vec::new();
    for checks in GROUPS {
        let group = checks.first().expect("a group without checks").group();
        for c in *checks {
            assert_eq!(
                c.group(),
                group,
                "{} is listed in the `{group}.*` checks",
                c.id
            );
        }
        assert!(!groups.contains(&group), "two groups are `{group}`");
        groups.push(group);
    }
}

/// Every definition in `checks/` is in the catalogue. One that no group's
/// `CHECKS` lists never runs: the build warns of an unused constant, and this
/// names the check and says what to do.
#[test]
fn every_definition_is_listed_in_its_group() {
    let mut defined = Vec::new();
    let dir = repo().join("src/conformance/checks");
    for entry in std::fs::read_dir(&dir).expect("src/conformance/checks") {
        let path = entry.expect("entry").path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if line.ends_with(": CheckSpec = CheckSpec {") {
                let id = (lines.next().map(str::trim))
                    .and_then(|l| l.strip_prefix("id: \""))
                    .and_then(|l| l.strip_suffix("\","))
                    .unwrap_or_else(|| {
                        panic!("{file}: `{line}` is not followed by its `id: \"…\",`")
                    });
                defined.push((id.to_owned(), file.clone()));
            }
        }
    }
    for (id, file) in &defined {
        assert!(
            find(id).is_some(),
            "{id} is defined in src/conformance/checks/{file}, but no group's CHECKS lists it: \
             add its constant to its group's CHECKS, where it goes in the catalogue's order"
        );
    }
    assert_eq!(defined.len(), CATALOGUE.len(), "definitions: {defined:?}");
}

/// Every check runs its own function, named after it (`create.path-exists`
/// runs `path_exists`): a definition copied for a new check and left running
/// the old one's function fails here. A function no check runs is dead code,
/// and a definition no group lists an unused constant: the build refuses both
/// (`-D warnings`).
#[test]
fn every_check_runs_its_own_function_named_after_it() {
    for c in CATALOGUE {
        let name = c.id.split('.').nth(1).unwrap_or_default().replace('-', "_");
        assert_eq!(
            c.run.name(),
            name,
            "{} runs `{}`: its definition's `run` names another check's function",
            c.id,
            c.run.name()
        );
    }
}

/// The texts `explain` and docs/checks.md print read as sentences: a rule
/// is one clause (the table cell), why and fix end with a full stop.
#[test]
fn every_check_explains_itself() {
    for c in CATALOGUE {
        assert!(
            !c.rule.is_empty() && !c.rule.ends_with('.'),
            "{}: the rule is one clause, without a full stop",
            c.id
        );
        for (what, text) in [("why", c.why), ("fix", c.fix)] {
            assert!(
                text.len() > 20 && text.ends_with('.'),
                "{}: `{what}` is a sentence or two, ending with a full stop",
                c.id
            );
        }
    }
}

/// The `# expect: <check-id> <fail|warn>` lines of sample-plugins/*, as
/// (check id, sample) pairs.
fn expect_headers() -> Vec<(String, String)> {
    let mut expected = Vec::new();
    for entry in std::fs::read_dir(repo().join("sample-plugins")).expect("sample-plugins") {
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
    expected
}

/// A check's `samples` are the sample plugins whose `# expect:` header names
/// it, and only those: the headers are the truth (the sample tests run them),
/// and the definition carries the list for the binary, which has no repo to
/// read at run time. On a mismatch the message gives the line to write.
#[test]
fn samples_agree_with_their_expect_headers() {
    let expected = expect_headers();
    for (id, sample) in &expected {
        assert!(
            find(id).is_some(),
            "sample-plugins/{sample} expects {id}, which no check has"
        );
    }
    for c in CATALOGUE {
        let headers: Vec<&str> = expected
            .iter()
            .filter(|(id, _)| id == c.id)
            .map(|(_, sample)| sample.as_str())
            .collect();
        // Keep the order the definition has; new samples go last, by name.
        let mut want: Vec<&str> = (c.samples.iter().copied())
            .filter(|s| headers.contains(s))
            .collect();
        let mut new: Vec<&str> = headers
            .iter()
            .copied()
            .filter(|s| !want.contains(s))
            .collect();
        new.sort();
        new.dedup();
        want.extend(new);
        assert!(
            want == c.samples,
            "the samples of {} do not match the sample plugins whose `# expect:` header names it; \
             in its definition (src/conformance/checks/), write: samples: &{want:?},",
            c.id
        );
    }
}

/// `catalogue_ids.txt`, where every id ever published stays.
fn ids_file() -> PathBuf {
    repo().join("src/conformance/catalogue_ids.txt")
}

const IDS_HEADER: &str = "\
# Every check id ever published: the catalogue's, in its order, then those of
# checks that are gone, marked `retired`. Check ids are public (filters, [skip]
# in configs, reports, people's CI), so a line never goes away. Generated: a new
# check's id is added by `DHV_CONFORM_UPDATE_IDS=1 cargo test --lib catalogue`;
# a test fails when an id below is neither a check nor retired.
";

/// The ids guard: an id published once (listed in catalogue_ids.txt) must be
/// a check's, or marked retired by hand; a new check's id is added to the file
/// by regenerating it (`DHV_CONFORM_UPDATE_IDS=1`), which never drops one.
#[test]
fn no_published_id_is_dropped() {
    let on_disk = std::fs::read_to_string(ids_file()).unwrap_or_default();
    let listed: Vec<(&str, bool)> = on_disk
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut words = l.split_whitespace();
            let id = words.next().unwrap_or_default();
            (id, words.next() == Some("retired"))
        })
        .collect();
    let dropped: Vec<&str> = (listed.iter())
        .filter(|(id, retired)| !retired && find(id).is_none())
        .map(|(id, _)| *id)
        .collect();
    assert!(
        dropped.is_empty(),
        "no check has the published id(s) {dropped:?} any more. Check ids are public: give the \
         check its id back, or, if the check is truly gone, mark its line `ID retired` in \
         src/conformance/catalogue_ids.txt"
    );
    let reused: Vec<&str> = (listed.iter())
        .filter(|(id, retired)| *retired && find(id).is_some())
        .map(|(id, _)| *id)
        .collect();
    assert!(
        reused.is_empty(),
        "{reused:?} are retired: a new check takes a new id, never a retired one"
    );
    let mut want = IDS_HEADER.to_owned();
    for c in CATALOGUE {
        want.push_str(c.id);
        want.push('\n');
    }
    for (id, _) in listed.iter().filter(|(_, retired)| *retired) {
        want.push_str(&format!("{id} retired\n"));
    }
    if std::env::var_os("DHV_CONFORM_UPDATE_IDS").is_some() {
        std::fs::write(ids_file(), &want).unwrap();
    }
    assert!(
        on_disk == want || std::env::var_os("DHV_CONFORM_UPDATE_IDS").is_some(),
        "src/conformance/catalogue_ids.txt does not list every check's id in catalogue order: \
         run DHV_CONFORM_UPDATE_IDS=1 cargo test --lib catalogue, and commit the file"
    );
}

/// The operation a failed call is judged against was parsed from the id's
/// words before it was data on the check: each check's `subject` is what
/// that reading gave, so moving it changed no verdict.
#[test]
fn every_subject_is_what_the_ids_words_gave() {
    fn from_the_id(check: &str) -> Option<Operation> {
        let (group, name) = check.split_once('.')?;
        match group {
            "fingerprint" => Some(Operation::Fingerprint),
            "create" | "input" | "failure" => Some(Operation::Create),
            "delete" => Some(Operation::Delete),
            "concurrency" | "lifecycle" if name.contains("delete") => Some(Operation::Delete),
            "concurrency" | "lifecycle" => Some(Operation::Create),
            _ => None,
        }
    }
    for c in CATALOGUE {
        assert_eq!(c.subject, from_the_id(c.id), "{}", c.id);
        let asker = c.asker();
        assert_eq!((asker.id, asker.subject), (c.id, c.subject));
        // A concurrency check keeps a call that failed in company: that is
        // its question.
        assert_eq!(asker.repeats, c.group() != "concurrency", "{}", c.id);
    }
    let owners = crate::conformance::checks::PROBE_OWNERS;
    let ids = [
        owners.fingerprint,
        owners.create,
        owners.delete,
        owners.again,
        owners.distinct,
        owners.timing,
    ]
    .map(|a| a.id);
    assert_eq!(
        ids,
        [
            "fingerprint.runs",
            "create.succeeds",
            "delete.succeeds",
            "create.idempotent",
            "create.distinct",
            "timing.margin"
        ]
    );
}
