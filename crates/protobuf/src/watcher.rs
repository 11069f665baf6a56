//! An informer's list and watch in protobuf, with JSON where the server answers JSON: the same
//! events, states and errors as `kube::runtime::watcher` (list in pages of 500 with the most
//! recent semantics, then watch from the list's resourceVersion with bookmarks, relist after
//! `410 Gone`), so a caller swaps one for the other.
//!
//! Mirrors client-go's reflector over a clientset built with
//! `ContentType: application/vnd.kubernetes.protobuf` (`tools/cache/reflector.go`,
//! `ListAndWatch`; `rest/request.go`, `Request.Watch`): it accepts
//! `application/vnd.kubernetes.protobuf, application/json` and decodes what the server chose,
//! by the response's `Content-Type` (`rest.Request.transformResponse`), so a server without
//! protobuf (an aggregated server, a test server) is read as JSON.

use std::collections::VecDeque;
use std::fmt::Debug;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _};
use http_body_util::BodyExt as _;
use kube::ResourceExt as _;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::core::watch::{Bookmark, BookmarkMeta};
use kube::core::{ObjectList, WatchEvent};
use kube::runtime::watcher::{Error, Event};
use serde::de::DeserializeOwned;

use crate::convert::{self, Wire};
use crate::envelope::{self, EnvelopeError, Frames, Lines};

/// `application/vnd.kubernetes.protobuf`.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// `application/json`.
pub const JSON: &str = "application/json";

/// What an informer asks the server for (`--kube-api-content-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Protobuf, or JSON where the server has no protobuf for the resource.
    Protobuf,
    /// JSON only.
    Json,
}

impl Encoding {
    fn accept(self, watch: bool) -> &'static str {
        match (self, watch) {
            (Encoding::Protobuf, false) => "application/vnd.kubernetes.protobuf, application/json",
            (Encoding::Protobuf, true) => {
                "application/vnd.kubernetes.protobuf;stream=watch, application/json"
            }
            (Encoding::Json, _) => JSON,
        }
    }
}

/// How the informer lists and watches.
#[derive(Debug, Clone)]
pub struct Config {
    /// What to ask for.
    pub encoding: Encoding,
    /// Items per list page (client-go's pager and kube's watcher: 500).
    pub page_size: u32,
    /// The watch's `timeoutSeconds` (kube's default: 290).
    pub timeout_secs: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            encoding: Encoding::Protobuf,
            page_size: 500,
            timeout_secs: 290,
        }
    }
}

/// How the protobuf answers of one resource decode into `K`.
pub trait Codec<K>: Send + Sync + 'static {
    /// An enveloped list.
    fn list(&self, bytes: &[u8]) -> Result<Page<K>, EnvelopeError>;
    /// One enveloped object (a watch event's).
    fn item(&self, bytes: &[u8]) -> Result<K, EnvelopeError>;
}

/// A page of a list: `(resourceVersion, continue, items)`.
pub type Page<K> = (String, String, Vec<K>);

/// The codec of a [`Wire`] type.
#[derive(Debug)]
pub struct Typed<K>(std::marker::PhantomData<fn() -> K>);

impl<K> Default for Typed<K> {
    fn default() -> Self {
        Typed(std::marker::PhantomData)
    }
}

impl<K: Wire + 'static> Codec<K> for Typed<K> {
    fn list(&self, bytes: &[u8]) -> Result<Page<K>, EnvelopeError> {
        convert::decode_list::<K>(bytes)
    }
    fn item(&self, bytes: &[u8]) -> Result<K, EnvelopeError> {
        K::from_pb(envelope::decode::<K::PbItem>(K::KIND, bytes)?)
    }
}

/// How an answer was decoded, by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Protobuf,
    Json,
}

fn answer_of(res: &http::Response<kube::client::Body>) -> Result<Answer, kube::Error> {
    let ct = res
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = ct.split(';').next().unwrap_or("").trim();
    match media {
        PROTOBUF => Ok(Answer::Protobuf),
        JSON | "" => Ok(Answer::Json),
        other => Err(service_error(format!(
            "the server answered {other:?}, neither protobuf nor JSON"
        ))),
    }
}

fn service_error(message: impl Into<String>) -> kube::Error {
    kube::Error::Service(message.into().into())
}

fn decode_error(e: EnvelopeError) -> kube::Error {
    kube::Error::Service(Box::new(e))
}

