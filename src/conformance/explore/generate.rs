//! Random histories, drawn from a seed, and the candidates a failing one
//! is shrunk through.
//!
//! Why not proptest's state-machine testing: its runner owns the loop (it
//! plays a generated sequence through a synchronous `apply`, and shrinks by
//! calling it again), while a history here is played by async calls in a
//! sandboxed node of the engine's run, each candidate on a fresh node, under
//! a time budget and the run's interrupts. A small seeded generator
//! (splitmix64) and a delta-debugging shrinker over plain lists keep every
//! history a pure function of the seed, printable, storable and replayable.

use std::collections::BTreeMap;

use super::history::{Capacity, Op, Params, Task, normalise};

/// splitmix64: small, fast, and the same sequence on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 for `n` 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The names a history starts from: short, alike, long, non-ASCII.
const BASES: &[&str] = &["data", "db", "Data", "data-1", "cache", "dätä", "日志"];

/// Punctuation that a plugin's sanitiser may map alike.
const PUNCT: &[&str] = &["-", "_", ".", " "];

/// The most letters (volumes) one history makes.
const MAX_VOLUMES: usize = 6;

/// The abstract node a history is generated over.
#[derive(Default)]
struct Sketch {
    live: BTreeMap<char, String>,
    deleted: Vec<char>,
    names: Vec<String>,
    next: u8,
}

/// A history of `len` operations (about; invalid draws are dropped), drawn
/// from `rng`.
pub fn history(rng: &mut Rng, len: usize) -> Vec<Op> {
    let mut s = Sketch::default();
    let mut ops = Vec::new();
    // One history in three on a node whose volumes dir is a link.
    if rng.chance(33) {
        ops.push(Op::LinkVolumesDir);
    }
    while ops.len() < len {
        let op = draw(rng, &mut s);
        if let Some(op) = op {
            apply(&mut s, &op);
            ops.push(op);
        }
    }
    normalise(&ops)
}

fn draw(rng: &mut Rng, s: &mut Sketch) -> Option<Op> {
    let live: Vec<char> = s.live.keys().copied().collect();
    let roll = rng.below(100);
    if live.is_empty() || roll < 28 {
        if usize::from(s.next) >= MAX_VOLUMES {
            return None;
        }
        let name = name(rng, s);
        let vol = char::from(b'A' + s.next);
        return Some(Op::Create { vol, name });
    }
    let vol = *rng.pick(&live);
    Some(match roll {
        28..=47 => Op::Write {
            vol,
            what: task(rng, vol, &live),
        },
        48..=63 => Op::Update {
            vol,
            name: rng.chance(60).then(|| name(rng, s)),
            capacity: match rng.below(3) {
                0 => Some(Capacity::Up),
                1 => Some(Capacity::Down),
                _ => None,
            },
            parameters: match rng.below(5) {
                0 => Some(Params::Extra),
                1 => Some(Params::Null),
                _ => None,
            },
        },
        64..=79 => Op::Delete { vol },
        80..=85 if !s.deleted.is_empty() => Op::DeleteAgain {
            vol: *rng.pick(&s.deleted),
        },
        80..=92 => Op::Restore,
        _ => Op::Fingerprint,
    })
}

fn task(rng: &mut Rng, vol: char, live: &[char]) -> Task {
    let others: Vec<char> = live.iter().copied().filter(|v| *v != vol).collect();
    match rng.below(6) {
        0 => Task::File { mode: None },
        1 => Task::Subdir,
        2 => Task::File {
            mode: Some(*rng.pick(&[0o600, 0o640, 0o444, 0o755])),
        },
        3 | 4 if !others.is_empty() => Task::Link {
            to: *rng.pick(&others),
        },
        _ => Task::LinkOutside,
    }
}

/// A name drawn to collide with the names so far: another case, other
/// punctuation, a prefix or an extension, a deleted volume's name again,
/// or a new base (long or non-ASCII at times). Never a live volume's name
/// (Nomad refuses two volumes of one name on a node).
fn name(rng: &mut Rng, s: &Sketch) -> String {
    for _ in 0..8 {
        let candidate = match (s.names.is_empty(), rng.below(8)) {
            (true, _) | (_, 0) => base(rng),
            (false, 1) => flip_case(&rng.pick(&s.names).clone()),
            (false, 2) => {
                let n = rng.pick(&s.names).clone();
                swap_punct(rng, &n)
            }
            (false, 3) => {
                let n: Vec<char> = rng.pick(&s.names).chars().collect();
                n[..n.len().div_ceil(2).max(1)].iter().collect()
            }
            (false, 4) => {
                let n = rng.pick(&s.names).clone();
                format!("{n}{}{}", rng.pick(PUNCT), rng.below(3))
            }
            (false, 5) => format!("{}{}", rng.pick(&s.names), rng.below(3)),
            (false, _) => rng.pick(&s.names).clone(),
        };
        let candidate = candidate.trim().to_string();
        if !candidate.is_empty() && !s.live.values().any(|n| *n == candidate) {
            return candidate;
        }
    }
    format!("v{}", s.next)
}

