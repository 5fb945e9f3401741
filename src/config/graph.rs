//! The `dependsOn` graph of a policy's applications: cycles and order, by name (pure).
//! What a dependency must be before its dependents sync is [`crate::plan::depends`].

use std::collections::{BTreeMap, BTreeSet};

/// The first cycle of the graph `deps` (application → the applications it depends on),
/// as the names along it with the first repeated at the end (`["a", "b", "a"]`); `None`
/// when there is none. Names that are not keys have no dependencies. Deterministic: the
/// search starts from the names in order.
pub fn cycle(deps: &BTreeMap<&str, Vec<&str>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'a>(
        n: &'a str,
        deps: &BTreeMap<&'a str, Vec<&'a str>>,
        marks: &mut BTreeMap<&'a str, Mark>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match marks.get(n) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|p| *p == n).unwrap_or(0);
                let mut c: Vec<String> = path[from..].iter().map(|s| (*s).to_string()).collect();
                c.push(n.to_string());
                return Some(c);
            }
            None => {}
        }
        marks.insert(n, Mark::Open);
        path.push(n);
        for d in deps.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, deps, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(n, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for n in deps.keys() {
        if let Some(c) = visit(n, deps, &mut marks, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

/// The applications of `deps` in an order where each comes after its dependencies
/// (ties by name), or the cycle ([`cycle`]) that makes one impossible.
///
/// # Errors
/// The cycle, as [`cycle`] names it.
pub fn order<'a>(deps: &BTreeMap<&'a str, Vec<&'a str>>) -> Result<Vec<&'a str>, Vec<String>> {
    if let Some(c) = cycle(deps) {
        return Err(c);
    }
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    let all: BTreeSet<&str> = deps.keys().copied().chain(deps.values().flatten().copied()).collect();
    while out.len() < all.len() {
        for n in &all {
            let ready = deps.get(n).into_iter().flatten().all(|d| done.contains(d));
            if !done.contains(n) && ready {
                done.insert(n);
                out.push(*n);
            }
        }
    }
    Ok(out)
}
