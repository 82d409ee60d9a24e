//! Trace context carried in gRPC metadata: the server's span for an RPC joins the caller's trace.

use draughts_proto::pb;
use draughts_runtime::{ServerConfig, Services};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_spans_join_the_callers_trace() {
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        draughts_runtime::serve(
            &ServerConfig::for_tests(),
            Services::new(),
            listener,
            async {
                let _ = rx.await;
            },
        )
        .await
    });
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut echo = pb::diagnostics_client::DiagnosticsClient::new(channel);
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let mut req = tonic::Request::new(pb::EchoRequest { payload: vec![1] });
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-00f067aa0ba902b7-01")
            .parse()
            .unwrap(),
    );
    echo.echo(req).await.unwrap();
    let _ = tx.send(());
    server.await.unwrap().unwrap();
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let rpc = spans
        .iter()
        .find(|s| s.name == "rpc")
        .unwrap_or_else(|| panic!("no rpc span in {spans:?}"));
    assert_eq!(rpc.span_context.trace_id().to_string(), trace_id);

    // A queue envelope carries the context too: inject inside a span, extract into another.
    let carrier = {
        let span = tracing::info_span!("producer");
        let _g = span.enter();
        draughts_runtime::propagation::inject_map()
    };
    assert!(carrier.contains_key("traceparent"), "{carrier:?}");
}
