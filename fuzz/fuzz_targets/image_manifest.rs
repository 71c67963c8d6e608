//! Manifests, indexes and image configurations from a registry or an archive
//! (`manifest.rs`). Input: selector byte (bit 0: configuration, else manifest or
//! index; bit 1: a registry content type is given; bits 2-4: layers in the manifest),
//! then the JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_image::manifest::{self, Document};
use vg_image::platform::Platform;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sel, json) = common::selector(data);
    if sel & 1 == 1 {
        let layers = usize::from((sel >> 2) & 7);
        let _ = manifest::parse_config(json, layers, "config");
        return;
    }
    let content_type = (sel & 2 == 2).then_some("application/vnd.oci.image.index.v1+json; x=y");
    match manifest::parse_document(json, content_type, "manifest") {
        Ok(Document::Index(index)) => {
            let _ = manifest::select_platform(&index, &Platform::host(), "index");
        }
        Ok(Document::Manifest(m)) => {
            if let Ok(layers) = manifest::layers_of(&m) {
                assert_eq!(layers.len(), m.layers().len());
                for (_, _, media) in &layers {
                    manifest::layer_compression(media).expect("checked by parse_document");
                }
            }
        }
        Err(_) => {}
    }
});