/// A failed answer as the error kube's client gives for it: the `Status` the server sent, in
/// whichever encoding, or one made from the status line and body.
async fn api_error(res: http::Response<kube::client::Body>) -> kube::Error {
    let code = res.status().as_u16();
    let answer = answer_of(&res).unwrap_or(Answer::Json);
    let bytes = match res.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return e,
    };
    let status = match answer {
        Answer::Protobuf => envelope::decode("Status", &bytes).ok().map(convert::status),
        Answer::Json => serde_json::from_slice::<kube::core::Status>(&bytes).ok(),
    };
    let mut status = status.unwrap_or_else(|| {
        kube::core::Status::failure(
            String::from_utf8_lossy(&bytes).trim(),
            "Failed to parse error data",
        )
    });
    if status.code == 0 {
        status.code = code;
    }
    kube::Error::Api(Box::new(status))
}

async fn get(
    client: &kube::Client,
    uri: String,
    accept: &str,
) -> Result<(Answer, http::Response<kube::client::Body>), kube::Error> {
    let req = http::Request::get(uri)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .map_err(kube::Error::HttpError)?;
    let res = client.send(req).await?;
    if !res.status().is_success() {
        return Err(api_error(res).await);
    }
    Ok((answer_of(&res)?, res))
}

/// A request's query string, `?` included (values percent-encoded: continue tokens are base64
/// with `=`, `+` and `/`).
pub fn query(pairs: &[(&str, &str)]) -> String {
    let mut q = form_urlencoded::Serializer::for_suffix(String::from("?"), 1);
    q.extend_pairs(pairs);
    q.finish()
}

/// One page of a list of `path` (`limit` and `continue` as an informer pages), decoded from
/// whichever encoding the server chose; and whether that was protobuf.
pub async fn list_page<K, C>(
    client: &kube::Client,
    codec: &C,
    path: &str,
    config: &Config,
    continue_token: Option<&str>,
) -> Result<(ObjectList<K>, bool), kube::Error>
where
    K: DeserializeOwned + Clone,
    C: Codec<K>,
{
    let limit = config.page_size.to_string();
    let mut pairs = vec![("limit", limit.as_str())];
    if let Some(c) = continue_token {
        pairs.push(("continue", c));
    }
    let (answer, res) = get(
        client,
        format!("{path}{}", query(&pairs)),
        config.encoding.accept(false),
    )
    .await?;
    let bytes = res.into_body().collect().await?.to_bytes();
    let list = match answer {
        Answer::Protobuf => {
            let (rv, cont, items) = codec.list(&bytes).map_err(decode_error)?;
            ObjectList {
                types: Default::default(),
                metadata: ListMeta {
                    resource_version: Some(rv).filter(|r| !r.is_empty()),
                    continue_: Some(cont).filter(|c| !c.is_empty()),
                    ..Default::default()
                },
                items,
            }
        }
        Answer::Json => serde_json::from_slice(&bytes).map_err(kube::Error::SerdeError)?,
    };
    Ok((list, answer == Answer::Protobuf))
}

/// Every object of `K` in all namespaces, listed page by page as the informer lists them, and
/// whether the server answered every page in protobuf (measurements and tests read it).
pub async fn list_all<K>(
    client: &kube::Client,
    config: &Config,
) -> Result<(Vec<K>, bool), kube::Error>
where
    K: Wire + kube::Resource<DynamicType = ()> + DeserializeOwned + Clone + 'static,
{
    let path = K::url_path(&(), None);
    let codec = Typed::<K>::default();
    let mut out = Vec::new();
    let mut protobuf = true;
    let mut token: Option<String> = None;
    loop {
        let (list, as_protobuf) =
            list_page(client, &codec, &path, config, token.as_deref()).await?;
        protobuf &= as_protobuf;
        out.extend(list.items);
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            None => return Ok((out, protobuf)),
            Some(c) => token = Some(c),
        }
    }
}

