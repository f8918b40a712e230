//! A history as `explore` generates, plays, shrinks and stores it: a list
//! of operations ([`Op`]) on volumes known by a letter, and what playing
//! each one did ([`Step`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// One operation of a history. Volumes are known by a letter (`A`, `B`, …)
/// given at their create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Op {
    /// Creates the new volume `vol`, named `name`.
    Create {
        /// Its letter.
        vol: char,
        /// `DHV_VOLUME_NAME`.
        name: String,
    },
    /// Creates the live volume `vol` again (an update), with the fields
    /// given changed from its last accepted request.
    Update {
        /// Its letter.
        vol: char,
        /// Another name, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Capacity up or down, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capacity: Option<Capacity>,
        /// Other parameters, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parameters: Option<Params>,
    },
    /// Deletes the live volume `vol`.
    Delete {
        /// Its letter.
        vol: char,
    },
    /// Deletes the deleted volume `vol` again (Nomad retries a delete).
    DeleteAgain {
        /// Its letter.
        vol: char,
    },
    /// Creates again every live volume with its last accepted request, as
    /// an agent does at start.
    Restore,
    /// Fingerprints the plugin: the answer must be the fresh node's.
    Fingerprint,
    /// From here on the node's volumes dir is reached through a symbolic
    /// link to it (a host volumes dir linked to a larger disk): every new
    /// volume's `DHV_VOLUMES_DIR` is the link. First in a history, or not
    /// at all.
    LinkVolumesDir,
    /// A task writes into the live volume `vol`.
    Write {
        /// Its letter.
        vol: char,
        /// What it writes.
        what: Task,
    },
}

/// A change of capacity in an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capacity {
    /// Min and max doubled.
    Up,
    /// Min and max halved.
    Down,
}

/// A change of parameters in an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Params {
    /// One key more (`explore` = `1`).
    Extra,
    /// No parameters block (`null`).
    Null,
}

/// What a task writes into a volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Task {
    /// A new file with content of its own, with `mode` when given.
    File {
        /// Its mode, if the task sets one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<u32>,
    },
    /// A new subdirectory with a file in it.
    Subdir,
    /// A link into another live volume (to its first file, or to the volume).
    Link {
        /// The volume it points into.
        to: char,
    },
    /// A link to a file of the harness's outside the volumes dir.
    LinkOutside,
}

impl Op {
    /// The volume the operation is about, if one.
    pub fn vol(&self) -> Option<char> {
        match self {
            Op::Create { vol, .. }
            | Op::Update { vol, .. }
            | Op::Delete { vol }
            | Op::DeleteAgain { vol }
            | Op::Write { vol, .. } => Some(*vol),
            Op::Restore | Op::Fingerprint | Op::LinkVolumesDir => None,
        }
    }

    /// The operation in a history's words.
    pub fn words(&self) -> String {
        match self {
            Op::Create { vol, name } => format!("create {vol} {name:?}"),
            Op::Update {
                vol,
                name,
                capacity,
                parameters,
            } => {
                let mut changed = Vec::new();
                if let Some(name) = name {
                    changed.push(format!("name {name:?}"));
                }
                match capacity {
                    Some(Capacity::Up) => changed.push("capacity doubled".into()),
                    Some(Capacity::Down) => changed.push("capacity halved".into()),
                    None => {}
                }
                match parameters {
                    Some(Params::Extra) => changed.push("parameter explore=1 added".into()),
                    Some(Params::Null) => changed.push("parameters null".into()),
                    None => {}
                }
                if changed.is_empty() {
                    changed.push("the same request".into());
                }
                format!("create {vol} again (update): {}", changed.join(", "))
            }
            Op::Delete { vol } => format!("delete {vol}"),
            Op::DeleteAgain { vol } => format!("delete {vol} again (already deleted)"),
            Op::Restore => "restore: create again every live volume as at agent start".into(),
            Op::Fingerprint => "fingerprint".into(),
            Op::LinkVolumesDir => {
                "the volumes dir is reached through a symbolic link from here on".into()
            }
            Op::Write { vol, what } => match what {
                Task::File { mode: Some(m) } => {
                    format!("a task writes a file with mode {m:04o} into {vol}")
                }
                Task::File { mode: None } => format!("a task writes a file into {vol}"),
                Task::Subdir => format!("a task makes a subdirectory with a file in {vol}"),
                Task::Link { to } => format!("a task leaves a link in {vol} pointing into {to}"),
                Task::LinkOutside => format!(
                    "a task leaves a link in {vol} pointing at a file outside the volumes dir"
                ),
            },
        }
    }
}

