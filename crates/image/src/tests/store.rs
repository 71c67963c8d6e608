//! The store end to end, without a registry: import, load, resolve, remove, and what
//! is left behind when something fails.

use std::fs;
use std::path::Path;

use super::*;
use crate::progress::Silent;
use crate::reference::Reference;

fn rootfs_tar(extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut add = |path: &str, data: &[u8], mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_path(path).unwrap();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_cksum();
        b.append(&h, data).unwrap();
    };
    add("bin/tool", b"#!/bin/sh\necho hi\n", 0o755);
    add("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0o644);
    for (p, d) in extra {
        add(p, d, 0o644);
    }
    b.into_inner().unwrap()
}

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("images")).unwrap();
    (dir, store)
}

fn count(dir: &Path) -> usize {
    fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

fn assert_empty(store: &Store) {
    assert_eq!(count(&store.blobs_dir()), 0, "blobs left");
    assert_eq!(count(&store.root.join("rootfs")), 0, "rootfs left");
    assert_eq!(count(&store.tmp_dir()), 0, "tmp left");
}

#[test]
fn import_resolve_and_remove() {
    let (dir, store) = store();
    let tarball = dir.path().join("root.tar");
    fs::write(&tarball, rootfs_tar(&[])).unwrap();
    let name = Reference::parse("local/tool:1").unwrap();
    let entry = store.import(&tarball, &name, &mut Silent).unwrap();
    assert_eq!(entry.source, "import");

    let image = store.resolve("local/tool:1").unwrap();
    assert_eq!(image.name, "docker.io/local/tool:1");
    assert_eq!(image.id, entry.config);
    assert_eq!(
        fs::read_to_string(image.rootfs.join("etc/passwd"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    // By id prefix too.
    assert_eq!(
        store.resolve(&entry.config.hex()[..8]).unwrap().digest,
        entry.manifest
    );
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].size, fs::metadata(&tarball).unwrap().len());

    // A held image keeps its root filesystem through gc; once dropped, it goes.
    let report = store.remove(&["local/tool:1".into()]).unwrap();
    assert_eq!(report.untagged, ["docker.io/local/tool:1"]);
    assert_eq!(report.collected.rootfs_in_use, 1);
    assert!(image.rootfs.join("bin/tool").is_file());
    drop(image);
    let gc = store.collect().unwrap();
    assert_eq!(gc.rootfs, 1);
    assert_empty(&store);
    assert!(matches!(
        store.resolve("local/tool:1"),
        Err(ImageError::NotFound { .. })
    ));
}

#[test]
fn a_digest_mismatch_leaves_nothing_behind() {
    let (_dir, store) = store();
    let wrong = Digest::of(b"something else");
    let e = store
        .put_blob(&mut &b"payload"[..], &wrong, None, "test blob", &mut |_| {})
        .unwrap_err();
    assert!(matches!(e, ImageError::DigestMismatch { .. }), "{e}");
    let e = store
        .put_blob(
            &mut &b"payload"[..],
            &Digest::of(b"payload"),
            Some(3),
            "test blob",
            &mut |_| {},
        )
        .unwrap_err();
    assert!(matches!(e, ImageError::SizeMismatch { .. }), "{e}");
    assert_empty(&store);
    store
        .put_blob(
            &mut &b"payload"[..],
            &Digest::of(b"payload"),
            Some(7),
            "ok",
            &mut |_| {},
        )
        .unwrap();
    assert!(store.has_blob(&Digest::of(b"payload")));
}

/// A `docker save` archive with one image.
fn docker_save(layer: &[u8], tamper_config_name: bool) -> Vec<u8> {
    let diff_id = Digest::of(layer);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/bin", "GREETING=hello"], "Cmd": ["/bin/tool"], "WorkingDir": "/etc"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }))
    .unwrap();
    let mut config_name = format!("{}.json", Digest::of(&config).hex());
    if tamper_config_name {
        config_name = format!("{}.json", Digest::of(b"other").hex());
    }
    let manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": config_name, "RepoTags": ["saved/app:v2"], "Layers": ["abc/layer.tar"],
    }]))
    .unwrap();
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in [
        ("manifest.json", &manifest[..]),
        (&config_name[..], &config[..]),
        ("abc/layer.tar", layer),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_path(path).unwrap();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap()
}

