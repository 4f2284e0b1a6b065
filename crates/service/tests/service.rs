//! Integration tests of the placement service, one harness: the API through the Router (no
//! socket; dqngpu-http's tests serve a router on loopback), a real SQLite file, and real child processes on
//! virtual GPUs.

#[path = "service/util.rs"]
mod util;

#[path = "service/api.rs"]
mod api;
#[path = "service/bad_input.rs"]
mod bad_input;
#[path = "service/data_dir_lock.rs"]
mod data_dir_lock;
#[path = "service/failures.rs"]
mod failures;
#[path = "service/placement.rs"]
mod placement;
#[path = "service/recovery.rs"]
mod recovery;
