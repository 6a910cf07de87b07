//! Writing an [`Image`] as an OCI image layout, both as a directory and as a tar of that
//! directory. `skopeo`, `crane` and `oras` read either form and push it unchanged.
//!
//! A layout is `oci-layout` (the marker), `index.json` (the entry point) and
//! `blobs/sha256/<hex>` for every blob. The tar holds the same files at its root, in a
//! fixed order, so it is reproducible too.

use crate::archive::{self, Item};
use crate::image::Image;
use std::fs;
use std::io;
use std::path::Path;

/// The marker file's name.
pub const MARKER_FILE: &str = "oci-layout";
/// The entry point's name.
pub const INDEX_FILE: &str = "index.json";

/// Every file of the layout as (relative path, contents), in tar order.
pub fn files(image: &Image) -> Vec<(String, &[u8])> {
    let mut files = vec![
        (MARKER_FILE.to_string(), image.marker.as_slice()),
        (INDEX_FILE.to_string(), image.index.as_slice()),
    ];
    let mut blobs = image.blobs().to_vec();
    blobs.sort_by(|a, b| a.digest.cmp(&b.digest));
    for blob in blobs {
        files.push((
            format!("blobs/sha256/{}", blob.digest.hex()),
            blob.bytes.as_slice(),
        ));
    }
    files
}

/// The layout as a tar: the marker and index, the blob directories, then the blobs.
pub fn tar(image: &Image) -> io::Result<Vec<u8>> {
    let files = files(image);
    let mut items: Vec<Item<'_>> = Vec::with_capacity(files.len() + 2);
    for (path, bytes) in &files[..2] {
        items.push(Item::File(path, bytes));
    }
    items.push(Item::Dir("blobs"));
    items.push(Item::Dir("blobs/sha256"));
    for (path, bytes) in &files[2..] {
        items.push(Item::File(path, bytes));
    }
    archive::tar(&items)
}

/// Writes the layout into `dir`, replacing a layout already there (so no blob of an
/// earlier build lingers). Refuses to replace a directory that is not a layout.
pub fn write_dir(image: &Image, dir: &Path) -> io::Result<()> {
    if dir.exists() {
        if !dir.join(MARKER_FILE).is_file() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not an OCI image layout; not replacing it",
                    dir.display()
                ),
            ));
        }
        fs::remove_dir_all(dir)?;
    }
    fs::create_dir_all(dir.join("blobs/sha256"))?;
    for (path, bytes) in files(image) {
        fs::write(dir.join(path), bytes)?;
    }
    Ok(())
}

/// Writes the layout's tar to `path`.
pub fn write_tar(image: &Image, path: &Path) -> io::Result<()> {
    fs::write(path, tar(image)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::build;
    use std::io::Read;

    fn image() -> Image {
        build(b"\0asm\x01\0\0\0", "floodgate", "0.1.0").unwrap()
    }

    #[test]
    fn the_directory_holds_the_marker_the_index_and_every_blob_by_digest() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("floodgate");
        let image = image();
        write_dir(&image, &out).unwrap();
        assert_eq!(fs::read(out.join(MARKER_FILE)).unwrap(), image.marker);
        assert_eq!(fs::read(out.join(INDEX_FILE)).unwrap(), image.index);
        let mut names: Vec<String> = fs::read_dir(out.join("blobs/sha256"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut expected: Vec<String> = image
            .blobs()
            .iter()
            .map(|b| b.digest.hex().to_string())
            .collect();
        expected.sort();
        assert_eq!(names, expected);
    }

    #[test]
    fn rewriting_removes_blobs_of_an_earlier_build() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("floodgate");
        let old = build(b"\0asm\x01\0\0\0old", "floodgate", "0.1.0").unwrap();
        write_dir(&old, &out).unwrap();
        write_dir(&image(), &out).unwrap();
        assert!(!out
            .join("blobs/sha256")
            .join(old.layer.digest.hex())
            .exists());
        assert_eq!(fs::read_dir(out.join("blobs/sha256")).unwrap().count(), 3);
    }

    #[test]
    fn refuses_to_replace_a_directory_that_is_not_a_layout() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("precious.txt"), b"keep me").unwrap();
        let err = write_dir(&image(), dir.path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert!(dir.path().join("precious.txt").exists());
    }

    #[test]
    fn the_tar_holds_the_same_files_as_the_directory_and_is_reproducible() {
        let image = image();
        let bytes = tar(&image).unwrap();
        assert_eq!(bytes, tar(&image).unwrap());
        let mut archive = tar::Archive::new(bytes.as_slice());
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mut body = Vec::new();
            entry.read_to_end(&mut body).unwrap();
            let path = entry.path().unwrap().display().to_string();
            if !path.ends_with('/') {
                seen.push((path, body));
            }
        }
        let expected: Vec<(String, Vec<u8>)> = files(&image)
            .into_iter()
            .map(|(p, b)| (p, b.to_vec()))
            .collect();
        assert_eq!(seen, expected);
    }
}
