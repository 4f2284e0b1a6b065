//! Errors for bad input: each names the file, line and field where it can.

use std::fmt;
use std::path::PathBuf;

/// Where in an input something is wrong.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Location {
    /// The file, when the input came from one.
    pub path: Option<PathBuf>,
    /// 1-based line number, when known.
    pub line: Option<u64>,
    /// The column or field name, when known.
    pub field: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(p) = &self.path {
            parts.push(p.display().to_string());
        }
        if let Some(l) = self.line {
            parts.push(format!("line {l}"));
        }
        if let Some(fl) = &self.field {
            parts.push(format!("field `{fl}`"));
        }
        if parts.is_empty() {
            write!(f, "<input>")
        } else {
            write!(f, "{}", parts.join(", "))
        }
    }
}

/// Errors of the model crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The input is malformed; `at` says where.
    #[error("{at}: {message}")]
    Invalid {
        /// Where.
        at: Location,
        /// What is wrong.
        message: String,
    },
    /// A name (app, class, scheduler, GPU model...) is not known.
    #[error("unknown {what} `{}`; valid: {}", shortened(name), valid.join(", "))]
    UnknownName {
        /// What kind of name ("app", "GPU model", ...).
        what: &'static str,
        /// The name given.
        name: String,
        /// The names that would have been accepted.
        valid: Vec<String>,
    },
    /// A name has a known form but a bad part (`generated:x`: the seed is not a number).
    #[error("bad {what} `{}`: {problem}", shortened(name))]
    BadName {
        /// What kind of name ("library", ...).
        what: &'static str,
        /// The name given.
        name: String,
        /// What is wrong with it, and what would be accepted.
        problem: String,
    },
    /// An error of a name given in a file, with where (a cluster file's `nodes[0].model`).
    #[error("{at}: {inner}")]
    At {
        /// Where.
        at: Location,
        /// The error, itself a usage error where it is one.
        inner: Box<ModelError>,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ModelError {
    /// A malformed-input error.
    pub fn invalid(at: Location, message: impl Into<String>) -> Self {
        ModelError::Invalid { at, message: message.into() }
    }

    /// True for errors a user fixes by choosing a valid name (CLI exit code 2).
    pub fn is_usage(&self) -> bool {
        match self {
            ModelError::UnknownName { .. } | ModelError::BadName { .. } => true,
            ModelError::At { inner, .. } => inner.is_usage(),
            _ => false,
        }
    }

    /// This error, said to be at `at` (a name read from a file).
    pub fn at(self, at: Location) -> Self {
        ModelError::At { at, inner: Box::new(self) }
    }

    /// Attaches a path to an error that lacks one.
    pub fn with_path(mut self, p: &std::path::Path) -> Self {
        if let ModelError::Invalid { at, .. } = &mut self {
            if at.path.is_none() {
                at.path = Some(p.to_path_buf());
            }
        }
        self
    }
}

/// Shorthand result.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;

/// The 1-based line of the CSV record (or error) at `pos` in `text`. The csv crate counts a
/// record that follows a CRLF from before the `\n`, one line short (so a file saved on Windows
/// would have every error blamed on the line above): the terminator's rest, and any blank
/// lines, are counted here.
pub fn csv_line(text: &str, pos: &csv::Position) -> u64 {
    let rest = text.as_bytes().get(usize::try_from(pos.byte()).unwrap_or(usize::MAX)..).unwrap_or_default();
    let skipped = rest.iter().take_while(|&&c| matches!(c, b'\r' | b'\n')).filter(|&&c| c == b'\n').count();
    pos.line() + skipped as u64
}

/// [`csv_line`] for a reader that skips `#` comment lines: the csv crate gives a record after
/// a comment the comment's line, so the comments (and blank lines) are counted here too.
pub fn csv_line_past_comments(text: &str, pos: &csv::Position) -> u64 {
    let mut rest = text.as_bytes().get(usize::try_from(pos.byte()).unwrap_or(usize::MAX)..).unwrap_or_default();
    let mut line = pos.line();
    loop {
        match rest.first() {
            Some(b'\n') => line += 1,
            Some(b'\r') => {}
            Some(b'#') => {
                // The comment up to its newline (counted on the next turn).
                let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
                rest = &rest[end..];
                continue;
            }
            _ => return line,
        }
        rest = &rest[1..];
    }
}

/// A number as an error quotes it: as written up to a billion, else in exponent form (`1e300`
/// must not print as 301 digits).
pub fn compact(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-6..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `name` as an error quotes it: whole up to 120 characters, else its start and how long it is
/// (a 50 MB field must not make a 50 MB message).
pub fn shortened(name: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 120;
    match name.char_indices().nth(MAX) {
        None => name.into(),
        Some((cut, _)) => format!("{}... ({} characters)", &name[..cut], name.chars().count()).into(),
    }
}

/// `text` without a leading UTF-8 byte-order mark (Windows editors write one; every reader of
/// text files here skips it).
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Reads a whole file, mapping the error to [`ModelError::Io`]; a file that is not UTF-8 text
/// is an error at the line where the first bad byte is.
pub fn read_file(path: &std::path::Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|source| ModelError::Io { path: path.to_path_buf(), source })?;
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = 1 + good.iter().filter(|&&c| c == b'\n').count() as u64;
        ModelError::invalid(
            Location { path: Some(path.to_path_buf()), line: Some(line), field: None },
            format!("not UTF-8 text (byte {} of the file)", good.len() + 1),
        )
    })
}

