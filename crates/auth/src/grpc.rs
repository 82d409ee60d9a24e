//! `draughts.v1.Auth` over gRPC: converts, calls the [`Authenticator`], converts back.

use std::time::Duration;

use draughts_proto::pb;
use draughts_proto::pb::auth_server::Auth;
use tonic::{Request, Response, Status};

use super::{
    AuthError, Authenticator, Principal, PrincipalKind, Scope, Scopes, api_key_id, principal,
    require,
};

/// The `Auth` service. Serve it behind [`AuthLayer`](super::AuthLayer) (see
/// [`register_auth`](super::register_auth)): it reads the caller from the request extensions.
#[derive(Clone, Debug)]
pub struct AuthApi {
    auth: Authenticator,
}

impl AuthApi {
    pub fn new(auth: Authenticator) -> AuthApi {
        AuthApi { auth }
    }
}

fn player_to_wire(p: &Principal) -> pb::Player {
    pb::Player {
        id: p.player_id.clone(),
        display_name: p.display_name.clone(),
        guest: p.kind == PrincipalKind::Guest,
        computer: false,
    }
}

fn kind_to_wire(kind: PrincipalKind) -> pb::PrincipalKind {
    match kind {
        PrincipalKind::Guest => pb::PrincipalKind::Guest,
        PrincipalKind::Player => pb::PrincipalKind::Player,
        PrincipalKind::ApiKey => pb::PrincipalKind::ApiKey,
    }
}

fn scope_to_wire(scope: Scope) -> pb::AuthScope {
    match scope {
        Scope::Play => pb::AuthScope::Play,
        Scope::Analysis => pb::AuthScope::Analysis,
        Scope::Admin => pb::AuthScope::Admin,
    }
}

fn scopes_to_wire(scopes: Scopes) -> Vec<i32> {
    scopes.iter().map(|s| scope_to_wire(s) as i32).collect()
}

fn scopes_from_wire(values: &[i32]) -> Result<Scopes, AuthError> {
    values
        .iter()
        .map(|value| match pb::AuthScope::try_from(*value) {
            Ok(pb::AuthScope::Play) => Ok(Scope::Play),
            Ok(pb::AuthScope::Analysis) => Ok(Scope::Analysis),
            Ok(pb::AuthScope::Admin) => Ok(Scope::Admin),
            Ok(pb::AuthScope::Unspecified) | Err(_) => Err(AuthError::InvalidArgument(format!(
                "scopes: {value} is not a scope (PLAY, ANALYSIS or ADMIN)"
            ))),
        })
        .collect()
}

#[tonic::async_trait]
impl Auth for AuthApi {
    #[tracing::instrument(skip_all)]
    async fn create_guest(
        &self,
        req: Request<pb::CreateGuestRequest>,
    ) -> Result<Response<pb::CreateGuestResponse>, Status> {
        let guest = self.auth.create_guest(&req.get_ref().display_name).await?;
        Ok(Response::new(pb::CreateGuestResponse {
            token: guest.token,
            player: Some(player_to_wire(&guest.principal)),
            expires_at_ms: guest.expires_at_ms,
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn who_am_i(
        &self,
        req: Request<pb::WhoAmIRequest>,
    ) -> Result<Response<pb::WhoAmIResponse>, Status> {
        let caller = principal(&req)?;
        Ok(Response::new(pb::WhoAmIResponse {
            player: Some(player_to_wire(&caller)),
            kind: kind_to_wire(caller.kind) as i32,
            scopes: scopes_to_wire(caller.scopes),
        }))
    }

    #[tracing::instrument(skip_all, fields(key_id))]
    async fn create_api_key(
        &self,
        req: Request<pb::CreateApiKeyRequest>,
    ) -> Result<Response<pb::CreateApiKeyResponse>, Status> {
        require(&principal(&req)?, Scope::Admin)?;
        let req = req.into_inner();
        let scopes = scopes_from_wire(&req.scopes)?;
        let limit = (req.rate_limit_per_minute > 0).then_some(req.rate_limit_per_minute);
        let lifetime = (req.expires_in_secs > 0).then(|| Duration::from_secs(req.expires_in_secs));
        let (key, expires_at_ms) = self
            .auth
            .create_api_key(&req.owner, scopes, limit, lifetime)
            .await?;
        let key_id = api_key_id(&key);
        tracing::Span::current().record("key_id", key_id.as_str());
        Ok(Response::new(pb::CreateApiKeyResponse {
            key,
            key_id,
            owner: req.owner,
            scopes: scopes_to_wire(scopes),
            expires_at_ms,
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn link_guest(
        &self,
        req: Request<pb::LinkGuestRequest>,
    ) -> Result<Response<pb::LinkGuestResponse>, Status> {
        let caller = principal(&req)?;
        let (guest_id, linked_now) = self
            .auth
            .link_guest(&caller, &req.get_ref().guest_token)
            .await?;
        Ok(Response::new(pb::LinkGuestResponse {
            guest_id,
            player_id: caller.player_id,
            linked_now,
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn revoke_api_key(
        &self,
        req: Request<pb::RevokeApiKeyRequest>,
    ) -> Result<Response<pb::RevokeApiKeyResponse>, Status> {
        require(&principal(&req)?, Scope::Admin)?;
        let revoked = self.auth.revoke_api_key(&req.get_ref().key_id).await?;
        Ok(Response::new(pb::RevokeApiKeyResponse { revoked }))
    }
}
