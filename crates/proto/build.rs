//! Compiles `proto/` with protox (pure Rust: no system protoc) and generates the tonic code.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("draughts/v1"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "proto") {
            files.push(path.strip_prefix(&root)?.to_path_buf());
        }
    }
    files.sort();
    let fds = protox::compile(&files, [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("draughts_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    println!("cargo:rerun-if-changed={}", root.display());
    Ok(())
}
