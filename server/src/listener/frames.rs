//! What counts as activity on a connection, read from the bytes it moves.
//!
//! The idle timeout closes a connection that carries no call for a while. On the gRPC port
//! "carries a call" is decided at the HTTP/2 frame level (RFC 9113 §4.1: every frame is a
//! 9-byte header, 24-bit length, 8-bit type, flags and stream id, then its payload), in
//! both directions:
//!
//! - **Activity**: `HEADERS` (type 1), `CONTINUATION` (9) and `DATA` (0) frames: a call's
//!   request, its body, and its answer. A call therefore keeps its connection alive from
//!   its first frame to its last.
//! - **Not activity**: `PING` (6) and its acknowledgement, `SETTINGS` (4) and its
//!   acknowledgement, `WINDOW_UPDATE` (8), `PRIORITY` (2), `RST_STREAM` (3), `GOAWAY` (7),
//!   `PUSH_PROMISE` (5, which a client must not send), and any unknown type (which HTTP/2
//!   says to ignore). None of them carries a call, and each costs a client nothing to send,
//!   so counting one would let a connection that never calls hold its slot for ever: ten
//!   PING-only connections used to keep `--max-connections 10` full.
//!
//! The watcher sees plaintext HTTP/2, whatever is below it (TCP now, TLS later: it wraps
//! the stream the HTTP/2 layer reads, not the socket). It only follows the framing: it
//! reads each frame's 9-byte header and skips its payload without looking at it, so it
//! costs a few comparisons per frame and keeps no buffer. If the bytes are not HTTP/2, the
//! HTTP/2 layer refuses the connection anyway; the watcher then at worst sees no activity
//! and the idle timeout closes the connection sooner, never later.

/// Where a direction of an HTTP/2 byte stream stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// This many bytes of the client's connection preface (RFC 9113 §3.4) are to come.
    Preface(usize),
    /// Inside a frame header, of which `have` bytes are in `head`.
    Header { head: [u8; 9], have: usize },
    /// Inside a frame's payload, this many bytes of which are to come.
    Payload(u32),
}

/// The bytes of the HTTP/2 client connection preface.
pub const PREFACE_LEN: usize = 24;

/// Frame types that carry a call (RFC 9113 §6): DATA, HEADERS, CONTINUATION.
fn carries_a_call(frame_type: u8) -> bool {
    matches!(frame_type, 0x0 | 0x1 | 0x9)
}

/// One direction of an HTTP/2 connection, followed frame by frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frames {
    state: State,
}

impl Frames {
    /// What a client sends: the preface, then frames.
    pub fn from_client() -> Frames {
        Frames {
            state: State::Preface(PREFACE_LEN),
        }
    }

    /// What a server sends: frames from the first byte.
    pub fn from_server() -> Frames {
        Frames {
            state: State::Header {
                head: [0; 9],
                have: 0,
            },
        }
    }

    /// Whether the client preface is still incomplete.
    pub fn in_preface(&self) -> bool {
        matches!(self.state, State::Preface(_))
    }

    /// Follows `bytes`, the next ones of this direction; true when a frame that carries a
    /// call begins in them.
    pub fn feed(&mut self, mut bytes: &[u8]) -> bool {
        let mut call = false;
        while !bytes.is_empty() {
            match &mut self.state {
                State::Preface(left) => {
                    let n = (*left).min(bytes.len());
                    *left -= n;
                    bytes = &bytes[n..];
                    if *left == 0 {
                        self.state = State::Header {
                            head: [0; 9],
                            have: 0,
                        };
                    }
                }
                State::Header { head, have } => {
                    let n = (9 - *have).min(bytes.len());
                    head[*have..*have + n].copy_from_slice(&bytes[..n]);
                    *have += n;
                    bytes = &bytes[n..];
                    if *have == 9 {
                        let length = u32::from_be_bytes([0, head[0], head[1], head[2]]);
                        call |= carries_a_call(head[3]);
                        self.state = if length == 0 {
                            State::Header {
                                head: [0; 9],
                                have: 0,
                            }
                        } else {
                            State::Payload(length)
                        };
                    }
                }
                State::Payload(left) => {
                    let n = usize::try_from(*left).map_or(bytes.len(), |l| l.min(bytes.len()));
                    // `n` ≤ `left` < 2^24.
                    *left -= n as u32;
                    bytes = &bytes[n..];
                    if *left == 0 {
                        self.state = State::Header {
                            head: [0; 9],
                            have: 0,
                        };
                    }
                }
            }
        }
        call
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    /// A frame of `kind` with a payload of `len` bytes on stream 1.
    fn frame(kind: u8, len: usize) -> Vec<u8> {
        let l = u32::try_from(len).unwrap().to_be_bytes();
        let mut f = vec![l[1], l[2], l[3], kind, 0, 0, 0, 0, 1];
        f.extend(std::iter::repeat_n(0xAB, len));
        f
    }

    #[test]
    fn pings_settings_and_window_updates_are_not_calls() {
        let mut c = Frames::from_client();
        assert!(!c.feed(PREFACE));
        assert!(!c.in_preface());
        for (kind, len) in [
            (4, 0),
            (4, 6),
            (6, 8),
            (8, 4),
            (2, 5),
            (3, 4),
            (7, 8),
            (0x42, 3),
        ] {
            assert!(!c.feed(&frame(kind, len)), "type {kind}");
        }
        for (kind, len) in [(1, 20), (9, 3), (0, 0), (0, 100)] {
            assert!(c.feed(&frame(kind, len)), "type {kind}");
        }
    }

    #[test]
    fn a_payload_that_looks_like_a_header_is_skipped() {
        // A PING whose 8 bytes would read as a HEADERS frame header if not skipped.
        let mut ping = frame(6, 8);
        ping[9..].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
        let mut s = Frames::from_server();
        assert!(!s.feed(&ping));
        assert!(s.feed(&frame(1, 4)));
    }

    proptest! {
        /// However the bytes are cut into reads, the watcher sees a call exactly when a
        /// call frame's header arrives in that read.
        #[test]
        fn any_chunking_sees_the_same_frames(
            frames in prop::collection::vec((prop_oneof![Just(0u8), Just(1), Just(4), Just(6), Just(8), Just(9), any::<u8>()], 0usize..40), 0..20),
            cuts in prop::collection::vec(1usize..30, 1..50),
        ) {
            let mut bytes = PREFACE.to_vec();
            // Where each frame's header ends, and whether it is a call.
            let mut ends = Vec::new();
            for &(kind, len) in &frames {
                ends.push((bytes.len() + 9, carries_a_call(kind)));
                bytes.extend(frame(kind, len));
            }
            let mut w = Frames::from_client();
            let (mut at, mut cut) = (0, cuts.iter().cycle());
            while at < bytes.len() {
                let end = (at + cut.next().copied().unwrap_or(1)).min(bytes.len());
                let expected = ends.iter().any(|&(e, call)| call && e > at && e <= end);
                prop_assert_eq!(w.feed(&bytes[at..end]), expected, "bytes {}..{}", at, end);
                at = end;
            }
        }
    }
}
