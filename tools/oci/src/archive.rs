//! Tar and gzip with nothing taken from the machine that runs the build.
//!
//! A tar header normally records the file's modification time, owner and permissions, and
//! a gzip header the compression time: any of them would change the image digest on every
//! build. Here each is a constant, entries are written in the order given, and the
//! compression level is fixed, so the same input always gives the same bytes.

use flate2::write::GzEncoder;
use flate2::{Compression, GzBuilder};
use std::io::{self, Write};
use tar::{EntryType, Header};

/// Modification time of every entry (the Unix epoch): a constant, not the build time.
pub const MTIME: u64 = 0;
/// Permissions of a regular file: readable by all, written by no one at run time.
pub const FILE_MODE: u32 = 0o644;
/// Permissions of a directory.
pub const DIR_MODE: u32 = 0o755;
/// Permissions of a program: runnable and readable by all, written by no one at run time
/// (the image's non-root user cannot replace it).
pub const EXECUTABLE_MODE: u32 = 0o755;

/// One entry of an archive.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    /// A directory; the path ends without a slash.
    Dir(&'a str),
    /// A regular file with its contents.
    File(&'a str, &'a [u8]),
    /// A program: a regular file with its contents, mode [`EXECUTABLE_MODE`].
    Executable(&'a str, &'a [u8]),
    /// A second name of a file written earlier in the same archive (a hard link entry:
    /// no contents of its own, so the layer does not grow by a copy, and nothing to
    /// resolve at run time, unlike a symbolic link); path first, then the earlier path.
    HardLink(&'a str, &'a str),
}

/// A POSIX (ustar) tar of `items`, in the order given, owned by 0:0 with fixed times and
/// modes, ending with the two zero blocks the format requires.
pub fn tar(items: &[Item<'_>]) -> io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for item in items {
        let mut header = Header::new_ustar();
        header.set_mtime(MTIME);
        header.set_uid(0);
        header.set_gid(0);
        match *item {
            Item::Dir(path) => {
                header.set_entry_type(EntryType::Directory);
                header.set_mode(DIR_MODE);
                header.set_size(0);
                header.set_path(format!("{path}/"))?;
                header.set_cksum();
                builder.append(&header, io::empty())?;
            }
            Item::File(path, bytes) => append_file(&mut builder, header, path, bytes, FILE_MODE)?,
            Item::Executable(path, bytes) => {
                append_file(&mut builder, header, path, bytes, EXECUTABLE_MODE)?
            }
            Item::HardLink(path, target) => {
                header.set_entry_type(EntryType::Link);
                header.set_mode(EXECUTABLE_MODE);
                header.set_size(0);
                header.set_path(path)?;
                header.set_link_name(target)?;
                header.set_cksum();
                builder.append(&header, io::empty())?;
            }
        }
    }
    builder.into_inner()
}

fn append_file(
    builder: &mut tar::Builder<Vec<u8>>,
    mut header: Header,
    path: &str,
    bytes: &[u8],
    mode: u32,
) -> io::Result<()> {
    header.set_entry_type(EntryType::Regular);
    header.set_mode(mode);
    header.set_size(bytes.len() as u64);
    header.set_path(path)?;
    header.set_cksum();
    builder.append(&header, bytes)
}

/// `bytes` gzip-compressed at the best level, with a header that carries no time, no
/// file name and no build-machine OS.
pub fn gzip(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut encoder: GzEncoder<Vec<u8>> = GzBuilder::new()
        .mtime(0)
        // 255 is "unknown" in the gzip header; the default would differ by platform.
        .operating_system(255)
        .write(Vec::new(), Compression::best());
    encoder.write_all(bytes)?;
    encoder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    #[test]
    fn tar_entries_carry_fixed_metadata_and_keep_their_order() {
        let data = tar(&[
            Item::Dir("blobs"),
            Item::File("blobs/a", b"hello"),
            Item::Executable("bin/run", b"\x7fELF"),
        ])
        .unwrap();
        let mut archive = tar::Archive::new(data.as_slice());
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let header = entry.header().clone();
            assert_eq!(header.mtime().unwrap(), MTIME);
            assert_eq!(header.uid().unwrap(), 0);
            assert_eq!(header.gid().unwrap(), 0);
            assert!(header.as_ustar().is_some(), "POSIX ustar headers");
            let mut body = Vec::new();
            entry.read_to_end(&mut body).unwrap();
            seen.push((
                entry.path().unwrap().display().to_string(),
                header.mode().unwrap(),
                body,
            ));
        }
        assert_eq!(
            seen,
            vec![
                ("blobs/".to_string(), DIR_MODE, vec![]),
                ("blobs/a".to_string(), FILE_MODE, b"hello".to_vec()),
                ("bin/run".to_string(), EXECUTABLE_MODE, b"\x7fELF".to_vec()),
            ]
        );
    }

    #[test]
    fn a_hard_link_names_an_earlier_entry_and_adds_no_contents() {
        let data = tar(&[
            Item::Executable("a/run", b"\x7fELF"),
            Item::HardLink("b/alias", "a/run"),
        ])
        .unwrap();
        let mut archive = tar::Archive::new(data.as_slice());
        let entries: Vec<_> = archive.entries().unwrap().map(Result::unwrap).collect();
        let link = entries[1].header();
        assert_eq!(link.entry_type(), EntryType::Link);
        assert_eq!(link.size().unwrap(), 0, "no second copy");
        assert_eq!(link.link_name().unwrap().unwrap().to_str(), Some("a/run"));
        let dir = tempfile::tempdir().unwrap();
        tar::Archive::new(data.as_slice())
            .unpack(dir.path())
            .unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("b/alias")).unwrap(),
            b"\x7fELF"
        );
    }

    #[test]
    fn tar_is_a_whole_number_of_blocks_with_the_end_marker() {
        let data = tar(&[Item::File("plugin.wasm", &[1, 2, 3])]).unwrap();
        assert_eq!(data.len() % 512, 0);
        assert!(data[data.len() - 1024..].iter().all(|b| *b == 0));
    }

    #[test]
    fn gzip_round_trips_with_a_header_free_of_time_and_os() {
        let input = b"floodgate ".repeat(100);
        let packed = gzip(&input).unwrap();
        assert_eq!(&packed[..3], &[0x1f, 0x8b, 8], "gzip magic, deflate");
        assert_eq!(&packed[4..8], &[0, 0, 0, 0], "MTIME field is zero");
        assert_eq!(packed[9], 255, "OS field is 'unknown'");
        let mut unpacked = Vec::new();
        GzDecoder::new(packed.as_slice())
            .read_to_end(&mut unpacked)
            .unwrap();
        assert_eq!(unpacked, input);
        assert_eq!(gzip(&input).unwrap(), packed, "same input, same bytes");
    }
}
