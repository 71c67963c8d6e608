//! Layers of an image (`unpack.rs`): untrusted tar archives, plain or gzipped, applied
//! one over the other into a fresh root. Input: selector byte (bit 0: each layer is
//! gzipped; bit 1: several layers as `common::split` parts, else one), then the layers.
//!
//! Property (the security one): nothing is written, linked or removed outside the
//! root. A sibling folder with a canary file must come out untouched: same entries,
//! same content, no second link to the canary.
#![no_main]

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use vg_image::unpack::Unpacker;

#[path = "common.rs"]
mod common;

const CANARY: &[u8] = b"canary";

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = common::selector(data);
    let layers = if sel & 2 == 2 {
        common::split(rest)
    } else {
        vec![rest]
    };
    let base = tempfile::tempdir().expect("tempdir");
    let root = base.path().join("root");
    let outside = base.path().join("outside");
    fs::create_dir(&root).expect("root");
    fs::create_dir(&outside).expect("outside");
    fs::write(outside.join("canary"), CANARY).expect("canary");

    let mut unpacker = Unpacker::new(&root);
    let mut failed = false;
    for (i, layer) in layers.iter().enumerate() {
        let reader: Box<dyn Read> = if sel & 1 == 1 {
            Box::new(flate2::bufread::MultiGzDecoder::new(*layer))
        } else {
            Box::new(*layer)
        };
        if unpacker.apply_layer(reader, &format!("layer {i}")).is_err() {
            failed = true;
            break;
        }
    }
    if !failed {
        let _ = unpacker.finish();
    }

    assert_eq!(
        names(base.path()),
        ["outside", "root"],
        "the root's parent changed"
    );
    assert_eq!(
        names(&outside),
        ["canary"],
        "a folder outside the root changed"
    );
    let canary = fs::symlink_metadata(outside.join("canary")).expect("canary");
    assert!(canary.is_file(), "the canary was replaced");
    assert_eq!(
        canary.nlink(),
        1,
        "the canary was hard-linked from the root"
    );
    assert_eq!(fs::read(outside.join("canary")).expect("canary"), CANARY);
    assert!(
        fs::symlink_metadata(&root).expect("root").is_dir(),
        "the root was replaced"
    );
});
