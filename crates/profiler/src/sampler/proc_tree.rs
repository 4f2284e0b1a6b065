//! The command's process tree, read from `/proc` (Linux). Elsewhere only the root is known.

use std::collections::{BTreeMap, BTreeSet};

/// Parent pid from the text of `/proc/PID/stat` (the field after the `(comm)` that may hold
/// spaces and parentheses).
pub fn parent_from_stat(stat: &str) -> Option<u32> {
    stat_fields(stat).map(|(ppid, _)| ppid)
}

/// Parent pid and process group (fields 4 and 5) from the text of `/proc/PID/stat`.
pub fn stat_fields(stat: &str) -> Option<(u32, u32)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut it = after.split_whitespace();
    let _state = it.next()?;
    let ppid = it.next()?.parse().ok()?;
    let pgrp = it.next()?.parse().ok()?;
    Some((ppid, pgrp))
}

/// `root` and every live descendant of it.
pub fn descendants(root: u32) -> BTreeSet<u32> {
    tree(root, None)
}

/// The command's processes: `root`, every live process of the process group `pgid` (the
/// group `profile run` starts the command in, which keeps a double-forked worker that init
/// adopted), and every live descendant of either.
pub fn command_tree(root: u32, pgid: u32) -> BTreeSet<u32> {
    tree(root, Some(pgid))
}

fn tree(root: u32, pgid: Option<u32>) -> BTreeSet<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut out = BTreeSet::from([root]);
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            // A process may exit between listing and reading: skip it.
            if let Some((ppid, pgrp)) =
                std::fs::read_to_string(e.path().join("stat")).ok().as_deref().and_then(stat_fields)
            {
                children.entry(ppid).or_default().push(pid);
                if Some(pgrp) == pgid {
                    out.insert(pid);
                }
            }
        }
    }
    let mut stack: Vec<u32> = out.iter().copied().collect();
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if out.insert(c) {
                stack.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        assert_eq!(parent_from_stat("1234 (my (odd) prog) S 77 1234 1234 0 -1"), Some(77));
        assert_eq!(parent_from_stat("garbage"), None);
        assert_eq!(parent_from_stat("1 (x) S"), None);
        assert_eq!(stat_fields("1234 (my (odd) prog) S 77 1200 1234 0 -1"), Some((77, 1200)));
        assert_eq!(stat_fields("1 (x) S 1"), None);
    }

    #[test]
    fn finds_a_grandchild_of_a_real_child() {
        // sh starts `sleep` in the background and waits: the sleep is sh's child.
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 1 & wait"]).spawn().unwrap();
        let root = child.id();
        let mut found = BTreeSet::new();
        for _ in 0..100 {
            found = descendants(root);
            if found.len() >= 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.wait().unwrap();
        assert!(found.contains(&root));
        assert!(found.len() >= 2, "the background sleep was not found: {found:?}");
    }
}
