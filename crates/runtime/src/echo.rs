//! `draughts.v1.Diagnostics`: a bare echo, served by every host as the baseline of load measurements.

use draughts_proto::pb;
use draughts_proto::pb::diagnostics_server::Diagnostics;
use tonic::{Request, Response, Status};

#[derive(Debug, Default, Clone)]
pub struct EchoService;

#[tonic::async_trait]
impl Diagnostics for EchoService {
    async fn echo(
        &self,
        req: Request<pb::EchoRequest>,
    ) -> Result<Response<pb::EchoResponse>, Status> {
        Ok(Response::new(pb::EchoResponse {
            payload: req.into_inner().payload,
        }))
    }
}
