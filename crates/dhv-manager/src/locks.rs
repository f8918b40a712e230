//! The per-name lock: a volume name belongs to one volume id on a node.
//!
//! Nomad keeps one in-memory map from name to id for the agent's whole life. We
//! split it in two so that it stays right when several processes share a state
//! dir: names of saved volumes are held by the state file itself (read fresh on
//! every call, and checked again under the file lock when saving), and this map
//! holds only the names of operations *in flight* in this process, which are in
//! no file yet. A name is taken when either holds it under another id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Names reserved by operations running in this process.
#[derive(Debug, Default)]
pub struct NameLocks {
    /// name → (id, number of operations on that id holding it)
    held: Mutex<HashMap<String, (String, usize)>>,
}

/// A reservation of a name for an id; released when dropped, so a failed or
/// cancelled operation never keeps a name.
#[derive(Debug)]
pub struct NameReservation {
    locks: Arc<NameLocks>,
    name: String,
}

impl NameLocks {
    /// Reserves `name` for `id`. Operations on the same id share the name (an
    /// update racing a restore); another id gets the id that holds it.
    pub fn reserve(self: &Arc<Self>, name: &str, id: &str) -> Result<NameReservation, String> {
        let mut held = dhv_host::sync::lock(&self.held);
        match held.get_mut(name) {
            Some((holder, _)) if holder != id => return Err(holder.clone()),
            Some((_, count)) => *count += 1,
            None => {
                held.insert(name.to_string(), (id.to_string(), 1));
            }
        }
        Ok(NameReservation {
            locks: Arc::clone(self),
            name: name.to_string(),
        })
    }

    /// The id that holds `name` in this process, if any.
    #[cfg(test)]
    pub fn holder(&self, name: &str) -> Option<String> {
        let held = dhv_host::sync::lock(&self.held);
        held.get(name).map(|(id, _)| id.clone())
    }
}

impl Drop for NameReservation {
    fn drop(&mut self) {
        let mut held = dhv_host::sync::lock(&self.locks.held);
        if let Some((_, count)) = held.get_mut(&self.name) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_shared_by_one_id_and_freed_by_the_last_holder() {
        let locks = Arc::new(NameLocks::default());
        let a1 = locks.reserve("n", "a").unwrap();
        let a2 = locks.reserve("n", "a").unwrap();
        assert_eq!(locks.reserve("n", "b").unwrap_err(), "a");
        drop(a1);
        assert_eq!(locks.reserve("n", "b").unwrap_err(), "a");
        drop(a2);
        assert_eq!(locks.holder("n"), None);
        let _b = locks.reserve("n", "b").unwrap();
        assert_eq!(locks.holder("n").as_deref(), Some("b"));
    }
}