/// The operations of `ops` that make sense in order (a delete of a live
/// volume, a create of a new one with a name no live volume has, …); the
/// others are dropped. Shrinking leaves operations whose volume is gone:
/// this is how a candidate is made playable.
pub fn normalise(ops: &[Op]) -> Vec<Op> {
    let mut live: BTreeMap<char, String> = BTreeMap::new();
    let mut made = BTreeSet::new();
    let mut deleted = BTreeSet::new();
    let mut kept = Vec::new();
    for op in ops {
        let name_free = |live: &BTreeMap<char, String>, vol: char, name: &str| {
            !name.is_empty() && !live.iter().any(|(v, n)| *v != vol && n == name)
        };
        let ok = match op {
            Op::Create { vol, name } => {
                let ok = !made.contains(vol) && name_free(&live, *vol, name);
                if ok {
                    made.insert(*vol);
                    live.insert(*vol, name.clone());
                }
                ok
            }
            Op::Update { vol, name, .. } => {
                let ok = live.contains_key(vol)
                    && name.as_deref().is_none_or(|n| name_free(&live, *vol, n));
                if let (true, Some(name)) = (ok, name) {
                    live.insert(*vol, name.clone());
                }
                ok
            }
            Op::Delete { vol } => {
                let ok = live.remove(vol).is_some();
                if ok {
                    deleted.insert(*vol);
                }
                ok
            }
            Op::DeleteAgain { vol } => deleted.contains(vol),
            Op::Write { vol, what } => {
                live.contains_key(vol)
                    && match what {
                        Task::Link { to } => to != vol && live.contains_key(to),
                        _ => true,
                    }
            }
            Op::Restore | Op::Fingerprint => true,
            // Before any volume is made: every volume of the history then
            // lives behind the link.
            Op::LinkVolumesDir => kept.is_empty(),
        };
        if ok {
            kept.push(op.clone());
        }
    }
    kept
}

/// What playing one operation did, and what the oracle saw after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// The operation.
    #[serde(flatten)]
    pub op: Op,
    /// What it did, in words (`ok: path …`, `refused: …`, `skipped: …`).
    pub did: String,
    /// The plugin calls it made: each one's `env -i` line.
    #[serde(default)]
    pub calls: Vec<String>,
    /// What the oracle saw wrong after it, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_drops_what_refers_to_no_live_volume() {
        let ops = vec![
            Op::Delete { vol: 'A' },
            Op::Create {
                vol: 'A',
                name: "a".into(),
            },
            Op::Create {
                vol: 'B',
                name: "a".into(),
            },
            Op::DeleteAgain { vol: 'A' },
            Op::Delete { vol: 'A' },
            Op::DeleteAgain { vol: 'A' },
            Op::Write {
                vol: 'A',
                what: Task::LinkOutside,
            },
        ];
        let kept = normalise(&ops);
        assert_eq!(
            kept,
            vec![
                ops[1].clone(),
                Op::Delete { vol: 'A' },
                Op::DeleteAgain { vol: 'A' }
            ]
        );
    }

    #[test]
    fn a_step_round_trips_through_json() {
        let step = Step {
            op: Op::Update {
                vol: 'B',
                name: Some("x".into()),
                capacity: Some(Capacity::Down),
                parameters: None,
            },
            did: "ok".into(),
            calls: vec!["env -i DHV_OPERATION=create x".into()],
            oracle: Some("volume A lost its path".into()),
        };
        let text = serde_json::to_string(&step).unwrap();
        assert!(text.contains("\"op\":\"update\""), "{text}");
        assert_eq!(serde_json::from_str::<Step>(&text).unwrap(), step);
    }
}
