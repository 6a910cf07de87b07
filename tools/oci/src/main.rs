//! `floodgate-oci --wasm FILE --out DIR [--name NAME] [--tag TAG]`
//!
//! Writes `DIR/NAME/` (an OCI image layout), `DIR/NAME.tar` (the same layout as one
//! file) and `DIR/NAME.digest` (the image digest, for scripts), then prints the image
//! digest and the module's SHA-256. See the library docs for the format.

use floodgate_oci::{build, layout};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: floodgate-oci --wasm FILE --out DIR [--name floodgate] [--tag latest]";

/// The command line, parsed.
struct Args {
    wasm: PathBuf,
    out: PathBuf,
    name: String,
    tag: String,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut wasm, mut out) = (None, None);
    let mut name = "floodgate".to_string();
    let mut tag = "latest".to_string();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--wasm" => wasm = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--name" => name = value()?,
            "--tag" => tag = value()?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(format!("--name {name:?} must be a plain file name"));
    }
    Ok(Args {
        wasm: wasm.ok_or("--wasm is required")?,
        out: out.ok_or("--out is required")?,
        name,
        tag,
    })
}

fn run(args: Args) -> Result<(), String> {
    let wasm = std::fs::read(&args.wasm)
        .map_err(|e| format!("cannot read {}: {e}", args.wasm.display()))?;
    let image =
        build(&wasm, &args.name, &args.tag).map_err(|e| format!("{}: {e}", args.wasm.display()))?;
    let dir = args.out.join(&args.name);
    let tar = args.out.join(format!("{}.tar", args.name));
    let digest_file = args.out.join(format!("{}.digest", args.name));
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    layout::write_dir(&image, &dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    layout::write_tar(&image, &tar).map_err(|e| format!("{}: {e}", tar.display()))?;
    std::fs::write(&digest_file, format!("{}\n", image.digest()))
        .map_err(|e| format!("{}: {e}", digest_file.display()))?;

    println!("OCI image layout: {}  (tag {})", dir.display(), image.tag);
    println!("OCI layout tar:   {}", tar.display());
    println!("image digest:     {}", image.digest());
    println!(
        "                  WasmPlugin `sha256` for an oci:// URL: {}",
        image.digest().hex()
    );
    println!("wasm sha256:      {}", image.wasm_digest.hex());
    println!(
        "                  (of {}; `sha256` for file:// and https:// URLs)",
        args.wasm.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    let result = parse_args(std::env::args().skip(1)).and_then(run);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("floodgate-oci: {message}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, String> {
        parse_args(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn reads_every_flag_and_defaults_the_rest() {
        let a = args(&["--wasm", "f.wasm", "--out", "o", "--tag", "0.1.0"]).unwrap();
        assert_eq!(a.wasm, PathBuf::from("f.wasm"));
        assert_eq!(a.out, PathBuf::from("o"));
        assert_eq!(a.tag, "0.1.0");
        assert_eq!(a.name, "floodgate");
        assert_eq!(args(&["--wasm", "f", "--out", "o"]).unwrap().tag, "latest");
    }

    #[test]
    fn refuses_missing_values_unknown_flags_and_path_like_names() {
        assert_eq!(args(&["--out", "o"]).err().unwrap(), "--wasm is required");
        assert_eq!(args(&["--wasm"]).err().unwrap(), "--wasm needs a value");
        assert!(args(&["--wasm", "f", "--out", "o", "--force"])
            .err()
            .unwrap()
            .contains("unknown argument"));
        for name in ["../x", "a/b", ".hidden", ""] {
            assert!(
                args(&["--wasm", "f", "--out", "o", "--name", name]).is_err(),
                "{name}"
            );
        }
    }
}
