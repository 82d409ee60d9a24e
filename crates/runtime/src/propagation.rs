//! W3C trace context across process boundaries: in gRPC metadata (server extraction, client injection)
//! and in queue messages (a `traceparent` field in each envelope).

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, Injector};
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            value.parse(),
        ) {
            self.0.insert(k, v);
        }
    }
}

/// Makes `span` a child of the trace context carried in request headers, if any.
pub fn set_parent_from_headers(span: &tracing::Span, headers: &http::HeaderMap) {
    let cx =
        opentelemetry::global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers)));
    let _ = span.set_parent(cx);
}

/// A client interceptor that injects the current span's context into outgoing gRPC metadata.
pub fn inject_into_request<T>(
    mut req: tonic::Request<T>,
) -> Result<tonic::Request<T>, tonic::Status> {
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut MetadataInjector(req.metadata_mut()))
    });
    Ok(req)
}

/// The current trace context as a string map, to put in a queue message (`traceparent`, `tracestate`).
pub fn inject_map() -> HashMap<String, String> {
    let mut map = HashMap::new();
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut map));
    map
}

/// Makes `span` a child of the trace context found in a queue message's map.
pub fn set_parent_from_map(span: &tracing::Span, map: &HashMap<String, String>) {
    let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(map));
    let _ = span.set_parent(cx);
}
