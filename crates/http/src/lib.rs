//! The HTTP serving the placement service and the k8s extender share: a router over TCP,
//! served with hyper directly because `axum::serve` cannot set a header read timeout: without one, a client that stops partway through its request headers (or
//! never sends any) holds its connection open forever, and enough of them exhaust the
//! server's file descriptors. The router's own timeout only starts once the headers are in.
//! Open connections are capped too ([`connection_cap`]): idle ones within their header
//! timeout could otherwise take every descriptor, and the service could start no job (a
//! job's launch opens files). At the cap the server stops accepting; new connections wait in
//! the listen backlog until one closes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The longest header read timeout: a day. Longer ones are cut to it (hyper panics on an
/// `Instant` overflow with one near `u64::MAX` seconds).
pub const MAX_HEADER_TIMEOUT: Duration = Duration::from_secs(86_400);

/// The most connections served at once: half the process's soft descriptor limit
/// (`RLIMIT_NOFILE`), so that the other half stays for the database, log files and the jobs
/// the server starts, within 16..=4096.
pub fn connection_cap() -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
    usize::try_from(soft / 2).unwrap_or(usize::MAX).clamp(16, 4096)
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and waits
/// for open connections to finish their requests (as `axum::serve`'s graceful shutdown).
/// A connection whose request headers are not complete within `header_timeout` of it
/// waiting for a request (a new connection, or an idle keep-alive one) is closed. At most
/// [`connection_cap`] connections are open at once.
pub async fn serve_router(
    listener: TcpListener,
    router: axum::Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    serve_router_capped(listener, router, header_timeout, connection_cap(), shutdown).await;
}

/// [`serve_router`] with at most `max_connections` (at least 1) connections open at once:
/// at the cap no connection is accepted until one closes.
pub async fn serve_router_capped(
    listener: TcpListener,
    router: axum::Router,
    header_timeout: Duration,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let slots = Arc::new(Semaphore::new(max_connections.clamp(1, Semaphore::MAX_PERMITS)));
    loop {
        // A slot first: while every one is taken, connections wait in the listen backlog.
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // No Nagle delay between a reply's writes (kube-scheduler's Go client, and
                    // most HTTP clients, set TCP_NODELAY too).
                    let _ = stream.set_nodelay(true);
                    spawn_connection(stream, router.clone(), header_timeout, &graceful, permit);
                }
                Err(e) => accept_failed(e).await,
            },
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Serves one connection on its own task, watched by the graceful shutdown; its slot is
/// given back when it ends.
fn spawn_connection(
    stream: TcpStream,
    router: axum::Router,
    header_timeout: Duration,
    graceful: &GracefulShutdown,
    permit: OwnedSemaphorePermit,
) {
    let mut builder = http1::Builder::new();
    // hyper's header timeout needs a timer; tokio's is the runtime we run on.
    // hyper adds the timeout to `Instant::now()` and panics past what an `Instant` holds: a
    // longer one than a day is a day (the callers' flags refuse more).
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout.min(MAX_HEADER_TIMEOUT));
    let conn = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(router));
    let conn = graceful.watch(conn);
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "connection ended with an error");
        }
        drop(permit);
    });
}

/// Logs a failed accept; on a resource error (out of file descriptors) waits a second so the
/// loop does not spin, as `axum::serve` does. A peer's reset is not the server's problem.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