/// Removes a file; one that is not there is no error (an earlier run's output that may or may
/// not exist), any other failure is [`ModelError::Io`] naming the path.
pub fn remove_file_if_present(path: &std::path::Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(ModelError::Io { path: path.to_path_buf(), source: e })
        }
        _ => Ok(()),
    }
}

/// Writes a file atomically: a temporary sibling, then a rename, so a crash never leaves half a file.
pub fn write_file_atomic(path: &std::path::Path, contents: &[u8]) -> Result<()> {
    write_files_atomic(&[(path, contents)])
}

/// The temporary sibling a file is written to before its rename: hidden (a library reader
/// skips it), and unique to the process and the call, so writers racing never share one.
fn temp_sibling(path: &std::path::Path) -> std::path::PathBuf {
    sibling(path, "tmp")
}

/// A hidden sibling `.NAME.KINDPID-K` of `path`, unique to the process and the call.
fn sibling(path: &std::path::Path, kind: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dir.join(format!(".{name}.{kind}{}-{k}", std::process::id()))
}

/// Checks that `path` can be written the way [`write_file_atomic`] and [`write_file_new`]
/// write it, changing nothing: creates its temporary sibling (whose name is longer than
/// `path`'s, so a name too long for the file system fails here) and removes it again. An error
/// names `path`.
pub fn probe_write(path: &std::path::Path) -> Result<()> {
    let tmp = temp_sibling(path);
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
        Ok(f) => {
            drop(f);
            let _ = std::fs::remove_file(&tmp);
            Ok(())
        }
        Err(source) => Err(ModelError::Io { path: path.to_path_buf(), source }),
    }
}

/// Writes a new file whole, never replacing one: a temporary sibling hard-linked to `path`
/// (the link fails when `path` exists, atomically, even against another process). `Ok(false)`
/// when `path` was taken.
pub fn write_file_new(path: &std::path::Path, contents: &[u8]) -> Result<bool> {
    let io = |source| ModelError::Io { path: path.to_path_buf(), source };
    let tmp = temp_sibling(path);
    std::fs::write(&tmp, contents).map_err(io)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io(e)),
    }
}

