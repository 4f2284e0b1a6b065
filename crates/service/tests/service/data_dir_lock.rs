//! One service per data dir: a second one on the same dir is refused while the first runs,
//! and the dir is free again once the first has stopped (or been dropped).

use std::sync::Arc;
use std::time::Duration;

use dqngpu_service::{Service, ServiceError};

use crate::util::config;

fn open(data: &std::path::Path) -> Result<Service, ServiceError> {
    let policy: Arc<dyn dqngpu_model::Policy> = Arc::from(dqngpu_policy::by_name("fifo", 7).unwrap());
    Service::start(config(data.to_path_buf(), "titanxp:1"), policy, None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_service_on_the_same_dir_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let first = open(&data).unwrap();
    let Err(err) = open(&data) else { panic!("a second service opened a data dir in use") };
    let canonical = data.canonicalize().unwrap();
    match &err {
        ServiceError::DataDirInUse { dir, holder } => {
            assert_eq!(dir, &canonical);
            assert_eq!(*holder, Some(std::process::id()));
        }
        other => panic!("expected DataDirInUse, got {other}"),
    }
    let text = err.to_string();
    assert!(text.contains(&canonical.display().to_string()) && text.contains("another dqngpu serve"), "{text}");
    first.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dir_is_free_again_after_stop_or_drop() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    open(&data).unwrap().stop().await;
    // Stopped: the loop has ended, so the lock is free at once.
    let second = open(&data).unwrap();
    drop(second);
    // Dropped: free as soon as the loop has seen the drop (bounded, so a leak fails).
    for _ in 0..250 {
        if let Ok(third) = open(&data) {
            third.stop().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the data dir stayed locked after its service was dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_that_is_a_file_or_holds_no_database_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("afile");
    std::fs::write(&file, "x").unwrap();
    let Err(e) = open(&file) else { panic!("a file was taken for a data dir") };
    assert!(e.to_string().contains("is a file"), "{e}");
    // A database file that is no SQLite: named in the error, and left as it was.
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let junk = vec![7u8; 8192];
    std::fs::write(data.join("dqngpu.sqlite"), &junk).unwrap();
    let Err(e) = open(&data) else { panic!("a junk database was opened") };
    assert!(e.to_string().contains("dqngpu.sqlite"), "{e}");
    assert_eq!(std::fs::read(data.join("dqngpu.sqlite")).unwrap(), junk);
}

/// A SQLite file that is not dqngpu's (another program's tables, or a `jobs` table of other
/// columns) is refused naming it, and left as it was: it was opened, dqngpu's tables added to
/// it, and the service then failed every placement pass and submission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_sqlite_database_is_refused_and_left_as_it_was() {
    for foreign in ["CREATE TABLE notes (x TEXT);", "CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT);"] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let db = data.join("dqngpu.sqlite");
        rusqlite::Connection::open(&db).unwrap().execute_batch(foreign).unwrap();
        let Err(e) = open(&data) else { panic!("a foreign database was opened: {foreign}") };
        let text = e.to_string();
        assert!(text.contains("dqngpu.sqlite") && text.contains("not a dqngpu database"), "{text}");
        let conn = rusqlite::Connection::open(&db).unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(tables.len(), 1, "the foreign database was changed: {tables:?}");
    }
}

/// A database a newer dqngpu wrote (a higher schema version) is refused naming both versions,
/// not read and written as this version's; this version's own database opens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_a_newer_schema_is_refused_naming_the_versions() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    open(&data).unwrap().stop().await;
    let db = data.join("dqngpu.sqlite");
    let ours: i64 =
        rusqlite::Connection::open(&db).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert!(ours >= 1, "no schema version is written");
    open(&data).unwrap().stop().await;
    rusqlite::Connection::open(&db).unwrap().execute_batch(&format!("PRAGMA user_version = {};", ours + 1)).unwrap();
    let Err(e) = open(&data) else { panic!("a database of a newer schema was opened") };
    let text = e.to_string();
    assert!(text.contains("dqngpu.sqlite") && text.contains(&format!("schema version {}", ours + 1)), "{text}");
    assert!(text.contains(&format!("version {ours}")), "{text}");
}
