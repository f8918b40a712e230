//! The canaries the `input.*` checks plant around (not in) the volumes dir,
//! shared by input.rs and input_space.rs: a hostile name or path that makes
//! or removes anything there is seen.

use std::path::{Path, PathBuf};

use crate::conformance::context::{Ctx, listing};
use crate::conformance::host::Host;

/// Canary files planted around (not in) the volumes dir, and what else is there.
pub(super) struct Surroundings {
    pub(super) root: PathBuf,
    pub(super) canaries: Vec<PathBuf>,
}

impl Surroundings {
    /// The check's dir holds the volumes dir; canaries go beside it, in the
    /// check's dir, and in a sibling dir that a traversal would reach.
    pub(super) fn plant(ctx: &Ctx) -> std::io::Result<Surroundings> {
        let sibling = ctx.dirs().make_dirs(Path::new("sibling"))?;
        let canaries = vec![
            ctx.dirs()
                .plant(ctx.dirs().dir(), "canary-beside-volumes")?,
            ctx.dirs().plant(&sibling, "canary-in-sibling")?,
        ];
        Ok(Surroundings {
            root: ctx.dirs().dir().to_path_buf(),
            canaries,
        })
    }

    /// Everything below the check's dir, outside the volumes dir.
    pub(super) fn outside(
        &self,
        host: &dyn Host,
        volumes: &Path,
    ) -> std::collections::BTreeSet<String> {
        let rel = volumes
            .strip_prefix(&self.root)
            .unwrap_or(volumes)
            .to_string_lossy()
            .into_owned();
        listing(host, &self.root)
            .into_iter()
            .filter(|p| p != &rel && !p.starts_with(&format!("{rel}/")))
            .collect()
    }
}
