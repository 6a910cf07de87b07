//! `floodgate-oci (--wasm FILE | --server FILE) --out DIR [--name NAME] [--tag TAG]
//! [--annotation KEY=VALUE]...`
//!
//! Writes `DIR/NAME/` (an OCI image layout), `DIR/NAME.tar` (the same layout as one
//! file) and `DIR/NAME.digest` (the image digest, for scripts), then prints the image
//! digest and the packed file's SHA-256. `--wasm` packs the filter as Istio's compat
//! image; `--server` packs a static floodgate-server binary as a runnable image. See the
//! library docs for both formats.

use floodgate_oci::document::Annotations;
use floodgate_oci::{build, build_server, layout, Image};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: floodgate-oci (--wasm FILE | --server FILE) --out DIR [--name floodgate] \
[--tag latest] [--annotation KEY=VALUE]...";

/// What is packed.
#[derive(Debug, PartialEq, Eq)]
enum Input {
    /// The filter module, as a wasm compat image.
    Wasm(PathBuf),
    /// floodgate-server's static binary, as a runnable image.
    Server(PathBuf),
}

impl Input {
    fn path(&self) -> &PathBuf {
        match self {
            Input::Wasm(p) | Input::Server(p) => p,
        }
    }
}

/// The command line, parsed.
struct Args {
    input: Input,
    out: PathBuf,
    name: String,
    tag: String,
    annotations: Annotations,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut input, mut out) = (None, None);
    let mut name = None;
    let mut tag = "latest".to_string();
    let mut annotations = Annotations::new();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--wasm" | "--server" if input.is_some() => {
                return Err("give one of --wasm and --server, once".to_string())
            }
            "--wasm" => input = Some(Input::Wasm(PathBuf::from(value()?))),
            "--server" => input = Some(Input::Server(PathBuf::from(value()?))),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--name" => name = Some(value()?),
            "--tag" => tag = value()?,
            "--annotation" => {
                let pair = value()?;
                let (key, value) = pair
                    .split_once('=')
                    .filter(|(k, _)| !k.is_empty())
                    .ok_or(format!("--annotation {pair:?} is not KEY=VALUE"))?;
                annotations.insert(key.to_string(), value.to_string());
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let input = input.ok_or("--wasm or --server is required")?;
    let name = name.unwrap_or_else(|| match input {
        Input::Wasm(_) => "floodgate".to_string(),
        Input::Server(_) => "floodgate-server".to_string(),
    });
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(format!("--name {name:?} must be a plain file name"));
    }
    Ok(Args {
        input,
        out: out.ok_or("--out is required")?,
        name,
        tag,
        annotations,
    })
}

fn image(args: &Args) -> Result<Image, String> {
    let path = args.input.path();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let built = match &args.input {
        Input::Wasm(_) if !args.annotations.is_empty() => {
            return Err("--annotation is for --server images".to_string())
        }
        Input::Wasm(_) => build(&bytes, &args.name, &args.tag),
        Input::Server(_) => build_server(&bytes, &args.tag, args.annotations.clone()),
    };
    built.map_err(|e| format!("{}: {e}", path.display()))
}

fn run(args: Args) -> Result<(), String> {
    let image = image(&args)?;
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
    match &args.input {
        Input::Wasm(path) => {
            println!(
                "                  WasmPlugin `sha256` for an oci:// URL: {}",
                image.digest().hex()
            );
            println!("wasm sha256:      {}", image.payload_digest.hex());
            println!(
                "                  (of {}; `sha256` for file:// and https:// URLs)",
                path.display()
            );
        }
        Input::Server(path) => {
            println!(
                "                  pin it in a Deployment as `image: REGISTRY/{}@{}`",
                args.name,
                image.digest()
            );
            println!(
                "binary sha256:    {}  ({})",
                image.payload_digest.hex(),
                path.display()
            );
            println!(
                "image size:       {} bytes compressed (the layer), {} bytes unpacked binary",
                image.layer.bytes.len(),
                std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
            );
        }
    }
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
        assert_eq!(a.input, Input::Wasm(PathBuf::from("f.wasm")));
        assert_eq!(a.out, PathBuf::from("o"));
        assert_eq!(a.tag, "0.1.0");
        assert_eq!(a.name, "floodgate");
        assert_eq!(args(&["--wasm", "f", "--out", "o"]).unwrap().tag, "latest");
    }

    #[test]
    fn a_server_image_is_named_after_the_server_and_takes_annotations() {
        let a = args(&[
            "--server",
            "bin",
            "--out",
            "o",
            "--annotation",
            "org.opencontainers.image.version=0.1.0",
            "--annotation",
            "k=a=b",
        ])
        .unwrap();
        assert_eq!(a.input, Input::Server(PathBuf::from("bin")));
        assert_eq!(a.name, "floodgate-server");
        assert_eq!(a.annotations["org.opencontainers.image.version"], "0.1.0");
        assert_eq!(a.annotations["k"], "a=b", "only the first = splits");
    }

    #[test]
    fn refuses_missing_values_unknown_flags_and_path_like_names() {
        assert_eq!(
            args(&["--out", "o"]).err().unwrap(),
            "--wasm or --server is required"
        );
        assert_eq!(args(&["--wasm"]).err().unwrap(), "--wasm needs a value");
        assert!(args(&["--wasm", "f", "--out", "o", "--force"])
            .err()
            .unwrap()
            .contains("unknown argument"));
        assert!(args(&["--wasm", "f", "--server", "b", "--out", "o"])
            .err()
            .unwrap()
            .contains("one of --wasm and --server"));
        for bad in ["novalue", "=v"] {
            assert!(args(&["--server", "b", "--out", "o", "--annotation", bad])
                .err()
                .unwrap()
                .contains("is not KEY=VALUE"));
        }
        for name in ["../x", "a/b", ".hidden", ""] {
            assert!(
                args(&["--wasm", "f", "--out", "o", "--name", name]).is_err(),
                "{name}"
            );
        }
    }
}
