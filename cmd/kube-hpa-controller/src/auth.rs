//! Delegated authentication and authorization of the secure serving endpoints, as
//! kube-controller-manager does them.
//!
//! Mirrors apiserver's `DelegatingAuthenticationOptions` / `DelegatingAuthorizationOptions`
//! (`staging/src/k8s.io/apiserver/pkg/server/options/authentication.go`, `authorization.go`),
//! the webhook token authenticator and SubjectAccessReview authorizer with their caches
//! (`plugin/pkg/authenticator/token/webhook`, `plugin/pkg/authorizer/webhook`,
//! `pkg/authentication/token/cache`), the bearer-token, anonymous and authenticated-group
//! authenticators, the always-allow path and group authorizers (`authorizerfactory`), and the
//! answers of the `WithAuthentication` / `WithAuthorization` filters
//! (`endpoints/filters`, `handlers/responsewriters`).
//!
//! Order, as in the apiserver's handler chain: authenticate first (no bearer token: the
//! anonymous user `system:anonymous`; a token the TokenReview rejects, or a failed review:
//! 401 `Unauthorized`), then authorize (group `system:masters` and the
//! `--authorization-always-allow-paths` are allowed without asking; otherwise a
//! SubjectAccessReview on the non-resource URL with the lowercased method as verb; not
//! allowed: 403 `forbidden: User "..." cannot get path "/metrics"`; a failed review: 500).
//! So a request without a token to `/metrics` is answered 403 (for `system:anonymous`), not
//! 401, exactly as kube-controller-manager answers it. TokenReview answers are cached 10 s
//! (accepted and rejected alike), SubjectAccessReview answers 10 s (allowed and denied);
//! errors are not cached. Tokens are never logged.
//!
//! With an empty `--authentication-kubeconfig` the in-cluster configuration is used when
//! available, else every request is anonymous; with an empty `--authorization-kubeconfig`
//! likewise, else every request not always-allowed is forbidden (KCM's
//! `RemoteKubeConfigFileOptional`). Both review clients run at the delegating options' rate
//! (200 QPS, burst 400) with a 10 s timeout, do not retry failed reviews (upstream retries
//! with a short backoff), and report no `rest_client_*` metrics.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use crate::client::{ClientError, TokioClock, client_from_config};

/// The anonymous user's name.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The anonymous user's group.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The group added to every authenticated, non-anonymous user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// Groups allowed without a SubjectAccessReview (`AlwaysAllowGroups` default).
pub const ALWAYS_ALLOW_GROUPS: &[&str] = &["system:masters"];
/// How long a TokenReview answer is kept (`--authentication-token-webhook-cache-ttl`).
pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(10);
/// How long an allowing SubjectAccessReview answer is kept.
pub const ALLOW_CACHE_TTL: Duration = Duration::from_secs(10);
/// How long a denying SubjectAccessReview answer is kept.
pub const DENY_CACHE_TTL: Duration = Duration::from_secs(10);
/// Time limit of one review request (`ClientTimeout`, `TokenRequestTimeout`).
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Entries kept per cache before expired ones are swept.
const CACHE_SWEEP_AT: usize = 1024;

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name.
    pub name: String,
    /// The user's UID, if any.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS_USER.to_string(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED_GROUP.to_string()],
            extra: BTreeMap::new(),
        }
    }
}

/// Why delegated auth could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A review kubeconfig cannot be read or used (the delegating options' words).
    #[error("failed to get delegated {what} kubeconfig: {source}")]
    Kubeconfig {
        /// `authentication` or `authorization`.
        what: &'static str,
        /// What kube's loader said.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A review client could not be built from its configuration.
    #[error("{flag}: {source}")]
    Client {
        /// The flag naming the kubeconfig.
        flag: &'static str,
        /// What went wrong.
        #[source]
        source: ClientError,
    },
    /// A `--authorization-always-allow-paths` entry has a `*` other than at its end.
    #[error("only trailing * allowed in {0:?}")]
    Path(String),
}

/// Outcome of authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authn {
    /// The request's user.
    User(UserInfo),
    /// The token was rejected or could not be reviewed: 401.
    Unauthorized,
}

/// Outcome of authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authz {
    /// Allowed.
    Allow,
    /// Not allowed, with the reviewer's reason (may be empty): 403.
    Forbidden(String),
    /// The review failed: 500.
    Error(String),
}

