//! `orchestrator mcp --listen ADDR`: the same server over MCP's streamable
//! HTTP transport, on a loopback address only (the tools act on a
//! repository with the rights of whoever started the server: nothing
//! beyond this machine may call them). rmcp's `StreamableHttpService`
//! speaks the protocol (sessions, SSE, `Host` checked against loopback
//! names, which stops DNS rebinding); each connection is served by hyper's
//! HTTP/1.1 server. Every client session gets its own [`Orchestrator`].

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::Orchestrator;
use crate::commands::Exit;

/// The path the endpoint is announced at (every path is served).
pub(super) const PATH: &str = "/mcp";

/// Refuses an address that is not loopback, naming why.
pub(super) fn check_loopback(addr: SocketAddr) -> Result<(), String> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(format!(
            "--listen {addr}: only a loopback address (127.0.0.1, [::1]) is served; the tools change the repository with your rights"
        ))
    }
}

/// Serves `server`'s tools on `addr` until Ctrl-C; prints the endpoint's
/// URL on stderr once listening (with the port chosen for `:0`).
pub(super) async fn serve(server: Orchestrator, addr: SocketAddr) -> Exit {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("error: --listen {addr}: {e}");
            return Exit::BadInput;
        }
    };
    let bound = match listener.local_addr() {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!("error: --listen {addr}: {e}");
            return Exit::BadInput;
        }
    };
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop.clone());
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    eprintln!("orchestrator mcp: listening on http://{bound}{PATH}");
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => break,
        };
        let service = TowerToHyperService::new(service.clone());
        let stop = stop.clone();
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::select! {
                served = connection => {
                    if let Err(e) = served {
                        tracing::debug!(error = %e, "connection ended");
                    }
                }
                () = stop.cancelled() => {}
            }
        });
    }
    stop.cancel();
    Exit::Success
}
