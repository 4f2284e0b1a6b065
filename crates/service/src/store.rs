//! The SQLite store (WAL): jobs, attempts, placements, profiles and events.
//!
//! Every state change that must survive a crash is one transaction, so a `kill -9` at any
//! point leaves either the old or the new state. WAL with `synchronous=NORMAL` survives a
//! process crash; only an OS crash can lose the last commits.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use dqngpu_model::{AppProfile, JobId};

use crate::error::ServiceError;
use crate::jobs::{AttemptRecord, AttemptState, JobRecord, JobState, NewJob};

type Result<T, E = ServiceError> = std::result::Result<T, E>;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    app TEXT NOT NULL,
    command TEXT NOT NULL,
    env TEXT NOT NULL,
    input_size_mb REAL,
    params TEXT,
    state TEXT NOT NULL,
    gpu INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    avoid_apps TEXT NOT NULL DEFAULT '[]',
    submitted_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    exit_code INTEGER,
    signal INTEGER,
    error TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    idempotency_key TEXT UNIQUE
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, id);
CREATE TABLE IF NOT EXISTS attempts (
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    n INTEGER NOT NULL,
    gpu INTEGER NOT NULL,
    state TEXT NOT NULL,
    pid INTEGER,
    pid_start INTEGER,
    co_apps TEXT NOT NULL,
    exclusive INTEGER NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    exit_code INTEGER,
    signal INTEGER,
    error TEXT,
    PRIMARY KEY (job_id, n)
);
CREATE INDEX IF NOT EXISTS attempts_by_state ON attempts(state);
CREATE TABLE IF NOT EXISTS placements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    decided_at REAL NOT NULL,
    policy TEXT NOT NULL,
    gpu INTEGER NOT NULL,
    jobs TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS profiles (
    app TEXT PRIMARY KEY,
    profile TEXT NOT NULL,
    source TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    job_id INTEGER,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL
);
";

/// The schema's version, kept in SQLite's `user_version`: a database of a later one (a newer
/// dqngpu wrote it) is refused, not read and written as this one. Version 0 is this schema
/// before it was numbered.
pub const SCHEMA_VERSION: i64 = 1;

const JOB_COLS: &str = "id, app, command, env, input_size_mb, params, state, gpu, attempts, failures, avoid_apps, \
     submitted_at, started_at, finished_at, exit_code, signal, error, cancel_requested";
const ATTEMPT_COLS: &str =
    "job_id, n, gpu, state, pid, pid_start, co_apps, exclusive, started_at, finished_at, exit_code, signal, error";

/// What a cancel request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It was waiting; now it is cancelled.
    Cancelled,
    /// It runs; the cancel is recorded and the process must be stopped.
    StopRunning,
    /// It had already finished in this state.
    AlreadyFinal(JobState),
}

/// How an attempt ended, as the placement loop decided.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptEnd {
    /// Attempt state.
    pub state: AttemptState,
    /// The job's next state (queued for a retry).
    pub job_state: JobState,
    /// Exit code.
    pub exit_code: Option<i32>,
    /// Signal.
    pub signal: Option<i32>,
    /// Why it failed.
    pub error: Option<String>,
    /// Count it against the retry limit.
    pub count_failure: bool,
    /// Apps to add to the job's avoid list.
    pub avoid: Vec<String>,
}

/// The database: a writer connection and a reader connection, each behind a mutex.
/// Statements are short and never span an await; with WAL, reads (the placement loop's
/// queue scans, GETs) never wait for writes (submissions) and the other way round.
pub struct Store {
    conn: Mutex<Connection>,
    reader: Mutex<Connection>,
}

/// One queued job and its `submitted` event, inside `tx`.
fn insert_in(tx: &rusqlite::Transaction<'_>, job: &NewJob, key: Option<&str>, now: f64) -> Result<JobRecord> {
    tx.execute(
        "INSERT INTO jobs (app, command, env, input_size_mb, params, state, submitted_at, idempotency_key) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7)",
        params![job.app, json(&job.command)?, json(&job.env)?, job.input_size_mb, job.params, now, key],
    )?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "INSERT INTO events (at, job_id, kind, detail) VALUES (?1, ?2, 'submitted', ?3)",
        params![now, id, job.app],
    )?;
    Ok(tx.query_row(&format!("SELECT {JOB_COLS} FROM jobs WHERE id = ?1"), [id], job_from_row)?)
}