/// Decodes one protobuf watch frame (`metav1.WatchEvent`, its object enveloped).
fn decode_frame<K, C: Codec<K>>(codec: &C, frame: &[u8]) -> Result<WatchEvent<K>, EnvelopeError>
where
    K: kube::Resource,
{
    let ev: k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent =
        envelope::message("WatchEvent", frame)?;
    let raw = ev.object.and_then(|o| o.raw).unwrap_or_default();
    match ev.r#type.as_deref().unwrap_or("") {
        "ADDED" => Ok(WatchEvent::Added(codec.item(&raw)?)),
        "MODIFIED" => Ok(WatchEvent::Modified(codec.item(&raw)?)),
        "DELETED" => Ok(WatchEvent::Deleted(codec.item(&raw)?)),
        "BOOKMARK" => Ok(WatchEvent::Bookmark(Bookmark {
            types: Default::default(),
            metadata: BookmarkMeta {
                resource_version: codec.item(&raw)?.resource_version().unwrap_or_default(),
                annotations: Default::default(),
            },
        })),
        "ERROR" => Ok(WatchEvent::Error(Box::new(convert::status(
            envelope::decode("Status", &raw)?,
        )))),
        other => Err(EnvelopeError::Decode {
            what: "WatchEvent",
            message: format!("unknown event type {other:?}"),
        }),
    }
}

/// A watch's events.
pub type Events<K> = BoxStream<'static, Result<WatchEvent<K>, kube::Error>>;

/// A watch of `path` from `rv` with bookmarks and `config.timeout_secs`, decoded from whichever
/// encoding the server chose.
pub async fn watch<K, C>(
    client: &kube::Client,
    codec: Arc<C>,
    path: &str,
    config: &Config,
    rv: &str,
) -> Result<Events<K>, kube::Error>
where
    K: kube::Resource + DeserializeOwned + Clone + Send + 'static,
    C: Codec<K>,
{
    let timeout = config.timeout_secs.to_string();
    let pairs = [
        ("watch", "true"),
        ("resourceVersion", rv),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", timeout.as_str()),
    ];
    let (answer, res) = get(
        client,
        format!("{path}{}", query(&pairs)),
        config.encoding.accept(true),
    )
    .await?;
    let body = res.into_body().into_data_stream();
    Ok(events(body, answer, codec).boxed())
}

/// The events of a watch body, decoded as they arrive.
fn events<K, C, B>(
    body: B,
    answer: Answer,
    codec: Arc<C>,
) -> impl Stream<Item = Result<WatchEvent<K>, kube::Error>> + Send
where
    K: kube::Resource + DeserializeOwned + Clone + Send + 'static,
    C: Codec<K>,
    B: Stream<Item = Result<Bytes, kube::Error>> + Send + Unpin + 'static,
{
    struct Split<B, C> {
        body: B,
        codec: Arc<C>,
        frames: Frames,
        lines: Lines,
        done: bool,
    }
    let split = Split {
        body,
        codec,
        frames: Frames::default(),
        lines: Lines::default(),
        done: false,
    };
    futures::stream::unfold(split, move |mut s| async move {
        loop {
            if s.done {
                return None;
            }
            let next = match answer {
                Answer::Protobuf => s.frames.next_frame().map_err(decode_error).and_then(|f| {
                    f.map(|f| decode_frame::<K, C>(&s.codec, &f).map_err(decode_error))
                        .transpose()
                }),
                Answer::Json => s.lines.next_line().map_err(decode_error).and_then(|l| {
                    l.map(|l| {
                        serde_json::from_slice::<WatchEvent<K>>(&l).map_err(kube::Error::SerdeError)
                    })
                    .transpose()
                }),
            };
            match next {
                Ok(Some(ev)) => return Some((Ok(ev), s)),
                Ok(None) => {}
                Err(e) => {
                    // A stream that does not decode cannot be resynchronised: end it after
                    // the error, and the watcher watches again from its resourceVersion.
                    s.done = true;
                    return Some((Err(e), s));
                }
            }
            match s.body.next().await {
                Some(Ok(bytes)) => match answer {
                    Answer::Protobuf => s.frames.push(&bytes),
                    Answer::Json => s.lines.push(&bytes),
                },
                Some(Err(e)) => {
                    s.done = true;
                    return Some((Err(e), s));
                }
                None => return None,
            }
        }
    })
}

enum State<K: Clone> {
    Empty,
    InitPage {
        continue_token: Option<String>,
        objects: VecDeque<K>,
        last_rv: Option<String>,
    },
    InitListed {
        rv: String,
    },
    Watching {
        rv: String,
        stream: Events<K>,
    },
}

