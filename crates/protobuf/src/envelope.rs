//! The protobuf envelope of one object and the frames of a protobuf watch stream. Pure: no I/O.
//!
//! Mirrors `k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go` (`Serializer.Decode`:
//! the four-byte prefix `k8s\0`, then a `runtime.Unknown` whose `raw` holds the object's own
//! message) and `k8s.io/apimachinery/pkg/util/framer/framer.go` (`lengthDelimitedFrameReader`:
//! each watch event is a big-endian `uint32` length, then that many bytes of a
//! `metav1.WatchEvent`, itself without the prefix; its `object.raw` is an enveloped object).

use bytes::{Buf, BytesMut};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;

/// The prefix of every protobuf-encoded object (`protobuf.go`'s `protoEncodingPrefix`).
pub const MAGIC: [u8; 4] = [0x6b, 0x38, 0x73, 0x00];

/// The largest watch frame accepted: client-go's framer refuses frames past its buffer the same
/// way (a frame this large means a corrupt stream, not an object).
pub const MAX_FRAME: usize = 64 << 20;

/// Why bytes did not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvelopeError {
    /// The bytes do not start with `k8s\0`.
    #[error("not a protobuf-encoded Kubernetes object: the prefix is not \"k8s\\0\"")]
    Prefix,
    /// The `runtime.Unknown` or the object inside it is not valid protobuf.
    #[error("decoding {what}: {message}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// prost's reason.
        message: String,
    },
    /// The envelope names another kind than the one asked for.
    #[error("expected kind {expected:?}, got {got:?}")]
    Kind {
        /// The kind expected.
        expected: &'static str,
        /// The kind in the envelope.
        got: String,
    },
    /// A compressed or otherwise encoded payload (`contentEncoding`), which no API server sends.
    #[error("unsupported content encoding {0:?}")]
    Encoding(String),
    /// A watch frame longer than [`MAX_FRAME`].
    #[error("watch frame of {0} bytes is larger than the {MAX_FRAME} accepted")]
    FrameTooLarge(usize),
}

/// Decodes a prost message, naming what it was.
pub fn message<M: Message + Default>(what: &'static str, bytes: &[u8]) -> Result<M, EnvelopeError> {
    M::decode(bytes).map_err(|e| EnvelopeError::Decode {
        what,
        message: e.to_string(),
    })
}

/// Opens an enveloped object: checks the prefix, decodes the `runtime.Unknown` and returns its
/// kind (empty when not set) and raw message bytes.
pub fn open(bytes: &[u8]) -> Result<(String, Vec<u8>), EnvelopeError> {
    let body = bytes.strip_prefix(&MAGIC).ok_or(EnvelopeError::Prefix)?;
    let unknown: Unknown = message("runtime.Unknown", body)?;
    if let Some(enc) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        return Err(EnvelopeError::Encoding(enc));
    }
    let kind = unknown.type_meta.and_then(|t| t.kind).unwrap_or_default();
    Ok((kind, unknown.raw.unwrap_or_default()))
}

/// Opens an enveloped object of `kind` and returns its raw message bytes. An envelope without
/// a kind is accepted (the API server always sets one; a missing one says nothing against the
/// bytes).
pub fn open_kind(kind: &'static str, bytes: &[u8]) -> Result<Vec<u8>, EnvelopeError> {
    let (got, raw) = open(bytes)?;
    if !got.is_empty() && got != kind {
        return Err(EnvelopeError::Kind {
            expected: kind,
            got,
        });
    }
    Ok(raw)
}

/// Opens an enveloped object of `kind` ([`open_kind`]) and decodes it as `M`.
pub fn decode<M: Message + Default>(kind: &'static str, bytes: &[u8]) -> Result<M, EnvelopeError> {
    message(kind, &open_kind(kind, bytes)?)
}

/// Splits a protobuf watch stream into frames as its bytes arrive.
#[derive(Debug, Default)]
pub struct Frames {
    buf: BytesMut,
}