fn json<T: serde::Serialize>(v: &T) -> Result<String> {
    Ok(serde_json::to_string(v)?)
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> rusqlite::Result<T> {
    serde_json::from_str(s)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.into()))
}

fn job_from_row(r: &Row<'_>) -> rusqlite::Result<JobRecord> {
    let state: String = r.get(6)?;
    Ok(JobRecord {
        id: r.get::<_, i64>(0)? as JobId,
        spec: NewJob {
            app: r.get(1)?,
            command: from_json(&r.get::<_, String>(2)?)?,
            env: from_json(&r.get::<_, String>(3)?)?,
            input_size_mb: r.get(4)?,
            params: r.get(5)?,
        },
        state: JobState::parse(&state).unwrap_or(JobState::Failed),
        gpu: r.get(7)?,
        attempts: r.get(8)?,
        failures: r.get(9)?,
        avoid_apps: from_json(&r.get::<_, String>(10)?)?,
        submitted_at: r.get(11)?,
        started_at: r.get(12)?,
        finished_at: r.get(13)?,
        exit_code: r.get(14)?,
        signal: r.get(15)?,
        error: r.get(16)?,
        cancel_requested: r.get::<_, i64>(17)? != 0,
    })
}

fn attempt_from_row(r: &Row<'_>) -> rusqlite::Result<AttemptRecord> {
    let state: String = r.get(3)?;
    Ok(AttemptRecord {
        job_id: r.get::<_, i64>(0)? as JobId,
        n: r.get(1)?,
        gpu: r.get(2)?,
        state: AttemptState::parse(&state).unwrap_or(AttemptState::Lost),
        pid: r.get(4)?,
        pid_start: r.get::<_, Option<i64>>(5)?.map(|v| v as u64),
        co_apps: from_json(&r.get::<_, String>(6)?)?,
        exclusive: r.get::<_, i64>(7)? != 0,
        started_at: r.get(8)?,
        finished_at: r.get(9)?,
        exit_code: r.get(10)?,
        signal: r.get(11)?,
        error: r.get(12)?,
    })
}

/// Each table of `conn` but SQLite's own, with its columns.
fn tables_of(conn: &Connection) -> rusqlite::Result<Vec<(String, Vec<String>)>> {
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut columns = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    names
        .into_iter()
        .map(|t| {
            let cols = columns.query_map([&t], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
            Ok((t, cols))
        })
        .collect()
}

/// Why the database at `conn` is not one this version may open, if it is not: a later schema
/// version, a table not of this schema, or one of its tables without a column this schema
/// has (read from [`SCHEMA`] itself, made in memory, so the check never drifts from it).
/// A database that cannot be read at all fails as the error it is.
fn check_schema(conn: &Connection) -> Result<(), String> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| e.to_string())?;
    if version > SCHEMA_VERSION {
        return Err(format!(
            "schema version {version}, written by a newer dqngpu; this one reads version {SCHEMA_VERSION} and \
             older: run the dqngpu that wrote it"
        ));
    }
    let ours = Connection::open_in_memory()
        .and_then(|m| {
            m.execute_batch(SCHEMA)?;
            tables_of(&m)
        })
        .map_err(|e| e.to_string())?;
    for (t, have) in tables_of(conn).map_err(|e| e.to_string())? {
        let Some((_, cols)) = ours.iter().find(|(name, _)| *name == t) else {
            return Err(format!("not a dqngpu database: it has a table `{t}` dqngpu never makes"));
        };
        if let Some(missing) = cols.iter().find(|c| !have.contains(c)) {
            return Err(format!("not a dqngpu database: its table `{t}` has no column `{missing}`"));
        }
    }
    Ok(())
}