fn base(rng: &mut Rng) -> String {
    match rng.below(10) {
        0 => "long".repeat(30),
        1 => "ü".repeat(40),
        _ => (*rng.pick(BASES)).to_string(),
    }
}

fn flip_case(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_uppercase() {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                c.to_uppercase().next().unwrap_or(c)
            }
        })
        .collect()
}

fn swap_punct(rng: &mut Rng, name: &str) -> String {
    let to = rng.pick(PUNCT);
    let swapped: String = name
        .chars()
        .map(|c| {
            if "-_. ".contains(c) {
                to.to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    if swapped == name {
        format!("{name}{to}1")
    } else {
        swapped
    }
}

fn apply(s: &mut Sketch, op: &Op) {
    match op {
        Op::Create { vol, name } => {
            s.next += 1;
            s.live.insert(*vol, name.clone());
            s.names.push(name.clone());
        }
        Op::Update {
            vol,
            name: Some(name),
            ..
        } => {
            s.live.insert(*vol, name.clone());
            s.names.push(name.clone());
        }
        Op::Delete { vol } => {
            s.live.remove(vol);
            s.deleted.push(*vol);
        }
        _ => {}
    }
}

/// The candidates a failing history `ops` is shrunk through, simplest
/// first: chunks of operations dropped (halves, then smaller), then each
/// operation simplified (an update's fields one at a time, a name made
/// ASCII or shorter, a mode dropped). Each is normalised, and shorter or
/// simpler than `ops`.
pub fn candidates(ops: &[Op]) -> Vec<Vec<Op>> {
    let mut out = Vec::new();
    let mut size = ops.len() / 2;
    while size >= 1 {
        for start in (0..ops.len()).step_by(size) {
            let mut c = ops.to_vec();
            c.drain(start..(start + size).min(ops.len()));
            let c = normalise(&c);
            if c.len() < ops.len() && !out.contains(&c) {
                out.push(c);
            }
        }
        size /= 2;
    }
    for (i, op) in ops.iter().enumerate() {
        for simpler in simpler(op) {
            let mut c = ops.to_vec();
            c[i] = simpler;
            let c = normalise(&c);
            if c != ops && !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

fn simpler(op: &Op) -> Vec<Op> {
    let mut out = Vec::new();
    match op {
        Op::Create { vol, name } => {
            for n in simpler_names(name) {
                out.push(Op::Create { vol: *vol, name: n });
            }
        }
        Op::Update {
            vol,
            name,
            capacity,
            parameters,
        } => {
            let with = |name: Option<String>, capacity, parameters| Op::Update {
                vol: *vol,
                name,
                capacity,
                parameters,
            };
            if name.is_some() {
                out.push(with(None, *capacity, *parameters));
            }
            if capacity.is_some() {
                out.push(with(name.clone(), None, *parameters));
            }
            if parameters.is_some() {
                out.push(with(name.clone(), *capacity, None));
            }
            for n in name.iter().flat_map(|n| simpler_names(n)) {
                out.push(with(Some(n), *capacity, *parameters));
            }
        }
        Op::Write {
            vol,
            what: Task::File { mode: Some(_) },
        } => out.push(Op::Write {
            vol: *vol,
            what: Task::File { mode: None },
        }),
        _ => {}
    }
    out
}

/// Simpler names than `name`: its ASCII letters alone, its first 8 chars.
fn simpler_names(name: &str) -> Vec<String> {
    let ascii: String = name.chars().filter(char::is_ascii).collect();
    let short: String = name.chars().take(8).collect();
    [ascii, short]
        .into_iter()
        .filter(|n| !n.trim().is_empty() && n.len() < name.len())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_histories() {
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..20).map(|_| history(&mut rng, 8)).collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn histories_are_playable_and_names_collide() {
        let mut rng = Rng::new(7);
        let mut prefixed = false;
        for _ in 0..200 {
            let ops = history(&mut rng, 8);
            assert_eq!(normalise(&ops), ops);
            let names: Vec<&String> = ops
                .iter()
                .filter_map(|o| match o {
                    Op::Create { name, .. } => Some(name),
                    _ => None,
                })
                .collect();
            prefixed |= names
                .iter()
                .any(|a| names.iter().any(|b| a != b && b.starts_with(a.as_str())));
        }
        assert!(prefixed, "no history drew a name that prefixes another");
    }

    #[test]
    fn candidates_are_smaller_or_simpler() {
        let ops = vec![
            Op::Create {
                vol: 'A',
                name: "dätä-long".into(),
            },
            Op::Update {
                vol: 'A',
                name: Some("x".into()),
                capacity: Some(Capacity::Up),
                parameters: None,
            },
            Op::Delete { vol: 'A' },
        ];
        let cands = candidates(&ops);
        assert!(cands.iter().all(|c| *c != ops));
        assert!(
            cands
                .iter()
                .any(|c| c.len() == 2 && matches!(c[1], Op::Delete { .. }))
        );
        assert!(cands.iter().any(|c| matches!(
            c.first(),
            Some(Op::Create { name, .. }) if name == "dt-long"
        )));
    }
}