impl Frames {
    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame, if one has arrived.
    pub fn next_frame(&mut self) -> Result<Option<BytesMut>, EnvelopeError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > MAX_FRAME {
            return Err(EnvelopeError::FrameTooLarge(len));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len)))
    }

    /// Bytes received that do not yet make a whole frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// Splits a JSON watch stream (one event per line, as the API server writes it) as its bytes
/// arrive.
#[derive(Debug, Default)]
pub struct Lines {
    buf: BytesMut,
}

impl Lines {
    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole non-empty line, if one has arrived.
    pub fn next_line(&mut self) -> Result<Option<BytesMut>, EnvelopeError> {
        loop {
            let Some(i) = self.buf.iter().position(|b| *b == b'\n') else {
                if self.buf.len() > MAX_FRAME {
                    return Err(EnvelopeError::FrameTooLarge(self.buf.len()));
                }
                return Ok(None);
            };
            let mut line = self.buf.split_to(i + 1);
            line.truncate(i);
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some(line));
            }
        }
    }

    /// Bytes received that do not yet make a whole line.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// Encodes a message in the envelope, as the API server does (for tests and the fixture side).
pub fn wrap<M: Message>(api_version: &str, kind: &str, msg: &M) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
        }),
        raw: Some(msg.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

/// One length-delimited watch frame around `bytes`.
pub fn frame(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::api::core::v1::Pod;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str) -> Pod {
        Pod {
            metadata: Some(ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_envelope_round_trips_and_names_its_kind() {
        let bytes = wrap("v1", "Pod", &pod("web-1"));
        assert_eq!(&bytes[..4], b"k8s\0");
        let back: Pod = decode("Pod", &bytes).expect("decodes");
        assert_eq!(back, pod("web-1"));
        assert_eq!(
            decode::<Pod>("Status", &bytes),
            Err(EnvelopeError::Kind {
                expected: "Status",
                got: "Pod".into()
            })
        );
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        assert_eq!(
            decode::<Pod>("Pod", b"{\"kind\":\"Pod\"}"),
            Err(EnvelopeError::Prefix)
        );
        assert!(matches!(
            decode::<Pod>("Pod", b"k8s\0\xff\xff\xff"),
            Err(EnvelopeError::Decode { .. })
        ));
        let mut gz = wrap("v1", "Pod", &pod("a"));
        let unknown = Unknown {
            content_encoding: Some("gzip".into()),
            ..message::<Unknown>("u", &gz[4..]).expect("unknown")
        };
        gz.truncate(4);
        gz.extend(unknown.encode_to_vec());
        assert_eq!(open(&gz), Err(EnvelopeError::Encoding("gzip".into())));
    }

    #[test]
    fn frames_split_wherever_the_bytes_break() {
        let a = wrap("v1", "Pod", &pod("a"));
        let b = wrap("v1", "Pod", &pod("bb"));
        let mut stream = frame(&a);
        stream.extend(frame(&b));
        stream.extend(frame(&[]));
        for cut in 0..stream.len() {
            let mut f = Frames::default();
            let mut got = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                f.push(part);
                while let Some(fr) = f.next_frame().expect("frame") {
                    got.push(fr.to_vec());
                }
            }
            assert_eq!(got, vec![a.clone(), b.clone(), Vec::new()], "cut at {cut}");
            assert_eq!(f.pending(), 0);
        }
    }

    #[test]
    fn an_oversized_frame_is_refused() {
        let mut f = Frames::default();
        f.push(&u32::MAX.to_be_bytes());
        assert_eq!(
            f.next_frame(),
            Err(EnvelopeError::FrameTooLarge(u32::MAX as usize))
        );
    }

    #[test]
    fn lines_skip_blank_ones_and_wait_for_the_newline() {
        let mut l = Lines::default();
        l.push(b"{\"a\":1}\n\n  \n{\"b\"");
        assert_eq!(
            l.next_line().expect("ok").as_deref(),
            Some(&b"{\"a\":1}"[..])
        );
        assert_eq!(l.next_line().expect("ok"), None);
        l.push(b":2}\n");
        assert_eq!(
            l.next_line().expect("ok").as_deref(),
            Some(&b"{\"b\":2}"[..])
        );
        assert_eq!(l.pending(), 0);
    }
}