/// An entry with its expiry (tokio time, so paused-time tests can step it).
#[derive(Debug, Clone)]
struct Cached<T> {
    value: T,
    until: tokio::time::Instant,
}

#[derive(Debug)]
struct TtlCache<K, V> {
    map: Mutex<HashMap<K, Cached<V>>>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        TtlCache {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let map = self.map.lock().ok()?;
        let e = map.get(key)?;
        (tokio::time::Instant::now() < e.until).then(|| e.value.clone())
    }

    fn put(&self, key: K, value: V, ttl: Duration) {
        let Ok(mut map) = self.map.lock() else {
            return;
        };
        let now = tokio::time::Instant::now();
        if map.len() >= CACHE_SWEEP_AT {
            map.retain(|_, e| e.until > now);
        }
        map.insert(
            key,
            Cached {
                value,
                until: now + ttl,
            },
        );
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SarKey {
    user: String,
    uid: String,
    groups: Vec<String>,
    extra: Vec<(String, Vec<String>)>,
    verb: String,
    path: String,
}

/// The always-allow path authorizer (`authorizerfactory.NewPathAuthorizer`): exact paths,
/// and prefixes for entries ending in `*`, compared without the leading `/`.
#[derive(Debug, Clone, Default)]
pub struct AlwaysAllowPaths {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl AlwaysAllowPaths {
    /// Parses the flag's entries.
    pub fn new(paths: &[String]) -> Result<Self, AuthError> {
        let mut out = AlwaysAllowPaths::default();
        for p in paths {
            let p = p.strip_prefix('/').unwrap_or(p);
            if let Some(prefix) = p.strip_suffix('*') {
                if prefix.contains('*') {
                    return Err(AuthError::Path(p.to_string()));
                }
                out.prefixes.push(prefix.to_string());
            } else if p.contains('*') {
                return Err(AuthError::Path(p.to_string()));
            } else {
                out.exact.push(p.to_string());
            }
        }
        Ok(out)
    }

    /// Whether `path` is always allowed.
    pub fn allows(&self, path: &str) -> bool {
        let p = path.strip_prefix('/').unwrap_or(path);
        self.exact.iter().any(|e| e == p) || self.prefixes.iter().any(|pre| p.starts_with(pre))
    }
}

/// Delegated authentication and authorization for the serving endpoints.
pub struct DelegatingAuth {
    authn: Option<kube::Client>,
    authz: Option<kube::Client>,
    always_allow: AlwaysAllowPaths,
    tokens: TtlCache<String, Authn>,
    decisions: TtlCache<SarKey, Authz>,
}

impl std::fmt::Debug for DelegatingAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatingAuth")
            .field("token_reviews", &self.authn.is_some())
            .field("subject_access_reviews", &self.authz.is_some())
            .field("always_allow", &self.always_allow)
            .finish_non_exhaustive()
    }
}

impl DelegatingAuth {
    /// Delegates to the given API clients (`None`: every request anonymous / every request
    /// not always-allowed forbidden).
    pub fn new(
        authn: Option<kube::Client>,
        authz: Option<kube::Client>,
        always_allow: AlwaysAllowPaths,
    ) -> Self {
        DelegatingAuth {
            authn,
            authz,
            always_allow,
            tokens: TtlCache::new(),
            decisions: TtlCache::new(),
        }
    }

    /// Builds the review clients from `--authentication-kubeconfig`,
    /// `--authorization-kubeconfig` (in-cluster when empty and available) and the always-allow
    /// paths.
    pub async fn from_flags(flags: &hpa_config::options::AuthFlags) -> Result<Self, AuthError> {
        let always_allow = AlwaysAllowPaths::new(&flags.authorization_always_allow_paths)?;
        let authn = review_client(
            "authentication",
            "--authentication-kubeconfig",
            &flags.authentication_kubeconfig,
        )
        .await?;
        if authn.is_none() {
            tracing::warn!(
                "No authentication-kubeconfig provided, so TokenReview of bearer tokens won't work: every request is anonymous."
            );
        }
        let authz = review_client(
            "authorization",
            "--authorization-kubeconfig",
            &flags.authorization_kubeconfig,
        )
        .await?;
        if authz.is_none() {
            tracing::warn!(
                "No authorization-kubeconfig provided, so SubjectAccessReview of authorization tokens won't work."
            );
        }
        Ok(DelegatingAuth::new(authn, authz, always_allow))
    }

