//! The server's YAML configuration loader ([`floodgate_server::config::parse`]) on any text.
//!
//! NUL bytes split the input into several files of one directory (one domain each), so
//! that cross-file checks (duplicate domains) are reached too. Bytes that are not UTF-8
//! are replaced: the loader reads files with `read_to_string`, which refuses them before
//! any parsing.

use floodgate_server::config::{parse, source::Files};
use std::path::PathBuf;

/// Loads the files `data` holds.
pub fn run(data: &[u8]) {
    let files = Files {
        root: PathBuf::from("fuzz"),
        files: data
            .split(|&b| b == 0)
            .enumerate()
            .map(|(i, text)| {
                let name = PathBuf::from(format!("fuzz/{i}.yaml"));
                (name, String::from_utf8_lossy(text).into_owned())
            })
            .collect(),
    };
    match parse(&files) {
        Ok(config) => assert!(
            config.domain_names().count() <= files.files.len(),
            "more domains than files"
        ),
        Err(e) => {
            assert!(!e.message.is_empty(), "an error without a message: {e:?}");
            assert!(
                files.files.iter().any(|(name, _)| *name == e.file),
                "an error naming a file that was not loaded: {e}"
            );
        }
    }
}
