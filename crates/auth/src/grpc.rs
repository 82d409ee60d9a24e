//! `draughts.v1.Auth` over gRPC: converts, calls the [`Authenticator`], converts back.

use std::sync::Arc;
use std::time::Duration;

use draughts_proto::pb;
use draughts_proto::pb::auth_server::Auth;
use tonic::{Request, Response, Status};

use super::{
    AccountInfo, AuthError, Authenticator, IssuedSession, PersonalTokenInfo, Principal,
    PrincipalKind, Scope, Scopes, api_key_id, client_address, optional_principal, principal,
    require,
};

/// A bot's player id from a request (INVALID_ARGUMENT when malformed).
fn bot_id(player_id: &str) -> Result<draughts_proto::ids::PlayerId, Status> {
    draughts_proto::ids::PlayerId::parse(player_id.trim())
        .map_err(|e| AuthError::InvalidArgument(format!("player_id: {e}")).into())
}

fn bot_limits_to_wire(
    id: &draughts_proto::ids::PlayerId,
    limits: super::BotLimits,
) -> pb::BotLimits {
    pb::BotLimits {
        player_id: id.to_string(),
        max_games: limits.max_games,
        calls_per_minute: limits.calls_per_minute,
        updated_at_ms: limits.updated_at_ms,
    }
}

/// The most finished games `ExportAccountData` puts in its answer.
pub const EXPORT_MAX_GAMES: u32 = 2_000;

/// Where `ExportAccountData` reads a player's finished games: the games service of the process that
/// serves `Auth` (auth keeps no games).
#[tonic::async_trait]
pub trait FinishedGames: Send + Sync + std::fmt::Debug {
    /// The newest `max` finished games of `player` as PDN texts, newest first, and whether there are
    /// more.
    async fn finished_pdn(&self, player: &str, max: u32) -> Result<(Vec<String>, bool), Status>;
}

/// The `Auth` service. Serve it behind [`AuthLayer`](super::AuthLayer) (see
/// [`register_auth`](super::register_auth)): it reads the caller from the request extensions.
#[derive(Clone, Debug)]
pub struct AuthApi {
    auth: Authenticator,
    games: Option<Arc<dyn FinishedGames>>,
}

impl AuthApi {
    pub fn new(auth: Authenticator) -> AuthApi {
        AuthApi { auth, games: None }
    }

    /// The same service, exporting finished games from `games`.
    #[must_use]
    pub fn with_games(mut self, games: Arc<dyn FinishedGames>) -> AuthApi {
        self.games = Some(games);
        self
    }
}

fn session_to_wire(session: IssuedSession) -> pb::Session {
    pb::Session {
        player: Some(player_to_wire(&session.principal)),
        access_token: session.access_token,
        access_expires_at_ms: session.access_expires_at_ms,
        refresh_token: session.refresh_token,
        refresh_expires_at_ms: session.refresh_expires_at_ms,
        username: session.username,
        adopted_guest_id: session.adopted_guest.unwrap_or_default(),
    }
}

/// An account as the API shows it; `bot` from the caller's credential ([`Principal::is_bot`]).
fn account_to_wire(account: AccountInfo, bot: bool) -> pb::Account {
    pb::Account {
        player: Some(pb::Player {
            id: account.player_id,
            display_name: account.display_name,
            guest: false,
            computer: false,
            bot,
        }),
        username: account.username,
        created_at_ms: account.created_at_ms,
        adopted_guest_ids: account.adopted_guests,
    }
}

fn token_to_wire(token: PersonalTokenInfo) -> pb::PersonalToken {
    pb::PersonalToken {
        token_id: token.token_id,
        label: token.label,
        scopes: scopes_to_wire(token.scopes),
        created_at_ms: token.created_at_ms,
        expires_at_ms: token.expires_at_ms,
        last_used_at_ms: token.last_used_at_ms,
    }
}

fn player_to_wire(p: &Principal) -> pb::Player {
    pb::Player {
        id: p.player_id.clone(),
        display_name: p.display_name.clone(),
        guest: p.kind == PrincipalKind::Guest,
        computer: false,
        bot: p.is_bot(),
    }
}

fn kind_to_wire(kind: PrincipalKind) -> pb::PrincipalKind {
    match kind {
        PrincipalKind::Guest => pb::PrincipalKind::Guest,
        PrincipalKind::Player => pb::PrincipalKind::Player,
        PrincipalKind::ApiKey => pb::PrincipalKind::ApiKey,
        PrincipalKind::Account => pb::PrincipalKind::Account,
    }
}