/// Writes files that belong together (a CSV profile and its sidecar) so that either all are
/// written or none is: every one to a temporary sibling first, then the renames, last file
/// first. Files already there are kept as backups first (a hard link, else a copy), so a
/// failed write or rename removes the temporaries and puts back what was there: the old
/// files where there were some (an old CSV keeps its old sidecar), nothing where there were
/// none.
pub fn write_files_atomic(files: &[(&std::path::Path, &[u8])]) -> Result<()> {
    let temps: Vec<_> = files.iter().map(|(p, _)| temp_sibling(p)).collect();
    let mut backups: Vec<Option<std::path::PathBuf>> = Vec::with_capacity(files.len());
    let drop_all = |temps: &[std::path::PathBuf], backups: &[Option<std::path::PathBuf>]| {
        for t in temps.iter().chain(backups.iter().flatten()) {
            let _ = std::fs::remove_file(t);
        }
    };
    for (path, _) in files {
        if !path.is_file() {
            backups.push(None);
            continue;
        }
        let b = sibling(path, "old");
        if let Err(source) = std::fs::hard_link(path, &b).or_else(|_| std::fs::copy(path, &b).map(|_| ())) {
            drop_all(&[], &backups);
            let _ = std::fs::remove_file(&b);
            return Err(ModelError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    source.kind(),
                    format!("cannot keep a backup of it ({}): {source}", b.display()),
                ),
            });
        }
        backups.push(Some(b));
    }
    for ((path, contents), tmp) in files.iter().zip(&temps) {
        if let Err(source) = std::fs::write(tmp, contents) {
            drop_all(&temps, &backups);
            return Err(ModelError::Io { path: path.to_path_buf(), source });
        }
    }
    let mut renamed: Vec<usize> = Vec::new();
    for (i, ((path, _), tmp)) in files.iter().zip(&temps).enumerate().rev() {
        if let Err(source) = std::fs::rename(tmp, path) {
            // Undo: the old file back where there was one, else the new one removed.
            let mut lost = Vec::new();
            for &j in &renamed {
                let restored = match &backups[j] {
                    Some(b) => std::fs::rename(b, files[j].0),
                    None => std::fs::remove_file(files[j].0),
                };
                if restored.is_err() {
                    lost.push(files[j].0.display().to_string());
                }
            }
            drop_all(&temps, &backups);
            let mut msg = source.to_string();
            if !lost.is_empty() {
                msg.push_str(&format!("; and {} could not be put back as it was", lost.join(", ")));
            }
            return Err(ModelError::Io { path: path.to_path_buf(), source: std::io::Error::new(source.kind(), msg) });
        }
        renamed.push(i);
    }
    drop_all(&[], &backups);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_text_is_refused_at_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.csv");
        std::fs::write(&path, b"id,app\n0,alexnet\n1,\xff\xfe\n").unwrap();
        let e = read_file(&path).unwrap_err().to_string();
        assert!(e.contains("jobs.csv, line 3") && e.contains("not UTF-8") && e.contains("byte 20"), "{e}");
        std::fs::write(&path, "id,app\n").unwrap();
        assert_eq!(read_file(&path).unwrap(), "id,app\n");
    }

    /// The second file's rename fails after the first's (the one renamed first) succeeded:
    /// both old files are there as they were, and no temporary or backup is left.
    #[test]
    fn a_failed_rename_puts_the_old_files_back() {
        let dir = tempfile::tempdir().unwrap();
        let (csv, meta) = (dir.path().join("p.csv"), dir.path().join("p.meta.json"));
        std::fs::write(&meta, "old sidecar").unwrap();
        // A non-empty directory where the CSV goes: a file cannot be renamed over it.
        std::fs::create_dir(&csv).unwrap();
        std::fs::write(csv.join("inside"), "x").unwrap();
        let e = write_files_atomic(&[(&csv, b"new csv"), (&meta, b"new sidecar")]).unwrap_err().to_string();
        assert!(e.contains("p.csv"), "{e}");
        assert_eq!(std::fs::read_to_string(&meta).unwrap(), "old sidecar", "the old sidecar was not kept");
        let mut left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        left.sort();
        assert_eq!(left, ["p.csv", "p.meta.json"], "temporaries or backups left");
        // Where there was nothing, nothing is left.
        std::fs::remove_file(&meta).unwrap();
        assert!(write_files_atomic(&[(&csv, b"new csv"), (&meta, b"new sidecar")]).is_err());
        assert!(!meta.exists());
        // A write that succeeds replaces both and leaves no backup.
        std::fs::remove_dir_all(&csv).unwrap();
        std::fs::write(&csv, "old csv").unwrap();
        std::fs::write(&meta, "old sidecar").unwrap();
        write_files_atomic(&[(&csv, b"new csv"), (&meta, b"new sidecar")]).unwrap();
        assert_eq!(std::fs::read_to_string(&csv).unwrap(), "new csv");
        assert_eq!(std::fs::read_to_string(&meta).unwrap(), "new sidecar");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn numbers_are_quoted_compactly() {
        assert_eq!(compact(1e300), "1e300");
        assert_eq!(compact(150000.0), "150000");
        assert_eq!(compact(0.5), "0.5");
        assert_eq!(compact(-2.5e-9), "-2.5e-9");
        assert_eq!(compact(f64::INFINITY), "inf");
    }

    #[test]
    fn huge_names_are_quoted_by_their_start() {
        let e = ModelError::UnknownName { what: "app", name: "x".repeat(1_000_000), valid: vec!["a".into()] };
        let text = e.to_string();
        assert!(text.len() < 300 && text.contains("(1000000 characters)"), "{}", text.len());
        assert_eq!(shortened("alexnet"), "alexnet");
        // Cut on a character, not inside one.
        assert!(shortened(&"é".repeat(200)).starts_with(&"é".repeat(120)));
    }
}