impl Store {
    /// Opens (creating if needed) the database file and its schema.
    pub fn open(path: &Path) -> Result<Self> {
        // A database that cannot be opened (not SQLite, damaged) is named, and left as it is.
        Self::open_sqlite(path).map_err(|e| match e {
            ServiceError::Db(e) => ServiceError::Config(format!("database {}: {e}", path.display())),
            other => other,
        })
    }

    fn open_sqlite(path: &Path) -> Result<Self> {
        let conn = Connection::open(path)?;
        // Before anything is written: another program's database, or a newer dqngpu's, is
        // refused as it is.
        check_schema(&conn).map_err(|why| ServiceError::Config(format!("database {}: {why}", path.display())))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        let reader = Connection::open(path)?;
        reader.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(Store { conn: Mutex::new(conn), reader: Mutex::new(reader) })
    }

    fn lock(&self) -> Result<MutexGuard<'_, Connection>> {
        self.conn.lock().map_err(|_| ServiceError::Poisoned)
    }

    fn read(&self) -> Result<MutexGuard<'_, Connection>> {
        self.reader.lock().map_err(|_| ServiceError::Poisoned)
    }

    /// Inserts a job; with an idempotency key already used, returns that job instead.
    /// The flag is true when a new job was created.
    pub fn insert_job(&self, job: &NewJob, key: Option<&str>, now: f64) -> Result<(JobRecord, bool)> {
        let mut conn = self.lock()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(k) = key {
            let existing = tx
                .query_row(&format!("SELECT {JOB_COLS} FROM jobs WHERE idempotency_key = ?1"), [k], job_from_row)
                .optional()?;
            if let Some(j) = existing {
                return Ok((j, false));
            }
        }
        let rec = insert_in(&tx, job, key, now)?;
        tx.commit()?;
        Ok((rec, true))
    }

    /// Inserts every job of a batch in one transaction, in order: all or none, so the
    /// scheduler never sees part of a batch.
    pub fn insert_jobs(&self, jobs: &[NewJob], now: f64) -> Result<Vec<JobRecord>> {
        let mut conn = self.lock()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let recs = jobs.iter().map(|j| insert_in(&tx, j, None, now)).collect::<Result<Vec<_>>>()?;
        tx.commit()?;
        Ok(recs)
    }

    /// The job queued under an idempotency key, if any.
    pub fn job_by_key(&self, key: &str) -> Result<Option<JobRecord>> {
        let conn = self.read()?;
        Ok(conn
            .query_row(&format!("SELECT {JOB_COLS} FROM jobs WHERE idempotency_key = ?1"), [key], job_from_row)
            .optional()?)
    }

    /// One job.
    pub fn job(&self, id: JobId) -> Result<Option<JobRecord>> {
        let conn = self.read()?;
        Ok(conn
            .query_row(&format!("SELECT {JOB_COLS} FROM jobs WHERE id = ?1"), [id as i64], job_from_row)
            .optional()?)
    }

    /// Jobs, oldest first, optionally of one state; at most `limit`, from id `after` on.
    pub fn jobs(&self, state: Option<JobState>, after: JobId, limit: usize) -> Result<Vec<JobRecord>> {
        // Ids are SQLite integers (at most i64::MAX): none is greater than a larger `after`,
        // which must not wrap to a negative one and list every job.
        let Ok(after) = i64::try_from(after) else { return Ok(Vec::new()) };
        let conn = self.read()?;
        let lim = limit.min(i64::MAX as usize) as i64;
        let rows = match state {
            Some(s) => {
                let mut st = conn.prepare_cached(&format!(
                    "SELECT {JOB_COLS} FROM jobs WHERE state = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
                ))?;
                let v = st.query_map(params![s.as_str(), after, lim], job_from_row)?.collect::<Result<_, _>>()?;
                v
            }
            None => {
                let mut st =
                    conn.prepare_cached(&format!("SELECT {JOB_COLS} FROM jobs WHERE id > ?1 ORDER BY id LIMIT ?2"))?;
                let v = st.query_map(params![after, lim], job_from_row)?.collect::<Result<_, _>>()?;
                v
            }
        };
        Ok(rows)
    }

    /// The oldest `limit` queued jobs but those of `skip_apps`.
    pub fn queued_except(&self, skip_apps: &[String], limit: usize) -> Result<Vec<JobRecord>> {
        let conn = self.read()?;
        let lim = limit.min(i64::MAX as usize) as i64;
        let mut st = conn.prepare_cached(&format!(
            "SELECT {JOB_COLS} FROM jobs WHERE state = 'queued' \
             AND app NOT IN (SELECT value FROM json_each(?1)) ORDER BY id LIMIT ?2"
        ))?;
        let v = st.query_map(params![json(&skip_apps)?, lim], job_from_row)?.collect::<Result<_, _>>()?;
        Ok(v)
    }

    /// Number of jobs in each state.
    pub fn count_by_state(&self) -> Result<BTreeMap<JobState, u64>> {
        let conn = self.read()?;
        let mut st = conn.prepare_cached("SELECT state, COUNT(*) FROM jobs GROUP BY state")?;
        let mut out: BTreeMap<JobState, u64> = JobState::ALL.iter().map(|s| (*s, 0)).collect();
        for row in st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
            let (s, n) = row?;
            if let Some(s) = JobState::parse(&s) {
                out.insert(s, n as u64);
            }
        }
        Ok(out)
    }

    /// Starts an attempt if the job is still queued: one transaction records the attempt,
    /// the placement and the job's new state. `None` when the job is no longer queued.
    #[allow(clippy::too_many_arguments)]
    pub fn start_attempt(
        &self,
        job: JobId,
        gpu: u32,
        co_apps: &[String],
        exclusive: bool,
        policy: &str,
        group: &[JobId],
        now: f64,
    ) -> Result<Option<AttemptRecord>> {
        let mut conn = self.lock()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let changed = tx.execute(
            "UPDATE jobs SET state = 'running', gpu = ?2, attempts = attempts + 1, started_at = ?3 \
             WHERE id = ?1 AND state = 'queued'",
            params![job as i64, gpu, now],
        )?;
        if changed == 0 {
            return Ok(None);
        }
        let n: u32 = tx.query_row("SELECT attempts FROM jobs WHERE id = ?1", [job as i64], |r| r.get(0))?;
        tx.execute(
            "INSERT INTO attempts (job_id, n, gpu, state, co_apps, exclusive, started_at) \
             VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6)",
            params![job as i64, n, gpu, json(&co_apps)?, exclusive as i64, now],
        )?;
        tx.execute(
            "INSERT INTO placements (decided_at, policy, gpu, jobs) VALUES (?1, ?2, ?3, ?4)",
            params![now, policy, gpu, json(&group)?],
        )?;
        let rec = tx.query_row(
            &format!("SELECT {ATTEMPT_COLS} FROM attempts WHERE job_id = ?1 AND n = ?2"),
            params![job as i64, n],
            attempt_from_row,
        )?;
        tx.commit()?;
        Ok(Some(rec))
    }

    /// Records the supervisor's pid and start time.
    pub fn set_attempt_pid(&self, job: JobId, n: u32, pid: u32, pid_start: u64) -> Result<()> {
        let conn = self.lock()?;
        conn.execute(
            "UPDATE attempts SET pid = ?3, pid_start = ?4 WHERE job_id = ?1 AND n = ?2",
            params![job as i64, n, pid, pid_start as i64],
        )?;
        Ok(())
    }

    /// Ends an attempt and moves the job on, in one transaction, and returns the attempt's
    /// recorded state. Does nothing (returns `None`) when the attempt had already ended, so a
    /// completion seen twice is applied once. A cancel that the job record `end` was decided
    /// from did not show yet wins here: read in the same transaction, the attempt ends
    /// `cancelled` and the job is not queued again.
    pub fn finish_attempt(&self, job: JobId, n: u32, end: &AttemptEnd, now: f64) -> Result<Option<AttemptState>> {
        let mut conn = self.lock()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let cancelled: bool =
            tx.query_row("SELECT cancel_requested FROM jobs WHERE id = ?1", [job as i64], |r| r.get(0))?;
        let overridden;
        let end = if cancelled && end.job_state != JobState::Cancelled {
            overridden = AttemptEnd {
                state: AttemptState::Cancelled,
                job_state: JobState::Cancelled,
                error: None,
                count_failure: false,
                avoid: Vec::new(),
                ..end.clone()
            };
            &overridden
        } else {
            end
        };
        let changed = tx.execute(
            "UPDATE attempts SET state = ?3, finished_at = ?4, exit_code = ?5, signal = ?6, error = ?7 \
             WHERE job_id = ?1 AND n = ?2 AND state = 'running'",
            params![job as i64, n, end.state.as_str(), now, end.exit_code, end.signal, end.error],
        )?;
        if changed == 0 {
            return Ok(None);
        }
        let avoid: Vec<String> = tx.query_row("SELECT avoid_apps FROM jobs WHERE id = ?1", [job as i64], |r| {
            from_json(&r.get::<_, String>(0)?)
        })?;
        let mut avoid = avoid;
        for a in &end.avoid {
            if !avoid.contains(a) {
                avoid.push(a.clone());
            }
        }
        let finished = end.job_state.is_final().then_some(now);
        tx.execute(
            "UPDATE jobs SET state = ?2, finished_at = ?3, exit_code = ?4, signal = ?5, error = ?6, \
             failures = failures + ?7, avoid_apps = ?8 WHERE id = ?1",
            params![
                job as i64,
                end.job_state.as_str(),
                finished,
                end.exit_code,
                end.signal,
                end.error,
                end.count_failure as i64,
                json(&avoid)?
            ],
        )?;
        tx.execute(
            "INSERT INTO events (at, job_id, kind, detail) VALUES (?1, ?2, ?3, ?4)",
            params![now, job as i64, format!("attempt_{}", end.state.as_str()), format!("attempt {n}")],
        )?;
        tx.commit()?;
        Ok(Some(end.state))
    }

    /// Attempts still marked running (after a restart: the ones to re-adopt or re-queue).
    pub fn running_attempts(&self) -> Result<Vec<AttemptRecord>> {
        let conn = self.read()?;
        let mut st = conn.prepare_cached(&format!(
            "SELECT {ATTEMPT_COLS} FROM attempts WHERE state = 'running' ORDER BY job_id, n"
        ))?;
        let v = st.query_map([], attempt_from_row)?.collect::<Result<_, _>>()?;
        Ok(v)
    }

    /// Every attempt of a job, in order.
    pub fn attempts(&self, job: JobId) -> Result<Vec<AttemptRecord>> {
        let conn = self.read()?;
        let mut st =
            conn.prepare_cached(&format!("SELECT {ATTEMPT_COLS} FROM attempts WHERE job_id = ?1 ORDER BY n"))?;
        let v = st.query_map([job as i64], attempt_from_row)?.collect::<Result<_, _>>()?;
        Ok(v)
    }

    /// Cancels a job: a queued one at once, a running one by flagging it for the loop to stop.
    pub fn cancel(&self, job: JobId, now: f64) -> Result<Option<CancelOutcome>> {
        let mut conn = self.lock()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let state: Option<String> =
            tx.query_row("SELECT state FROM jobs WHERE id = ?1", [job as i64], |r| r.get(0)).optional()?;
        let Some(state) = state.and_then(|s| JobState::parse(&s)) else {
            return Ok(None);
        };
        let out = match state {
            JobState::Queued => {
                tx.execute(
                    "UPDATE jobs SET state = 'cancelled', finished_at = ?2, cancel_requested = 1 WHERE id = ?1",
                    params![job as i64, now],
                )?;
                CancelOutcome::Cancelled
            }
            JobState::Running => {
                tx.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1", [job as i64])?;
                CancelOutcome::StopRunning
            }
            s => CancelOutcome::AlreadyFinal(s),
        };
        tx.execute(
            "INSERT INTO events (at, job_id, kind, detail) VALUES (?1, ?2, 'cancel', ?3)",
            params![now, job as i64, format!("{out:?}")],
        )?;
        tx.commit()?;
        Ok(Some(out))
    }

    /// Stores (replacing) an app's profile; true when it replaced one.
    pub fn put_profile(&self, p: &AppProfile, source: &str, now: f64) -> Result<bool> {
        let mut conn = self.lock()?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let had: bool =
            tx.query_row("SELECT EXISTS(SELECT 1 FROM profiles WHERE app = ?1)", params![p.app.name], |r| r.get(0))?;
        tx.execute(
            "INSERT INTO profiles (app, profile, source, updated_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT(app) DO UPDATE SET profile = excluded.profile, source = excluded.source, \
             updated_at = excluded.updated_at",
            params![p.app.name, json(p)?, source, now],
        )?;
        tx.commit()?;
        Ok(had)
    }

    /// Stores an app's profile only where it has none (an observed one never replaces a profile
    /// posted meanwhile); true when stored.
    pub fn add_profile(&self, p: &AppProfile, source: &str, now: f64) -> Result<bool> {
        let conn = self.lock()?;
        let n = conn.execute(
            "INSERT INTO profiles (app, profile, source, updated_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT(app) DO NOTHING",
            params![p.app.name, json(p)?, source, now],
        )?;
        Ok(n == 1)
    }

    /// Every stored profile with its source (`api` or `observed`).
    pub fn profiles(&self) -> Result<Vec<(AppProfile, String)>> {
        let conn = self.read()?;
        let mut st = conn.prepare("SELECT profile, source FROM profiles ORDER BY app")?;
        let v = st
            .query_map([], |r| Ok((from_json::<AppProfile>(&r.get::<_, String>(0)?)?, r.get::<_, String>(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(v)
    }

    /// Appends an event.
    pub fn event(&self, job: Option<JobId>, kind: &str, detail: &str, now: f64) -> Result<()> {
        let conn = self.lock()?;
        conn.execute(
            "INSERT INTO events (at, job_id, kind, detail) VALUES (?1, ?2, ?3, ?4)",
            params![now, job.map(|j| j as i64), kind, detail],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> NewJob {
        NewJob {
            app: "a".into(),
            command: vec!["true".into()],
            env: Default::default(),
            input_size_mb: None,
            params: None,
        }
    }

    /// A cancel that lands after the loop read the job (to decide a retry) and before it
    /// recorded the end wins: the attempt ends cancelled and the job is not queued again.
    #[test]
    fn a_cancel_between_reading_a_job_and_recording_its_end_wins() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("db.sqlite")).unwrap();
        let (j, _) = s.insert_job(&job(), None, 1.0).unwrap();
        s.start_attempt(j.id, 0, &[], false, "fifo", &[j.id], 2.0).unwrap().unwrap();
        // The loop read the job (no cancel yet) and decided: failed, retry.
        assert!(!s.job(j.id).unwrap().unwrap().cancel_requested);
        let retry = AttemptEnd {
            state: AttemptState::Failed,
            job_state: JobState::Queued,
            exit_code: Some(1),
            signal: None,
            error: Some("exit 1".into()),
            count_failure: true,
            avoid: Vec::new(),
        };
        // Then the cancel commits, then the end is recorded.
        s.cancel(j.id, 3.0).unwrap();
        assert_eq!(s.finish_attempt(j.id, 1, &retry, 4.0).unwrap(), Some(AttemptState::Cancelled));
        let after = s.job(j.id).unwrap().unwrap();
        assert_eq!((after.state, after.failures), (JobState::Cancelled, 0));
        assert_eq!(s.attempts(j.id).unwrap()[0].state, AttemptState::Cancelled);
    }

    /// While another connection holds the write lock, a cancel and a keyed insert wait for it
    /// (the busy timeout) instead of failing at once: their transactions take the write lock
    /// first, as every write transaction here does (a read-then-write deferred one cannot wait).
    #[test]
    fn writes_wait_for_a_held_write_lock() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("db.sqlite");
        let s = Store::open(&path).unwrap();
        let (j, _) = s.insert_job(&job(), None, 1.0).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE;").unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            other.execute_batch("COMMIT;").unwrap();
        });
        assert_eq!(s.cancel(j.id, 2.0).unwrap(), Some(CancelOutcome::Cancelled));
        release.join().unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE;").unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            other.execute_batch("COMMIT;").unwrap();
        });
        assert!(s.insert_job(&job(), Some("key"), 3.0).unwrap().1);
        release.join().unwrap();
    }

    #[test]
    fn attempt_lifecycle_is_applied_once() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("db.sqlite")).unwrap();
        let (j, created) = s.insert_job(&job(), Some("k"), 1.0).unwrap();
        assert!(created);
        assert_eq!(s.insert_job(&job(), Some("k"), 2.0).unwrap().0.id, j.id);
        let a = s.start_attempt(j.id, 0, &[], false, "fifo", &[j.id], 3.0).unwrap().unwrap();
        assert_eq!(a.n, 1);
        // Not queued any more: a second start is refused.
        assert!(s.start_attempt(j.id, 1, &[], false, "fifo", &[j.id], 3.0).unwrap().is_none());
        let end = AttemptEnd {
            state: AttemptState::Oom,
            job_state: JobState::Queued,
            exit_code: Some(1),
            signal: None,
            error: None,
            count_failure: true,
            avoid: vec!["b".into()],
        };
        assert_eq!(s.finish_attempt(j.id, 1, &end, 4.0).unwrap(), Some(AttemptState::Oom));
        assert_eq!(s.finish_attempt(j.id, 1, &end, 5.0).unwrap(), None, "a completion seen twice is applied once");
        let j2 = s.job(j.id).unwrap().unwrap();
        assert_eq!((j2.state, j2.failures, j2.avoid_apps.clone()), (JobState::Queued, 1, vec!["b".to_string()]));
        assert_eq!(s.count_by_state().unwrap()[&JobState::Queued], 1);
        assert_eq!(s.cancel(j.id, 6.0).unwrap(), Some(CancelOutcome::Cancelled));
        assert_eq!(s.cancel(j.id, 6.0).unwrap(), Some(CancelOutcome::AlreadyFinal(JobState::Cancelled)));
        assert_eq!(s.cancel(999, 6.0).unwrap(), None);
    }

    /// A database written before the schema was numbered (version 0, the same tables) opens,
    /// keeps its jobs, and is numbered.
    #[test]
    fn a_database_from_before_the_version_number_opens_and_is_numbered() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("db.sqlite");
        let (j, _) = Store::open(&path).unwrap().insert_job(&job(), None, 1.0).unwrap();
        Connection::open(&path).unwrap().execute_batch("PRAGMA user_version = 0;").unwrap();
        let s = Store::open(&path).unwrap();
        assert_eq!(s.job(j.id).unwrap().unwrap().spec, job());
        let v: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(v, SCHEMA_VERSION);
    }

    /// A profile posted while an app's first job ran is not replaced by the profile that run
    /// leaves (the operator's wins); a posted one replaces any, and says whether it did.
    #[test]
    fn an_observed_profile_never_replaces_a_posted_one() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("db.sqlite")).unwrap();
        let profile = |mem: f64| {
            let samples = vec![dqngpu_model::Resources::new(10.0, mem, 10.0, 0.0); 3];
            AppProfile::new(dqngpu_model::AppInfo { name: "a".into(), ..Default::default() }, 1.0, samples).unwrap()
        };
        assert!(!s.put_profile(&profile(100.0), "api", 1.0).unwrap());
        assert!(!s.add_profile(&profile(200.0), "observed", 2.0).unwrap());
        let stored = s.profiles().unwrap();
        assert_eq!((stored.len(), stored[0].1.as_str()), (1, "api"));
        assert_eq!(stored[0].0.samples[0].gpu_mem_mib, 100.0);
        assert!(s.put_profile(&profile(300.0), "api", 3.0).unwrap());
        assert_eq!(s.profiles().unwrap()[0].0.samples[0].gpu_mem_mib, 300.0);
    }
}
