//! One RPC to repeat: the method found by name in the API's descriptor set, and its request turned from
//! proto3 JSON into protobuf bytes once, before any load is sent.

use bytes::Bytes;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MethodDescriptor};
use tonic::codegen::http::uri::PathAndQuery;

/// A unary method with its encoded request.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    /// `package.Service/Method`.
    pub method: String,
    /// `/package.Service/Method`, the HTTP/2 `:path`.
    pub path: PathAndQuery,
    /// The request message, protobuf-encoded.
    pub request: Bytes,
}

/// Why a method or request is refused.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("the API descriptor set does not decode: {0}")]
    Descriptors(String),
    #[error("--method {0:?}: expected package.Service/Method, e.g. draughts.v1.Rules/ValidateMove")]
    MethodSyntax(String),
    #[error("--method {given:?}: no such service; services: {known}")]
    UnknownService { given: String, known: String },
    #[error("--method {given:?}: no such method; {service} has: {known}")]
    UnknownMethod {
        given: String,
        service: String,
        known: String,
    },
    #[error("--method {0:?}: a streaming method; only unary methods can be driven")]
    Streaming(String),
    #[error("request for {method} (message {message}) is not valid proto3 JSON: {reason}")]
    Json {
        method: String,
        message: String,
        reason: String,
    },
}

/// The descriptor pool of the whole `draughts.v1` API.
pub fn api_descriptors() -> Result<DescriptorPool, CallError> {
    DescriptorPool::decode(draughts_proto::FILE_DESCRIPTOR_SET)
        .map_err(|err| CallError::Descriptors(err.to_string()))
}

impl PreparedCall {
    /// Looks `method` (`package.Service/Method`, a leading `/` allowed) up in the API and encodes
    /// `request_json` (proto3 JSON mapping; unknown fields are refused, so a typo is not silently dropped).
    pub fn from_json(method: &str, request_json: &str) -> Result<PreparedCall, CallError> {
        let pool = api_descriptors()?;
        let descriptor = find_method(&pool, method)?;
        let full_name = format!(
            "{}/{}",
            descriptor.parent_service().full_name(),
            descriptor.name()
        );
        let input = descriptor.input();
        let json_error = |reason: String| CallError::Json {
            method: full_name.clone(),
            message: input.full_name().to_owned(),
            reason,
        };
        let mut deserializer = serde_json::Deserializer::from_str(request_json);
        let message = DynamicMessage::deserialize(input.clone(), &mut deserializer)
            .map_err(|err| json_error(err.to_string()))?;
        deserializer
            .end()
            .map_err(|err| json_error(err.to_string()))?;
        let path = PathAndQuery::try_from(format!("/{full_name}"))
            .map_err(|_| CallError::MethodSyntax(method.to_owned()))?;
        Ok(PreparedCall {
            method: full_name,
            path,
            request: Bytes::from(message.encode_to_vec()),
        })
    }
}

fn find_method(pool: &DescriptorPool, given: &str) -> Result<MethodDescriptor, CallError> {
    let name = given.strip_prefix('/').unwrap_or(given);
    let (service_name, method_name) = name
        .split_once('/')
        .filter(|(service, method)| !service.is_empty() && !method.is_empty())
        .ok_or_else(|| CallError::MethodSyntax(given.to_owned()))?;
    let service =
        pool.get_service_by_name(service_name)
            .ok_or_else(|| CallError::UnknownService {
                given: given.to_owned(),
                known: pool
                    .services()
                    .map(|service| service.full_name().to_owned())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
    let method = service
        .methods()
        .find(|method| method.name() == method_name)
        .ok_or_else(|| CallError::UnknownMethod {
            given: given.to_owned(),
            service: service.full_name().to_owned(),
            known: service
                .methods()
                .map(|method| method.name().to_owned())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    if method.is_client_streaming() || method.is_server_streaming() {
        return Err(CallError::Streaming(given.to_owned()));
    }
    Ok(method)
}

#[cfg(test)]
mod tests {
    use super::*;
    use draughts_proto::pb;

    #[test]
    fn request_json_encodes_like_the_generated_message() {
        let call = PreparedCall::from_json(
            "draughts.v1.Rules/ValidateMove",
            r#"{"rules":{"variant":"VARIANT_ENGLISH"},"move":{"text":"11-15"}}"#,
        )
        .unwrap();
        let expected = pb::ValidateMoveRequest {
            rules: Some(pb::RuleSet {
                variant: pb::Variant::English as i32,
                options: None,
            }),
            fen: String::new(),
            r#move: Some(pb::MoveInput {
                r#move: Some(pb::move_input::Move::Text("11-15".into())),
            }),
            include_pieces: false,
        };
        assert_eq!(call.request, expected.encode_to_vec());
        assert_eq!(call.path.as_str(), "/draughts.v1.Rules/ValidateMove");
        assert_eq!(call.method, "draughts.v1.Rules/ValidateMove");

        let echo =
            PreparedCall::from_json("/draughts.v1.Diagnostics/Echo", r#"{"payload":"AAE="}"#)
                .unwrap();
        let expected = pb::EchoRequest {
            payload: vec![0, 1],
        };
        assert_eq!(echo.request, expected.encode_to_vec());
    }

    fn error(method: &str, json: &str) -> String {
        PreparedCall::from_json(method, json)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_methods_and_requests_are_refused_with_a_hint() {
        let text = error("draughts.v1.Rules.ValidateMove", "{}");
        assert!(text.contains("expected package.Service/Method"), "{text}");
        let text = error("draughts.v1.Nope/X", "{}");
        assert!(text.contains("draughts.v1.Rules"), "{text}");
        let text = error("draughts.v1.Rules/Validate", "{}");
        assert!(text.contains("ValidateMove"), "{text}");
        let text = error("draughts.v1.Rules/ValidateMove", r#"{"rulez":{}}"#);
        assert!(text.contains("draughts.v1.ValidateMoveRequest"), "{text}");
        assert!(text.contains("rulez"), "{text}");
        let text = error("draughts.v1.Rules/ValidateMove", "{} x");
        assert!(text.contains("not valid proto3 JSON"), "{text}");
    }
}
