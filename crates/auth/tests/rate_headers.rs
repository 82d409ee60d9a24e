//! The `x-ratelimit-*` response metadata through a real gRPC server behind the auth layer (a fake
//! `Analysis` service: one unary and one server-streaming method; the others answer UNIMPLEMENTED):
//! every answer of a call counted against a bucket carries `x-ratelimit-limit`,
//! `x-ratelimit-remaining` and `x-ratelimit-reset`: OK answers, the handler's errors, a stream's
//! start, RESOURCE_EXHAUSTED (with `retry-after`), UNAUTHENTICATED (the address's anonymous bucket)
//! and INVALID_ARGUMENT for a malformed `x-on-behalf-of` (the service key's bucket).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use draughts_auth::{AuthConfig, Authenticator};
use draughts_proto::pb;
use draughts_proto::pb::analysis_client::AnalysisClient;
use draughts_proto::pb::analysis_server::{Analysis, AnalysisServer};
use tonic::codegen::tokio_stream::{self, StreamExt};
use tonic::metadata::MetadataMap;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tower::Layer;

const GUEST_LIMIT: u32 = 3;
const ANONYMOUS_LIMIT: u32 = 4;
const ADMIN_KEY: &str = "dk_test_only_admin_key_0123456789abcdef";

/// Answers `QueueStatus` and `WatchAnalysis` (two updates); everything else is UNIMPLEMENTED.
struct Fake;

#[tonic::async_trait]
impl Analysis for Fake {
    async fn analyze_position(
        &self,
        _: Request<pb::AnalyzePositionRequest>,
    ) -> Result<Response<pb::AnalysisJob>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn analyze_game(
        &self,
        _: Request<pb::AnalyzeGameRequest>,
    ) -> Result<Response<pb::AnalysisJob>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn get_analysis(
        &self,
        _: Request<pb::AnalysisJobRequest>,
    ) -> Result<Response<pb::AnalysisView>, Status> {
        Err(Status::unimplemented("fake"))
    }

    type WatchAnalysisStream =
        tokio_stream::Iter<std::vec::IntoIter<Result<pb::AnalysisUpdate, Status>>>;

    async fn watch_analysis(
        &self,
        _: Request<pb::AnalysisJobRequest>,
    ) -> Result<Response<Self::WatchAnalysisStream>, Status> {
        let update = |n| pb::AnalysisUpdate {
            kind: Some(pb::analysis_update::Kind::QueuePosition(n)),
        };
        Ok(Response::new(tokio_stream::iter(vec![
            Ok(update(2)),
            Ok(update(1)),
        ])))
    }

    async fn cancel_analysis(
        &self,
        _: Request<pb::AnalysisJobRequest>,
    ) -> Result<Response<pb::AnalysisView>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn best_move(
        &self,
        _: Request<pb::BestMoveRequest>,
    ) -> Result<Response<pb::BestMoveResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn queue_status(
        &self,
        _: Request<pb::QueueStatusRequest>,
    ) -> Result<Response<pb::QueueStatusResponse>, Status> {
        Ok(Response::new(pb::QueueStatusResponse::default()))
    }
}

/// The fake behind the auth layer on an in-memory store, served on 127.0.0.1:0; the authenticator
/// and a client. Client addresses come from `x-forwarded-for`, so that one test is several clients.
async fn start() -> (Authenticator, AnalysisClient<Channel>) {
    let config = AuthConfig {
        rate_limit_guest_per_minute: GUEST_LIMIT,
        rate_limit_anonymous_per_minute: ANONYMOUS_LIMIT,
        admin_api_key: Some(ADMIN_KEY.into()),
        trust_forwarded_for: true,
        ..AuthConfig::for_tests()
    };
    let auth = Authenticator::new(config, Arc::new(draughts_store::MemoryStore::new())).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let service = auth.layer().layer(AnalysisServer::new(Fake));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (auth, AnalysisClient::new(channel))
}

/// Waits, if needed, until at least 10 s are left in the rate-limit minute, so that a test's calls
/// are all counted in one window.
async fn in_one_window() {
    let into_minute = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % 60_000;
    if into_minute > 50_000 {
        tokio::time::sleep(Duration::from_millis(60_100 - into_minute as u64)).await;
    }
}

