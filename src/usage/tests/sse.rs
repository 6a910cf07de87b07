//! The SSE reader: events split on blank lines whatever the line ends, of any length,
//! wherever the stream is cut.

use super::pieces;
use crate::usage::sse::{Piece, SseReader};
use proptest::prelude::*;

/// The data of each complete event, feeding `chunks` one after another.
fn events(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut reader = SseReader::new();
    let (mut current, mut out) = (Vec::new(), Vec::new());
    for chunk in chunks {
        reader.feed(chunk, &mut |piece| match piece {
            Piece::Data(d) => current.extend_from_slice(d),
            Piece::End => out.push(std::mem::take(&mut current)),
        });
    }
    out
}

#[test]
fn events_are_split_on_blank_lines_whatever_the_line_ends() {
    let stream = b"event: message_start\ndata: {\"a\":1}\n\n: comment\r\ndata:x\r\ndata: y\r\n\r\ndata: last\r\r";
    assert_eq!(
        events(&[stream]),
        vec![b"{\"a\":1}".to_vec(), b"x\ny".to_vec(), b"last".to_vec()]
    );
    // An event with no data line is no event; an empty data line is one.
    assert_eq!(events(&[b"id: 1\n\ndata\n\n"]), vec![Vec::<u8>::new()]);
    assert_eq!(events(&[b"data:\n\n"]), vec![Vec::<u8>::new()]);
    // A CRLF split across chunks is one line end, not two (which would end the event).
    assert_eq!(
        events(&[b"data: a\r", b"\ndata: b\n\n"]),
        vec![b"a\nb".to_vec()]
    );
    // Only the field `data` is data: not `dat`, `datas` or `Data`.
    assert_eq!(
        events(&[b"dat: 1\ndatas: 2\nData: 3\ndata:  4\n\n"]),
        vec![b" 4".to_vec()]
    );
    // An event the stream ends in the middle of is not complete.
    assert_eq!(events(&[b"data: 1\n\ndata: 2\n"]), vec![b"1".to_vec()]);
}

/// An event of any length is handed on, piece by piece, and the next one read.
#[test]
fn an_event_of_any_length_is_read() {
    let long = "x".repeat(1 << 20);
    let stream = format!("data: short\n\ndata: {long}\n\ndata: after\n\n");
    let chunks: Vec<&[u8]> = stream.as_bytes().chunks(4096).collect();
    assert_eq!(
        events(&chunks),
        vec![b"short".to_vec(), long.into_bytes(), b"after".to_vec()]
    );
    // The reader is its few bytes of state, whatever it read.
    assert!(std::mem::size_of::<SseReader>() <= 8);
}

/// A stream of events, some with usage, some not JSON, with every kind of line end.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let line_end = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
    let line = prop_oneof![
        "[a-z :{}\"0-9,.]{0,30}".prop_map(|s| format!("data: {s}")),
        (0u32..5000).prop_map(|n| format!("data: {{\"usage\":{{\"total_tokens\":{n}}}}}")),
        Just("event: x".to_string()),
        Just(": keep-alive".to_string()),
        Just("data".to_string()),
        Just(String::new()),
    ];
    proptest::collection::vec((line, line_end), 0..40).prop_map(|lines| {
        lines
            .into_iter()
            .flat_map(|(l, e)| format!("{l}{e}").into_bytes())
            .collect()
    })
}

proptest! {
    /// Where the stream is cut into chunks changes nothing.
    #[test]
    fn chunking_never_changes_the_events(
        stream in stream(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..8),
    ) {
        prop_assert_eq!(events(&pieces(&stream, &cuts)), events(&[&stream]));
    }
}