fn scope_to_wire(scope: Scope) -> pb::AuthScope {
    match scope {
        Scope::Play => pb::AuthScope::Play,
        Scope::Analysis => pb::AuthScope::Analysis,
        Scope::Admin => pb::AuthScope::Admin,
        Scope::Service => pb::AuthScope::Service,
        Scope::Bot => pb::AuthScope::Bot,
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
            Ok(pb::AuthScope::Service) => Ok(Scope::Service),
            Ok(pb::AuthScope::Bot) => Ok(Scope::Bot),
            Ok(pb::AuthScope::Unspecified) | Err(_) => Err(AuthError::InvalidArgument(format!(
                "scopes: {value} is not a scope (PLAY, ANALYSIS, ADMIN, SERVICE or BOT)"
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

    #[tracing::instrument(skip_all)]
    async fn sign_up(
        &self,
        req: Request<pb::SignUpRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let caller = optional_principal(&req);
        let address = client_address(&req);
        let r = req.into_inner();
        let session = self
            .auth
            .sign_up(
                caller.as_ref(),
                &address,
                &r.username,
                &r.password,
                &r.display_name,
            )
            .await?;
        Ok(Response::new(session_to_wire(session)))
    }

    #[tracing::instrument(skip_all)]
    async fn sign_in(
        &self,
        req: Request<pb::SignInRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let address = client_address(&req);
        let r = req.into_inner();
        let session = self
            .auth
            .sign_in(&address, &r.username, &r.password)
            .await?;
        Ok(Response::new(session_to_wire(session)))
    }

    #[tracing::instrument(skip_all)]
    async fn refresh_session(
        &self,
        req: Request<pb::RefreshSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let session = self
            .auth
            .refresh_session(&req.get_ref().refresh_token)
            .await?;
        Ok(Response::new(session_to_wire(session)))
    }

    #[tracing::instrument(skip_all)]
    async fn sign_out(
        &self,
        req: Request<pb::SignOutRequest>,
    ) -> Result<Response<pb::SignOutResponse>, Status> {
        let signed_out = self.auth.sign_out(&req.get_ref().refresh_token).await?;
        Ok(Response::new(pb::SignOutResponse { signed_out }))
    }

    #[tracing::instrument(skip_all)]
    async fn change_password(
        &self,
        req: Request<pb::ChangePasswordRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let caller = principal(&req)?;
        let address = client_address(&req);
        let r = req.into_inner();
        let session = self
            .auth
            .change_password(&caller, &address, &r.current_password, &r.new_password)
            .await?;
        Ok(Response::new(session_to_wire(session)))
    }

    #[tracing::instrument(skip_all)]
    async fn update_account(
        &self,
        req: Request<pb::UpdateAccountRequest>,
    ) -> Result<Response<pb::Account>, Status> {
        let caller = principal(&req)?;
        let account = self
            .auth
            .update_display_name(&caller, &req.get_ref().display_name)
            .await?;
        Ok(Response::new(account_to_wire(account, caller.is_bot())))
    }

    #[tracing::instrument(skip_all)]
    async fn become_bot(
        &self,
        req: Request<pb::BecomeBotRequest>,
    ) -> Result<Response<pb::Account>, Status> {
        let caller = principal(&req)?;
        if caller.kind != PrincipalKind::Account {
            return Err(AuthError::NotAnAccount.into());
        }
        if !caller.is_bot() {
            // The rule: never after a finished game (its opponents played a person), as on lichess.
            let Some(games) = &self.games else {
                return Err(AuthError::Refused(
                    "this server cannot read the account's games, so it cannot make it a bot"
                        .into(),
                )
                .into());
            };
            let (played, _) = games.finished_pdn(&caller.player_id, 1).await?;
            if !played.is_empty() {
                return Err(AuthError::Refused(
                    "an account that has played games cannot become a bot".into(),
                )
                .into());
            }
            self.auth.become_bot(&caller).await?;
        }
        Ok(Response::new(account_to_wire(
            self.auth.account(&caller).await?,
            true,
        )))
    }

    #[tracing::instrument(skip_all)]
    async fn set_bot_limits(
        &self,
        req: Request<pb::SetBotLimitsRequest>,
    ) -> Result<Response<pb::BotLimits>, Status> {
        let caller = principal(&req)?;
        require(&caller, Scope::Admin)?;
        let r = req.into_inner();
        let id = bot_id(&r.player_id)?;
        let limits = self
            .auth
            .set_bot_limits(&id, r.max_games, r.calls_per_minute)
            .await?;
        tracing::info!(
            player_id = %id,
            by = %caller.player_id,
            max_games = limits.max_games,
            calls_per_minute = limits.calls_per_minute,
            "bot limits set"
        );
        Ok(Response::new(bot_limits_to_wire(&id, limits)))
    }

    #[tracing::instrument(skip_all)]
    async fn get_bot_limits(
        &self,
        req: Request<pb::GetBotLimitsRequest>,
    ) -> Result<Response<pb::BotLimits>, Status> {
        require(&principal(&req)?, Scope::Admin)?;
        let id = bot_id(&req.get_ref().player_id)?;
        let limits = self.auth.bot_limits(&id).await?;
        Ok(Response::new(bot_limits_to_wire(&id, limits)))
    }

    #[tracing::instrument(skip_all)]
    async fn get_account(
        &self,
        req: Request<pb::GetAccountRequest>,
    ) -> Result<Response<pb::Account>, Status> {
        let caller = principal(&req)?;
        Ok(Response::new(account_to_wire(
            self.auth.account(&caller).await?,
            caller.is_bot(),
        )))
    }

    #[tracing::instrument(skip_all)]
    async fn delete_account(
        &self,
        req: Request<pb::DeleteAccountRequest>,
    ) -> Result<Response<pb::DeleteAccountResponse>, Status> {
        let caller = principal(&req)?;
        let address = client_address(&req);
        let player_id = self
            .auth
            .delete_account(&caller, &address, &req.get_ref().password)
            .await?;
        Ok(Response::new(pb::DeleteAccountResponse { player_id }))
    }

    #[tracing::instrument(skip_all)]
    async fn export_account_data(
        &self,
        req: Request<pb::ExportAccountDataRequest>,
    ) -> Result<Response<pb::ExportAccountDataResponse>, Status> {
        let caller = principal(&req)?;
        self.auth.count_export(&caller).await?;
        let account = match caller.kind {
            PrincipalKind::Account => Some(account_to_wire(
                self.auth.account(&caller).await?,
                caller.is_bot(),
            )),
            _ => None,
        };
        let (pdns, truncated) = match &self.games {
            Some(games) => {
                games
                    .finished_pdn(&caller.player_id, EXPORT_MAX_GAMES)
                    .await?
            }
            None => (Vec::new(), false),
        };
        Ok(Response::new(pb::ExportAccountDataResponse {
            account,
            player: Some(player_to_wire(&caller)),
            games: pdns.len() as u32,
            pdn: pdns.join("\n"),
            truncated,
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn create_personal_token(
        &self,
        req: Request<pb::CreatePersonalTokenRequest>,
    ) -> Result<Response<pb::CreatePersonalTokenResponse>, Status> {
        let caller = principal(&req)?;
        let r = req.into_inner();
        let scopes = scopes_from_wire(&r.scopes)?;
        let lifetime = (r.expires_in_secs > 0).then(|| Duration::from_secs(r.expires_in_secs));
        let (token, info) = self
            .auth
            .create_personal_token(&caller, &r.label, scopes, lifetime)
            .await?;
        Ok(Response::new(pb::CreatePersonalTokenResponse {
            token,
            info: Some(token_to_wire(info)),
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn list_personal_tokens(
        &self,
        req: Request<pb::ListPersonalTokensRequest>,
    ) -> Result<Response<pb::ListPersonalTokensResponse>, Status> {
        let caller = principal(&req)?;
        let tokens = self.auth.list_personal_tokens(&caller).await?;
        Ok(Response::new(pb::ListPersonalTokensResponse {
            tokens: tokens.into_iter().map(token_to_wire).collect(),
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn revoke_personal_token(
        &self,
        req: Request<pb::RevokePersonalTokenRequest>,
    ) -> Result<Response<pb::RevokePersonalTokenResponse>, Status> {
        let caller = principal(&req)?;
        let revoked = self
            .auth
            .revoke_personal_token(&caller, &req.get_ref().token_id)
            .await?;
        Ok(Response::new(pb::RevokePersonalTokenResponse { revoked }))
    }
}