    /// Authenticates the request's bearer token (anonymous without one).
    pub async fn authenticate(&self, headers: &HeaderMap) -> Authn {
        let Some(token) = bearer_token(headers) else {
            return Authn::User(UserInfo::anonymous());
        };
        let Some(client) = &self.authn else {
            // No token authenticator: the request falls through to the anonymous one.
            return Authn::User(UserInfo::anonymous());
        };
        if let Some(hit) = self.tokens.get(&token) {
            return hit;
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.clone(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(client.clone());
        match api.create(&PostParams::default(), &review).await {
            Ok(answer) => {
                let status = answer.status.unwrap_or_default();
                let outcome = match (status.authenticated, status.user) {
                    (Some(true), Some(u)) => {
                        let mut groups = u.groups.unwrap_or_default();
                        if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
                            groups.push(AUTHENTICATED_GROUP.to_string());
                        }
                        Authn::User(UserInfo {
                            name: u.username.unwrap_or_default(),
                            uid: u.uid.unwrap_or_default(),
                            groups,
                            extra: u.extra.unwrap_or_default(),
                        })
                    }
                    _ => {
                        if let Some(e) = status.error.filter(|e| !e.is_empty()) {
                            // Upstream's authentication filter logs nothing for a rejected
                            // token; this detail is here at V(4).
                            crate::v!(4, error = %e, "token review rejected the bearer token");
                        }
                        Authn::Unauthorized
                    }
                };
                self.tokens.put(token, outcome.clone(), TOKEN_CACHE_TTL);
                outcome
            }
            Err(e) => {
                tracing::error!(error = %e, "Unable to authenticate the request");
                Authn::Unauthorized
            }
        }
    }

    /// Authorizes `user` for the non-resource request `method path`.
    pub async fn authorize(&self, user: &UserInfo, method: &Method, path: &str) -> Authz {
        if user
            .groups
            .iter()
            .any(|g| ALWAYS_ALLOW_GROUPS.contains(&g.as_str()))
            || self.always_allow.allows(path)
        {
            return Authz::Allow;
        }
        let Some(client) = &self.authz else {
            return Authz::Forbidden(String::new());
        };
        let verb = method.as_str().to_lowercase();
        let key = SarKey {
            user: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user
                .extra
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            verb: verb.clone(),
            path: path.to_string(),
        };
        if let Some(hit) = self.decisions.get(&key) {
            return hit;
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(client.clone());
        match api.create(&PostParams::default(), &review).await {
            Ok(answer) => {
                let status = answer.status.unwrap_or_default();
                if status.allowed {
                    self.decisions.put(key, Authz::Allow, ALLOW_CACHE_TTL);
                    Authz::Allow
                } else {
                    let outcome = Authz::Forbidden(status.reason.unwrap_or_default());
                    self.decisions.put(key, outcome.clone(), DENY_CACHE_TTL);
                    outcome
                }
            }
            Err(e) => Authz::Error(e.to_string()),
        }
    }

    /// Runs both steps for a request; `Err` is the answer to send instead of serving it.
    pub async fn check(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<UserInfo, Response> {
        let user = match self.authenticate(headers).await {
            Authn::User(u) => u,
            Authn::Unauthorized => return Err(unauthorized()),
        };
        match self.authorize(&user, method, path).await {
            Authz::Allow => Ok(user),
            Authz::Forbidden(reason) => {
                crate::v!(4, uri = path, reason = %reason, "Forbidden");
                Err(forbidden(&user, method, path, &reason))
            }
            Authz::Error(e) => {
                tracing::error!(error = %e, "authorization failed");
                Err(internal_error(path, &e))
            }
        }
    }
}

async fn review_client(
    what: &'static str,
    flag: &'static str,
    kubeconfig: &str,
) -> Result<Option<kube::Client>, AuthError> {
    let mut config = if kubeconfig.is_empty() {
        match kube::Config::incluster() {
            Ok(c) => c,
            Err(_) => return Ok(None),
        }
    } else {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .map_err(|source| AuthError::Kubeconfig { what, source })?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|source| AuthError::Kubeconfig { what, source })?
    };
    // The delegating options' 10 s client timeout.
    config.read_timeout = Some(REVIEW_TIMEOUT);
    client_from_config(config, Some((200.0, 400)), None, TokioClock::new())
        .map(Some)
        .map_err(|source| AuthError::Client { flag, source })
}

/// The bearer token of `Authorization: Bearer <token>` (`bearertoken.Authenticator`).
pub fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let mut parts = value.trim().splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
}

fn status_response(code: StatusCode, reason: &str, message: &str) -> Response {
    let mut body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    if code == StatusCode::FORBIDDEN
        && let Some(obj) = body.as_object_mut()
    {
        obj.insert("details".into(), serde_json::json!({}));
    }
    let mut resp = (code, body.to_string()).into_response();
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// The 401 answer (`apierrors.NewUnauthorized("Unauthorized")` as a Status).
pub fn unauthorized() -> Response {
    status_response(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
}

/// The message of a 403 for a non-resource request (`responsewriters.Forbidden` with
/// `apierrors.NewForbidden` of no resource: `forbidden: User "u" cannot get path "/p"`,
/// then `: <reason>` when the reviewer gave one).
pub fn forbidden_message(user: &UserInfo, method: &Method, path: &str, reason: &str) -> String {
    // Go's %q, then the sanitizer that keeps the text from looking like HTML.
    let mut msg = format!(
        "User {:?} cannot {} path {:?}",
        user.name,
        method.as_str().to_lowercase(),
        path
    )
    .replace('&', "&amp;")
    .replace('<', "&lt;")
    .replace('>', "&gt;");
    if !reason.is_empty() {
        msg.push_str(": ");
        msg.push_str(reason);
    }
    format!("forbidden: {msg}")
}

/// The 403 answer (`apierrors.NewForbidden` as a Status).
pub fn forbidden(user: &UserInfo, method: &Method, path: &str, reason: &str) -> Response {
    status_response(
        StatusCode::FORBIDDEN,
        "Forbidden",
        &forbidden_message(user, method, path, reason),
    )
}

/// The 500 answer of a failed review (`responsewriters.InternalError`).
pub fn internal_error(path: &str, err: &str) -> Response {
    let mut resp = (
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("Internal Server Error: {path:?}: {err}\n"),
    )
        .into_response();
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_token_forms() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(
                http::header::AUTHORIZATION,
                HeaderValue::from_str(v).unwrap(),
            );
            m
        };
        assert_eq!(bearer_token(&h("Bearer abc")), Some("abc".into()));
        assert_eq!(bearer_token(&h("bearer abc")), Some("abc".into()));
        assert_eq!(bearer_token(&h("Basic abc")), None);
        assert_eq!(bearer_token(&h("Bearer")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn always_allow_paths_match_like_path_authorizer() {
        let p = AlwaysAllowPaths::new(&["/healthz".into(), "/readyz".into(), "/debug/*".into()])
            .unwrap();
        assert!(p.allows("/healthz"));
        assert!(!p.allows("/healthz/ping"));
        assert!(p.allows("/debug/pprof/heap"));
        assert!(!p.allows("/metrics"));
        assert!(matches!(
            AlwaysAllowPaths::new(&["/a*b".into()]),
            Err(AuthError::Path(_))
        ));
    }

    #[test]
    fn forbidden_text_follows_responsewriters() {
        assert_eq!(
            forbidden_message(&UserInfo::anonymous(), &Method::GET, "/metrics", ""),
            r#"forbidden: User "system:anonymous" cannot get path "/metrics""#
        );
        assert_eq!(
            forbidden_message(&UserInfo::anonymous(), &Method::GET, "/metrics", "no rule"),
            r#"forbidden: User "system:anonymous" cannot get path "/metrics": no rule"#
        );
    }

    #[tokio::test]
    async fn without_review_clients_anonymous_is_forbidden_except_allowed_paths() {
        let auth = DelegatingAuth::new(
            None,
            None,
            AlwaysAllowPaths::new(&["/healthz".into()]).unwrap(),
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer secret"),
        );
        assert_eq!(
            auth.authenticate(&headers).await,
            Authn::User(UserInfo::anonymous())
        );
        assert!(auth.check(&Method::GET, "/healthz", &headers).await.is_ok());
        let resp = auth
            .check(&Method::GET, "/metrics", &headers)
            .await
            .unwrap_err();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    }
}