/// The informer's events for every object of `K` in all namespaces: `Init`, `InitApply` for each
/// listed object, `InitDone`, then `Apply` and `Delete` as the watch reports them; errors as
/// `kube::runtime::watcher` gives them (compose with `WatchStreamExt::default_backoff`).
pub fn watcher<K>(
    client: kube::Client,
    config: Config,
) -> impl Stream<Item = Result<Event<K>, Error>> + Send + 'static
where
    K: Wire
        + kube::Resource<DynamicType = ()>
        + DeserializeOwned
        + Clone
        + Debug
        + Send
        + Sync
        + 'static,
{
    let path = K::url_path(&(), None);
    let codec = Arc::new(Typed::<K>::default());
    futures::stream::unfold(
        (client, config, path, codec, State::<K>::Empty),
        |(client, config, path, codec, state)| async move {
            let mut state = state;
            loop {
                let (item, next) = step(&client, &codec, &config, &path, state).await;
                state = next;
                if let Some(item) = item {
                    return Some((item, (client, config, path, codec, state)));
                }
            }
        },
    )
}

async fn step<K, C>(
    client: &kube::Client,
    codec: &Arc<C>,
    config: &Config,
    path: &str,
    state: State<K>,
) -> (Option<Result<Event<K>, Error>>, State<K>)
where
    K: kube::Resource + DeserializeOwned + Clone + Send + 'static,
    C: Codec<K>,
{
    match state {
        State::Empty => (
            Some(Ok(Event::Init)),
            State::InitPage {
                continue_token: None,
                objects: VecDeque::new(),
                last_rv: None,
            },
        ),
        State::InitPage {
            continue_token,
            mut objects,
            last_rv,
        } => {
            if let Some(next) = objects.pop_front() {
                return (
                    Some(Ok(Event::InitApply(next))),
                    State::InitPage {
                        continue_token,
                        objects,
                        last_rv,
                    },
                );
            }
            if continue_token.is_none()
                && let Some(rv) = last_rv
            {
                return (Some(Ok(Event::InitDone)), State::InitListed { rv });
            }
            match list_page(
                client,
                codec.as_ref(),
                path,
                config,
                continue_token.as_deref(),
            )
            .await
            {
                Ok((list, _)) => {
                    let continue_token = list.metadata.continue_.filter(|c| !c.is_empty());
                    let rv = list.metadata.resource_version.filter(|r| !r.is_empty());
                    if rv.is_none() && continue_token.is_none() {
                        return (Some(Err(Error::NoResourceVersion)), State::Empty);
                    }
                    (
                        None,
                        State::InitPage {
                            continue_token,
                            objects: list.items.into(),
                            last_rv: rv,
                        },
                    )
                }
                Err(e) => (Some(Err(Error::InitialListFailed(e))), State::Empty),
            }
        }
        State::InitListed { rv } => match watch(client, codec.clone(), path, config, &rv).await {
            Ok(stream) => (None, State::Watching { rv, stream }),
            Err(e) => (
                Some(Err(Error::WatchStartFailed(e))),
                State::InitListed { rv },
            ),
        },
        State::Watching { rv, mut stream } => match stream.next().await {
            Some(Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj))) => {
                match obj.resource_version().filter(|r| !r.is_empty()) {
                    Some(rv) => (Some(Ok(Event::Apply(obj))), State::Watching { rv, stream }),
                    None => (Some(Err(Error::NoResourceVersion)), State::Empty),
                }
            }
            Some(Ok(WatchEvent::Deleted(obj))) => {
                match obj.resource_version().filter(|r| !r.is_empty()) {
                    Some(rv) => (Some(Ok(Event::Delete(obj))), State::Watching { rv, stream }),
                    None => (Some(Err(Error::NoResourceVersion)), State::Empty),
                }
            }
            Some(Ok(WatchEvent::Bookmark(bookmark))) => {
                let bm = bookmark.metadata.resource_version;
                (
                    None,
                    State::Watching {
                        rv: if bm.is_empty() { rv } else { bm },
                        stream,
                    },
                )
            }
            Some(Ok(WatchEvent::Error(status))) => {
                // 410 Gone: the resourceVersion is too old; list again.
                let next = if status.code == 410 {
                    State::Empty
                } else {
                    State::Watching { rv, stream }
                };
                (Some(Err(Error::WatchError(status))), next)
            }
            Some(Err(e)) => (
                Some(Err(Error::WatchFailed(e))),
                State::Watching { rv, stream },
            ),
            None => (None, State::InitListed { rv }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{frame, wrap};
    use k8s_openapi::api::core::v1::Pod;
    use k8s_pb::api::core::v1 as pb;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
    use k8s_pb::apimachinery::pkg::runtime::RawExtension;
    use prost::Message as _;

    fn pb_pod(name: &str, rv: &str) -> pb::Pod {
        pb::Pod {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn event(ty: &str, raw: Vec<u8>) -> Vec<u8> {
        frame(
            &pb_meta::WatchEvent {
                r#type: Some(ty.into()),
                object: Some(RawExtension { raw: Some(raw) }),
            }
            .encode_to_vec(),
        )
    }

    async fn collect(parts: Vec<Vec<u8>>, answer: Answer) -> Vec<Result<WatchEvent<Pod>, String>> {
        let body = futures::stream::iter(parts.into_iter().map(|p| Ok(Bytes::from(p))));
        events::<Pod, _, _>(body, answer, Arc::new(Typed::<Pod>::default()))
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
            .await
    }

    fn names(evs: &[Result<WatchEvent<Pod>, String>]) -> Vec<String> {
        evs.iter()
            .map(|e| match e {
                Ok(WatchEvent::Added(p)) => format!("ADDED {}", p.name_any()),
                Ok(WatchEvent::Modified(p)) => format!("MODIFIED {}", p.name_any()),
                Ok(WatchEvent::Deleted(p)) => format!("DELETED {}", p.name_any()),
                Ok(WatchEvent::Bookmark(b)) => format!("BOOKMARK {}", b.metadata.resource_version),
                Ok(WatchEvent::Error(s)) => format!("ERROR {}", s.code),
                Err(e) => format!("error: {e}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn protobuf_watch_frames_decode_in_order_however_they_are_split() {
        let mut stream = event("ADDED", wrap("v1", "Pod", &pb_pod("a", "5")));
        stream.extend(event("MODIFIED", wrap("v1", "Pod", &pb_pod("a", "6"))));
        stream.extend(event("BOOKMARK", wrap("v1", "Pod", &pb_pod("", "9"))));
        stream.extend(event("DELETED", wrap("v1", "Pod", &pb_pod("a", "10"))));
        stream.extend(event(
            "ERROR",
            wrap(
                "v1",
                "Status",
                &pb_meta::Status {
                    code: Some(410),
                    reason: Some("Expired".into()),
                    ..Default::default()
                },
            ),
        ));
        let want = [
            "ADDED a",
            "MODIFIED a",
            "BOOKMARK 9",
            "DELETED a",
            "ERROR 410",
        ];
        for size in [1, 3, 7, stream.len()] {
            let parts = stream.chunks(size).map(<[u8]>::to_vec).collect();
            assert_eq!(
                names(&collect(parts, Answer::Protobuf).await),
                want,
                "{size}"
            );
        }
    }

    #[tokio::test]
    async fn a_corrupt_frame_ends_the_stream_with_an_error() {
        let mut stream = event("ADDED", wrap("v1", "Pod", &pb_pod("a", "5")));
        stream.extend(event("ADDED", b"not an envelope".to_vec()));
        stream.extend(event("ADDED", wrap("v1", "Pod", &pb_pod("b", "6"))));
        let got = names(&collect(vec![stream], Answer::Protobuf).await);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], "ADDED a");
        assert!(got[1].contains("prefix"), "{got:?}");
    }

    #[tokio::test]
    async fn json_watch_lines_decode_too() {
        let lines = concat!(
            r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","resourceVersion":"5"}}}"#,
            "\n",
            r#"{"type":"BOOKMARK","object":{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"8"}}}"#,
            "\n",
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"gone","reason":"Expired","code":410}}"#,
            "\n"
        );
        let parts = lines.as_bytes().chunks(10).map(<[u8]>::to_vec).collect();
        assert_eq!(
            names(&collect(parts, Answer::Json).await),
            ["ADDED a", "BOOKMARK 8", "ERROR 410"]
        );
    }

    #[test]
    fn accept_headers_prefer_protobuf_and_take_json() {
        assert_eq!(
            Encoding::Protobuf.accept(false),
            "application/vnd.kubernetes.protobuf, application/json"
        );
        assert!(
            Encoding::Protobuf
                .accept(true)
                .starts_with("application/vnd.kubernetes.protobuf;stream=watch")
        );
        assert_eq!(Encoding::Json.accept(true), "application/json");
        assert_eq!(
            query(&[("limit", "500"), ("continue", "a+b/c=")]),
            "?limit=500&continue=a%2Bb%2Fc%3D"
        );
    }
}
