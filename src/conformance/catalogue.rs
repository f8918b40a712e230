//! The check catalogue: every check of docs/checks.md, in order, gathered from
//! the definitions in `checks/` (each check is one [`CheckSpec`] constant next
//! to its function, and each group lists its own in order). Nothing about a
//! check is written here: the order of the groups is.
//!
//! The ids are a public interface (filters, reports, snapshots, people's CI
//! configs): never rename one; retire it instead. `catalogue_ids.txt` holds every
//! id ever published; a test regenerates it and refuses one that disappears.

use super::checks;
pub use super::checks::CheckSpec;

/// The groups, in catalogue order; each lists its checks in order.
const GROUPS: &[&[CheckSpec]] = &[
    checks::fingerprint::CHECKS,
    checks::create::CHECKS,
    checks::delete::CHECKS,
    checks::lifecycle::CHECKS,
    checks::history::CHECKS,
    checks::concurrency::CHECKS,
    checks::failure::CHECKS,
    checks::process::CHECKS,
    checks::input::CHECKS,
    checks::volume::CHECKS,
    checks::timing::CHECKS,
];

/// How many checks the groups hold.
const COUNT: usize = {
    let (mut n, mut g) = (0, 0);
    while g < GROUPS.len() {
        n += GROUPS[g].len();
        g += 1;
    }
    n
};

/// The groups' checks, one after the other.
const fn concatenated() -> [CheckSpec; COUNT] {
    let mut all = [GROUPS[0][0]; COUNT];
    let (mut g, mut n) = (0, 0);
    while g < GROUPS.len() {
        let mut i = 0;
        while i < GROUPS[g].len() {
            all[n] = GROUPS[g][i];
            n += 1;
            i += 1;
        }
        g += 1;
    }
    all
}

/// Every check, in catalogue order.
pub const CATALOGUE: &[CheckSpec] = &concatenated();

/// Looks a check up by id.
pub fn find(id: &str) -> Option<&'static CheckSpec> {
    CATALOGUE.iter().find(|c| c.id == id)
}

#[cfg(test)]
#[path = "catalogue_tests.rs"]
mod tests;
