//! Reading a snapshot's text back: its header, its check blocks, and which form
//! it is in. Both sides of a comparison are read so, the stored file and the run.

use super::{CONTINUATION, HARNESS_KEY, PASSED_KEY, SCHEMA_KEY, UNPINNED};

/// A snapshot's text, cut into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Parsed<'a> {
    /// The header's lines, up to the first blank line.
    pub header: Vec<&'a str>,
    /// Where the checks start in the text (after the header's blank line).
    pub body_start: usize,
    /// One block per check: its line and the indented lines below it, keyed by
    /// its id (a stray line that is no check keys itself by its first word).
    pub blocks: Vec<Block<'a>>,
}

/// One check's lines in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Block<'a> {
    /// The check's id: the first word of its line.
    pub id: &'a str,
    /// The lines, each with its line end (the last may lack one).
    pub text: &'a str,
}

impl<'a> Block<'a> {
    /// Whether the check is shown as not pinned (`<id> <level> [not pinned: …]`):
    /// a measurement near its bound, which the host's load can move across it.
    pub fn unpinned(&self) -> bool {
        let line = self.text.lines().next().unwrap_or_default();
        line.splitn(3, ' ')
            .nth(2)
            .is_some_and(|rest| rest.starts_with(UNPINNED))
    }

    /// The status word (`fail`, `pass`, `[VARIES]`, …), when the line has one.
    pub fn status(&self) -> Option<&'a str> {
        if self.unpinned() {
            return None;
        }
        self.words().nth(2).map(|w| w.trim_end_matches(':'))
    }

    /// The text without its line end, for comparing.
    pub fn trimmed(&self) -> &'a str {
        self.text.trim_end()
    }

    fn words(&self) -> impl Iterator<Item = &'a str> {
        self.text
            .lines()
            .next()
            .unwrap_or_default()
            .split(' ')
            .filter(|w| !w.is_empty())
    }
}

impl<'a> Parsed<'a> {
    /// Cuts `text` (line ends `\n`) into its header and blocks. The header is
    /// there when the text starts with the schema line, and runs to the first
    /// blank line (or the end: a snapshot that lists no check, its trailing
    /// blank line trimmed as insta stores it); a text without it is all checks
    /// (a unit test's fragment, or a hand-edited file).
    pub fn of(text: &'a str) -> Parsed<'a> {
        let (header, body_start) = if text.starts_with(SCHEMA_KEY) {
            match text.find("\n\n") {
                Some(i) => (&text[..i], i + 2),
                None => (text, text.len()),
            }
        } else {
            ("", 0)
        };
        Parsed {
            header: header.lines().collect(),
            body_start,
            blocks: blocks(&text[body_start..]),
        }
    }

    /// Whether this is the current form: its header counts the checks that passed.
    pub fn is_current(&self) -> bool {
        self.header.iter().any(|l| l.starts_with(PASSED_KEY))
    }

    /// The header without the lines that say nothing of the plugin's results:
    /// the harness that wrote it and the count of checks that passed.
    pub fn results_header(&self) -> Vec<&'a str> {
        self.header
            .iter()
            .copied()
            .filter(|l| !l.starts_with(HARNESS_KEY) && !l.starts_with(PASSED_KEY))
            .collect()
    }

    /// The block of check `id`, if the text lists it.
    pub fn block(&self, id: &str) -> Option<&Block<'a>> {
        self.blocks.iter().find(|b| b.id == id)
    }
}

/// The body cut into blocks: each line that does not start with the
/// continuation indent, with the indented (or blank) lines below it.
fn blocks(body: &str) -> Vec<Block<'_>> {
    let mut blocks = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in body.split_inclusive('\n') {
        let continues = line.starts_with(CONTINUATION) || line.trim_end().is_empty();
        if at > start && !continues {
            blocks.push(&body[start..at]);
            start = at;
        }
        at += line.len();
    }
    if at > start {
        blocks.push(&body[start..at]);
    }
    blocks
        .into_iter()
        .map(|text| Block {
            id: text.split([' ', '\n']).next().unwrap_or_default(),
            text,
        })
        .collect()
}

/// The harness named in a snapshot's header (`dhv-conform 0.1.0`), if any.
pub fn harness_of(snapshot: &str) -> Option<&str> {
    snapshot
        .lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix(HARNESS_KEY))
}
