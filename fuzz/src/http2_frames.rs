//! floodgate-server's HTTP/2 frame watcher (`floodgate_server::listener::frames`), which
//! reads every byte a gRPC client sends (and the server writes) to decide what counts as
//! activity. The first byte picks a chunk length (1 to 256); the rest is the stream, fed
//! in chunks of that length and in one piece, as a client's bytes and as a server's.
//!
//! Whatever the bytes, the watcher must not panic, and cutting the stream differently must
//! change nothing: the same frames seen (a call frame begins in the whole stream exactly
//! when one begins in some chunk) and the same state at the end.

use floodgate_server::listener::frames::Frames;

/// Feeds `data` as described in the module documentation.
pub fn run(data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(first) + 1;
    for start in [Frames::from_client(), Frames::from_server()] {
        let mut whole = start;
        let call_in_whole = whole.feed(stream);
        let mut cut = start;
        let call_in_chunks = stream
            .chunks(chunk)
            .fold(false, |seen, c| cut.feed(c) | seen);
        assert_eq!(
            call_in_whole, call_in_chunks,
            "chunks of {chunk} see other frames"
        );
        assert_eq!(whole, cut, "chunks of {chunk} end elsewhere");
    }
}