#[test]
fn loads_a_docker_save_archive_with_its_config() {
    let (dir, store) = store();
    let archive = dir.path().join("saved.tar");
    fs::write(&archive, docker_save(&rootfs_tar(&[]), false)).unwrap();
    let loaded = store.load(&archive, None, &mut Silent).unwrap();
    assert_eq!(loaded[0].names, ["docker.io/saved/app:v2"]);
    let image = store.resolve("saved/app:v2").unwrap();
    assert_eq!(image.config.env, ["PATH=/bin", "GREETING=hello"]);
    assert_eq!(
        image.config.cmd.as_deref(),
        Some(&["/bin/tool".to_owned()][..])
    );
    assert_eq!(image.config.working_dir.as_deref(), Some("/etc"));
    assert!(image.rootfs.join("bin/tool").is_file());
    drop(image);
    // Loading again is idempotent; --tag renames.
    let again = store
        .load(
            &archive,
            Some(&Reference::parse("other:1").unwrap()),
            &mut Silent,
        )
        .unwrap();
    assert_eq!(again[0].entry.config, loaded[0].entry.config);
    assert_eq!(store.list().unwrap().len(), 2);
}

#[test]
fn a_tampered_archive_is_rejected_whole() {
    let (dir, store) = store();
    let archive = dir.path().join("bad.tar");
    fs::write(&archive, docker_save(&rootfs_tar(&[]), true)).unwrap();
    let e = store.load(&archive, None, &mut Silent).unwrap_err();
    assert!(matches!(e, ImageError::DigestMismatch { .. }), "{e}");
    assert_empty(&store);
    // A layer that cannot be unpacked safely fails the load, and leaves nothing.
    let mut evil = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..9].copy_from_slice(b"../escape");
    h.set_size(0);
    h.set_mode(0o644);
    h.set_cksum();
    evil.append(&h, &b""[..]).unwrap();
    fs::write(&archive, docker_save(&evil.into_inner().unwrap(), false)).unwrap();
    let e = store.load(&archive, None, &mut Silent).unwrap_err();
    assert!(matches!(e, ImageError::UnsafeEntry { .. }), "{e}");
    assert_empty(&store);
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn names_resolve_by_canonical_form_digest_and_id() {
    let (dir, store) = store();
    let tarball = dir.path().join("root.tar");
    fs::write(&tarball, rootfs_tar(&[])).unwrap();
    let entry = store
        .import(
            &tarball,
            &Reference::parse("127.0.0.1:5000/a/b:t").unwrap(),
            &mut Silent,
        )
        .unwrap();
    let by_digest = format!("127.0.0.1:5000/a/b@{}", entry.manifest);
    assert_eq!(
        store.lookup(&by_digest).unwrap()[0].0,
        "127.0.0.1:5000/a/b:t"
    );
    assert!(matches!(
        store.lookup("a/b:t"),
        Err(ImageError::NotFound { .. })
    ));
    assert!(matches!(
        store.lookup("Bad Name"),
        Err(ImageError::BadReference { .. })
    ));
    let e = store
        .lookup("127.0.0.1:5000/a/b:nope")
        .unwrap_err()
        .to_string();
    assert!(e.contains("vectraguard image pull"), "{e}");
}

#[test]
fn a_layer_shared_by_two_images_of_an_archive_loads() {
    // Two images in one `docker save` archive with the same config and layer, as
    // images sharing a base have their layers listed again.
    let layer = rootfs_tar(&[]);
    let diff_id = Digest::of(&layer);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }))
    .unwrap();
    let config_name = format!("{}.json", Digest::of(&config).hex());
    let manifest = serde_json::to_vec(&serde_json::json!([
        {"Config": config_name, "RepoTags": ["saved/one:1"], "Layers": ["l/layer.tar"]},
        {"Config": config_name, "RepoTags": ["saved/two:2"], "Layers": ["l/layer.tar"]},
    ]))
    .unwrap();
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in [
        ("manifest.json", &manifest[..]),
        (&config_name[..], &config[..]),
        ("l/layer.tar", &layer[..]),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_path(path).unwrap();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    let (dir, store) = store();
    let archive = dir.path().join("shared.tar");
    fs::write(&archive, b.into_inner().unwrap()).unwrap();
    let loaded = store.load(&archive, None, &mut Silent).unwrap();
    assert_eq!(loaded.len(), 2);
    let names: Vec<String> = store.list().unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["docker.io/saved/one:1", "docker.io/saved/two:2"]);
}