/// `message` from client address `addr`, with `token` as credentials when not empty.
fn from<T>(addr: &str, token: &str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("x-forwarded-for", addr.parse().unwrap());
    if !token.is_empty() {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    request
}

/// The three `x-ratelimit-*` values of an answer: (limit, remaining, reset); panics naming the
/// missing one.
fn rate(metadata: &MetadataMap) -> (u32, u32, u64) {
    let value = |name: &str| -> u64 {
        metadata
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in {metadata:?}"))
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let reset = value("x-ratelimit-reset");
    assert!((1..=60).contains(&reset), "x-ratelimit-reset {reset}");
    (
        value("x-ratelimit-limit") as u32,
        value("x-ratelimit-remaining") as u32,
        reset,
    )
}

fn queue_status(addr: &str, token: &str) -> Request<pb::QueueStatusRequest> {
    from(addr, token, pb::QueueStatusRequest::default())
}

#[tokio::test]
async fn a_caller_s_answers_carry_its_bucket_refusal_included() {
    let (auth, mut client) = start().await;
    in_one_window().await;
    let guest = auth.issue_guest("Ann").unwrap().token;

    // OK: the guest's bucket after the call.
    let ok = client
        .queue_status(queue_status("192.0.2.1", &guest))
        .await
        .unwrap();
    assert_eq!(rate(ok.metadata()).0, GUEST_LIMIT);
    assert_eq!(rate(ok.metadata()).1, GUEST_LIMIT - 1);

    // An error of the handler: counted, so it says so too.
    let unimplemented = client
        .get_analysis(from("192.0.2.1", &guest, pb::AnalysisJobRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(unimplemented.code(), Code::Unimplemented);
    assert_eq!(
        rate(unimplemented.metadata()).1,
        GUEST_LIMIT - 2,
        "{unimplemented:?}"
    );

    // A server stream: the state comes with the stream's headers, before its first message.
    let stream = client
        .watch_analysis(from("192.0.2.1", &guest, pb::AnalysisJobRequest::default()))
        .await
        .unwrap();
    let (limit, remaining, _) = rate(stream.metadata());
    assert_eq!((limit, remaining), (GUEST_LIMIT, 0));
    let updates: Vec<_> = stream.into_inner().collect().await;
    assert_eq!(updates.len(), 2, "{updates:?}");
    assert!(updates.iter().all(Result::is_ok), "{updates:?}");

    // RESOURCE_EXHAUSTED: all three, nothing left, and retry-after equal to the reset.
    let refused = client
        .queue_status(queue_status("192.0.2.1", &guest))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        draughts_proto::reason_of(&refused),
        Some(draughts_proto::pb::ErrorReason::RateLimited)
    );
    let (limit, remaining, reset) = rate(refused.metadata());
    assert_eq!((limit, remaining), (GUEST_LIMIT, 0));
    let retry_after: u64 = refused
        .metadata()
        .get("retry-after")
        .expect("retry-after")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(retry_after, reset);

    // Another caller from the same address is not touched by the guest's bucket.
    let other = auth.issue_guest("Bob").unwrap().token;
    let ok = client
        .queue_status(queue_status("192.0.2.1", &other))
        .await
        .unwrap();
    assert_eq!(rate(ok.metadata()).1, GUEST_LIMIT - 1);
}

#[tokio::test]
async fn anonymous_and_unauthenticated_answers_carry_the_address_bucket() {
    let (_auth, mut client) = start().await;
    in_one_window().await;

    // Anonymous: the address's bucket at the anonymous limit.
    let ok = client
        .queue_status(queue_status("198.51.100.7", ""))
        .await
        .unwrap();
    assert_eq!(
        (rate(ok.metadata()).0, rate(ok.metadata()).1),
        (ANONYMOUS_LIMIT, ANONYMOUS_LIMIT - 1)
    );

    // A refused credential (not a token, and a well-formed but unknown API key): UNAUTHENTICATED,
    // counted against the same address bucket, which says so.
    for (i, token) in ["not-a-token", "dk_0123456789abcdef0123456789abcdef"]
        .into_iter()
        .enumerate()
    {
        let refused = client
            .queue_status(queue_status("198.51.100.7", token))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
        let (limit, remaining, _) = rate(refused.metadata());
        assert_eq!(
            (limit, remaining),
            (ANONYMOUS_LIMIT, ANONYMOUS_LIMIT - 2 - i as u32)
        );
    }
    // The address's last call, then RESOURCE_EXHAUSTED for a refused credential too.
    let last = client
        .queue_status(queue_status("198.51.100.7", ""))
        .await
        .unwrap();
    assert_eq!(rate(last.metadata()).1, 0);
    let refused = client
        .queue_status(queue_status("198.51.100.7", "not-a-token"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        draughts_proto::reason_of(&refused),
        Some(draughts_proto::pb::ErrorReason::RateLimited)
    );
    assert_eq!(rate(refused.metadata()).1, 0);
    assert!(refused.metadata().get("retry-after").is_some());

    // Another address has its own bucket.
    let refused = client
        .queue_status(queue_status("198.51.100.8", "not-a-token"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert_eq!(rate(refused.metadata()).1, ANONYMOUS_LIMIT - 1);
}

#[tokio::test]
async fn a_service_s_answers_carry_the_bucket_that_counted() {
    let (auth, mut client) = start().await;
    in_one_window().await;
    let key_limit = auth.config().rate_limit_api_key_per_minute;
    let guest = auth.issue_guest("Ann").unwrap();

    // A malformed x-on-behalf-of: INVALID_ARGUMENT, counted against the key's own bucket.
    let mut bad = queue_status("192.0.2.9", ADMIN_KEY);
    bad.metadata_mut()
        .insert("x-on-behalf-of", "nobody-at-all".parse().unwrap());
    let refused = client.queue_status(bad).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    let (limit, remaining, _) = rate(refused.metadata());
    assert_eq!((limit, remaining), (key_limit, key_limit - 1));

    // On a guest's behalf: the guest's bucket, not the key's.
    let mut behalf = queue_status("192.0.2.9", ADMIN_KEY);
    behalf
        .metadata_mut()
        .insert("x-on-behalf-of", guest.principal.player_id.parse().unwrap());
    let ok = client.queue_status(behalf).await.unwrap();
    assert_eq!(
        (rate(ok.metadata()).0, rate(ok.metadata()).1),
        (GUEST_LIMIT, GUEST_LIMIT - 1)
    );

    // The key's own call: its bucket, one further down.
    let ok = client
        .queue_status(queue_status("192.0.2.9", ADMIN_KEY))
        .await
        .unwrap();
    assert_eq!(
        (rate(ok.metadata()).0, rate(ok.metadata()).1),
        (key_limit, key_limit - 2)
    );
}
