//! `serve_router` on a real loopback socket (the service and the k8s extender serve with it): a
//! client stalled in its request headers is cut off after the timeout, while normal requests
//! are served, and shutdown closes idle connections.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A router with one route, as the service's and the extender's health checks answer.
fn router() -> axum::Router {
    axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }))
}

/// Far longer than the test's header timeout: only a server that never times out hits it.
const PATIENCE: Duration = Duration::from_secs(5);

/// Serves `router` on a fresh loopback port with `header_timeout`; returns the address and a
/// sender that shuts the server down, and the server's task.
async fn serve(
    router: axum::Router,
    header_timeout: Duration,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(dqngpu_http::serve_router(listener, router, header_timeout, async {
        let _ = stopped.await;
    }));
    (addr, stop, task)
}

/// Everything the server sends until it closes the connection (a reset counts as closed).
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await {
            Err(_) => panic!("the server kept the connection open; it sent {:?}", String::from_utf8_lossy(&out)),
            Ok(Ok(0) | Err(_)) => return String::from_utf8_lossy(&out).into_owned(),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_stalled_in_its_headers_is_closed_and_others_are_served() {
    let (addr, stop, task) = serve(router(), Duration::from_millis(200)).await;
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    stalled.write_all(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let silent = TcpStream::connect(addr).await.unwrap();
    // A whole request on another connection is answered meanwhile.
    let mut ok = TcpStream::connect(addr).await.unwrap();
    ok.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let reply = read_until_closed(&mut ok).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    // The stalled one is closed, with a 408 or without a reply, never with an answer.
    let cut = read_until_closed(&mut stalled).await;
    assert!(cut.is_empty() || cut.starts_with("HTTP/1.1 408"), "{cut}");
    // So is one that never sent a byte.
    let mut silent = silent;
    let cut = read_until_closed(&mut silent).await;
    assert!(cut.is_empty() || cut.starts_with("HTTP/1.1 408"), "{cut}");
    let _ = stop.send(());
    tokio::time::timeout(PATIENCE, task).await.expect("the server did not shut down").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_idle_connections_and_returns() {
    // A header timeout the test never reaches: only the shutdown may close the connection.
    let (addr, stop, task) = serve(router(), Duration::from_secs(600)).await;
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(PATIENCE, idle.read(&mut buf)).await.unwrap().unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    // Kept alive and idle now; the shutdown must close it and return.
    let _ = stop.send(());
    tokio::time::timeout(PATIENCE, task).await.expect("the server did not shut down").unwrap();
    let rest = read_until_closed(&mut idle).await;
    assert!(!rest.contains("HTTP/1.1"), "{rest}");
}

/// Idle connections cannot take every descriptor: at the cap, the next connection waits in
/// the backlog, unanswered, and is served as soon as one closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_until_one_closes() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(dqngpu_http::serve_router_capped(listener, router(), PATIENCE, 2, async {
        let _ = stopped.await;
    }));
    let idle1 = TcpStream::connect(addr).await.unwrap();
    let _idle2 = TcpStream::connect(addr).await.unwrap();
    // Both accepted before the third arrives.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    third.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut buf)).await;
    assert!(early.is_err(), "a connection past the cap was served: {early:?}");
    drop(idle1);
    let reply = read_until_closed(&mut third).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "not served once a slot was free: {reply:?}");
    let _ = stop.send(());
    let _ = task.await;
}

/// `serve --request-timeout-s` far past a day once reached hyper's header timeout as given:
/// `Instant + Duration` overflowed there and every connection's task panicked unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_header_timeout_still_answers() {
    let (addr, stop, task) = serve(router(), Duration::from_secs(u64::MAX)).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let reply = read_until_closed(&mut s).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "no answer with a huge header timeout: {reply:?}");
    let _ = stop.send(());
    let _ = task.await;
}
