//! Records the git commit the experiment runner is built from (`DQNGPU_COMMIT`, `-dirty` when
//! tracked files differ from it), so that a results directory names the code that made it.
//! Nothing is recorded where git or the repository is missing (a source archive).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    // Run again when the commit or the sources change: a commit moves HEAD's branch and
    // rewrites the index; an edit anywhere in the workspace's crates makes the build dirty.
    println!("cargo:rerun-if-changed=../../crates");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{branch}");
        }
    }
    if let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) {
        let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        println!("cargo:rustc-env=DQNGPU_COMMIT={commit}{}", if dirty { "-dirty" } else { "" });
    }
}
