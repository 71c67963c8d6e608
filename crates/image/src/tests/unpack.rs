//! Hostile and ordinary layers, built in the test: nothing may land outside the
//! root, and the tree must be what the layers describe.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use tar::{EntryType, Header};

use super::*;

/// One tar entry, written with raw header fields so that hostile names (which the
/// tar crate's own setters refuse) can be made.
struct E<'a> {
    name: &'a str,
    kind: EntryType,
    link: &'a str,
    data: &'a [u8],
    mode: u32,
}

fn file<'a>(name: &'a str, data: &'a [u8]) -> E<'a> {
    E {
        name,
        kind: EntryType::Regular,
        link: "",
        data,
        mode: 0o644,
    }
}
fn dir(name: &str) -> E<'_> {
    E {
        name,
        kind: EntryType::Directory,
        link: "",
        data: b"",
        mode: 0o755,
    }
}
fn symlink<'a>(name: &'a str, link: &'a str) -> E<'a> {
    E {
        name,
        kind: EntryType::Symlink,
        link,
        data: b"",
        mode: 0o777,
    }
}
fn hardlink<'a>(name: &'a str, link: &'a str) -> E<'a> {
    E {
        name,
        kind: EntryType::Link,
        link,
        data: b"",
        mode: 0o644,
    }
}

fn layer(entries: &[E<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = Header::new_gnu();
        let old = h.as_old_mut();
        old.name[..e.name.len()].copy_from_slice(e.name.as_bytes());
        old.linkname[..e.link.len()].copy_from_slice(e.link.as_bytes());
        h.set_entry_type(e.kind);
        h.set_mode(e.mode);
        h.set_size(e.data.len() as u64);
        h.set_mtime(1_700_000_000);
        h.set_uid(0);
        h.set_gid(0);
        h.set_cksum();
        b.append(&h, e.data).unwrap();
    }
    b.into_inner().unwrap()
}

struct Tree {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    Tree { _dir: dir, root }
}

fn unpack(t: &Tree, layers: &[Vec<u8>]) -> Result<UnpackReport> {
    let mut u = Unpacker::new(&t.root);
    for (i, l) in layers.iter().enumerate() {
        u.apply_layer(&l[..], &format!("layer{i}"))?;
    }
    u.finish()
}

/// A directory on the host, outside the tree, that hostile entries aim at.
fn host_target() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("victim"), "host data").unwrap();
    d
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn dot_dot_paths_are_refused_and_nothing_escapes() {
    let t = tree();
    for name in ["../escape", "a/../../escape", "./../escape"] {
        let e = unpack(&t, &[layer(&[file(name, b"x")])]).unwrap_err();
        assert!(matches!(e, ImageError::UnsafeEntry { .. }), "{name}: {e}");
        assert!(e.to_string().contains(".."), "{e}");
    }
    assert!(!t.root.parent().unwrap().join("escape").exists());
    assert!(names(&t.root).is_empty());
}

#[test]
fn absolute_paths_are_refused() {
    let host = host_target();
    let t = tree();
    let name = format!("{}/victim", host.path().display());
    let e = unpack(&t, &[layer(&[file(&name, b"pwned")])]).unwrap_err();
    assert!(e.to_string().contains("absolute"), "{e}");
    assert_eq!(
        fs::read_to_string(host.path().join("victim")).unwrap(),
        "host data"
    );
}

#[test]
fn absolute_symlink_then_write_through_it_stays_in_the_root() {
    let host = host_target();
    let hp = host.path().display().to_string();
    let t = tree();
    // The link sits below the root, so an absolute target must restart at the root,
    // not at the link's directory.
    let report = unpack(
        &t,
        &[layer(&[
            dir("usr"),
            symlink("usr/evil", &hp),
            file("usr/evil/victim", b"pwned"),
            file("usr/evil/new", b"n"),
        ])],
    )
    .unwrap();
    // The host is untouched...
    assert_eq!(
        fs::read_to_string(host.path().join("victim")).unwrap(),
        "host data"
    );
    assert_eq!(names(host.path()), ["victim"]);
    // ...and the writes landed where the link points when the tree is `/`.
    let inside = t.root.join(hp.trim_start_matches('/'));
    assert_eq!(fs::read_to_string(inside.join("victim")).unwrap(), "pwned");
    assert!(inside.join("new").is_file());
    assert_eq!(fs::read_link(t.root.join("usr/evil")).unwrap(), host.path());
    assert_eq!(report.entries, 4);
}

#[test]
fn relative_symlinks_cannot_climb_out_of_the_root() {
    let host = host_target();
    let t = tree();
    let up = "../../../../../../../../../..";
    let through = format!("up{}/victim", host.path().display());
    unpack(&t, &[layer(&[symlink("up", up), file(&through, b"pwned")])]).unwrap();
    assert_eq!(
        fs::read_to_string(host.path().join("victim")).unwrap(),
        "host data"
    );
    let inside = t
        .root
        .join(host.path().strip_prefix("/").unwrap())
        .join("victim");
    assert_eq!(fs::read_to_string(inside).unwrap(), "pwned");
}

#[test]
fn a_symlink_in_the_last_component_is_replaced_not_followed() {
    let host = host_target();
    let victim = host.path().join("victim").display().to_string();
    let t = tree();
    unpack(&t, &[layer(&[symlink("f", &victim), file("f", b"mine")])]).unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "host data");
    let m = fs::symlink_metadata(t.root.join("f")).unwrap();
    assert!(m.is_file());
    assert_eq!(fs::read_to_string(t.root.join("f")).unwrap(), "mine");
    // Same across layers, and for a directory entry over a symlink to a host dir.
    let t = tree();
    let hp = host.path().display().to_string();
    unpack(
        &t,
        &[
            layer(&[symlink("d", &hp)]),
            layer(&[dir("d"), file("d/victim", b"x")]),
        ],
    )
    .unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "host data");
    assert!(fs::symlink_metadata(t.root.join("d")).unwrap().is_dir());
}

#[test]
fn whiteouts_cannot_name_paths_outside_the_root() {
    let host = host_target();
    let t = tree();
    for name in ["../.wh.victim", ".wh..", ".wh..."] {
        let e = unpack(&t, &[layer(&[file(name, b"")])]);
        assert!(e.is_err(), "{name} accepted");
    }
    // Through an absolute symlink: it removes the tree's file, never the host's.
    let hp = host.path().display().to_string();
    let t = tree();
    let inside = format!("{}/victim", hp.trim_start_matches('/'));
    unpack(
        &t,
        &[
            layer(&[file(&inside, b"lower"), symlink("link", &hp)]),
            layer(&[file("link/.wh.victim", b"")]),
        ],
    )
    .unwrap();
    assert_eq!(
        fs::read_to_string(host.path().join("victim")).unwrap(),
        "host data"
    );
    assert!(!t.root.join(&inside).exists());
}

#[test]
fn device_nodes_and_fifos_are_skipped_and_recorded() {
    let t = tree();
    let mut dev = file("dev/sda", b"");
    dev.kind = EntryType::Block;
    let mut null = file("dev/null", b"");
    null.kind = EntryType::Char;
    let mut fifo = file("run/pipe", b"");
    fifo.kind = EntryType::Fifo;
    let r = unpack(&t, &[layer(&[dir("dev"), dev, null, fifo])]).unwrap();
    assert!(!t.root.join("dev/sda").exists());
    assert!(!t.root.join("dev/null").exists());
    assert!(!t.root.join("run/pipe").exists());
    let kinds: Vec<(&str, &str)> = r
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("/dev/null", "character device"),
            ("/dev/sda", "block device"),
            ("/run/pipe", "fifo")
        ]
    );
}

#[test]
fn setuid_setgid_and_sticky_bits_are_cleared() {
    let t = tree();
    let mut suid = file("bin/su", b"\x7fELF");
    suid.mode = 0o4755;
    let mut sgid = file("bin/wall", b"\x7fELF");
    sgid.mode = 0o2755;
    let mut tmp = dir("tmp");
    tmp.mode = 0o1777;
    let r = unpack(&t, &[layer(&[suid, sgid, tmp])]).unwrap();
    let mode = |p: &str| fs::metadata(t.root.join(p)).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode("bin/su"), 0o755);
    assert_eq!(mode("bin/wall"), 0o755);
    assert_eq!(mode("tmp"), 0o777);
    assert_eq!(r.special_bits_cleared, ["/bin/su", "/bin/wall", "/tmp"]);
}

#[test]
fn hard_links_must_stay_beneath_the_root() {
    let host = host_target();
    let victim = host.path().join("victim");
    let before = fs::metadata(&victim).unwrap().nlink();
    let t = tree();
    // Climbing out, absolute, or through an absolute symlink to the host.
    for link in ["../../victim".to_owned(), victim.display().to_string()] {
        let e = unpack(&t, &[layer(&[hardlink("hl", &link)])]).unwrap_err();
        assert!(matches!(e, ImageError::UnsafeEntry { .. }), "{link}: {e}");
    }
    let hp = host.path().display().to_string();
    let e = unpack(
        &t,
        &[layer(&[
            symlink("evil", &hp),
            hardlink("hl", "evil/victim"),
        ])],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("no such file beneath the image root"),
        "{e}"
    );
    assert_eq!(fs::metadata(&victim).unwrap().nlink(), before);
    // A link to a directory is refused; an ordinary one works.
    let t = tree();
    assert!(unpack(&t, &[layer(&[dir("d"), hardlink("hl", "d")])]).is_err());
    let t = tree();
    unpack(&t, &[layer(&[file("a", b"same"), hardlink("b", "a")])]).unwrap();
    let (a, b) = (
        fs::metadata(t.root.join("a")).unwrap(),
        fs::metadata(t.root.join("b")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
}

#[test]
fn a_link_to_a_symlink_links_the_symlink_itself() {
    let host = host_target();
    let t = tree();
    let victim = host.path().join("victim").display().to_string();
    unpack(&t, &[layer(&[symlink("s", &victim), hardlink("h", "s")])]).unwrap();
    let h = fs::symlink_metadata(t.root.join("h")).unwrap();
    assert!(h.file_type().is_symlink());
    assert_eq!(fs::metadata(&victim).unwrap().nlink(), 1);
}

#[test]
fn whiteouts_and_opaque_directories_hide_lower_layers() {
    let t = tree();
    let lower = layer(&[
        dir("a"),
        file("a/x", b"x"),
        dir("a/sub"),
        file("a/sub/deep", b"d"),
        dir("b"),
        file("b/z", b"z"),
        file("keep", b"k"),
    ]);
    // The opaque marker comes after some of this layer's own entries: they stay.
    let upper = layer(&[
        file("a/new", b"n"),
        dir("a/sub"),
        file("a/sub/fresh", b"f"),
        file("a/.wh..wh..opq", b""),
        file(".wh.b", b""),
        file(".wh.missing", b""),
    ]);
    unpack(&t, &[lower, upper]).unwrap();
    assert_eq!(names(&t.root), ["a", "keep"]);
    assert_eq!(names(&t.root.join("a")), ["new", "sub"]);
    assert_eq!(names(&t.root.join("a/sub")), ["fresh"]);
}

#[test]
fn later_layers_replace_files_dirs_and_links() {
    let t = tree();
    let mut ro = dir("ro");
    ro.mode = 0o555;
    let mut locked = file("ro/locked", b"old");
    locked.mode = 0o000;
    unpack(
        &t,
        &[
            layer(&[ro, locked, dir("d"), file("d/f", b"1"), file("x", b"file")]),
            layer(&[
                file("ro/locked", b"new"),
                file("d", b"now a file"),
                dir("x"),
                file("x/y", b"y"),
            ]),
        ],
    )
    .unwrap();
    assert_eq!(fs::read_to_string(t.root.join("ro/locked")).unwrap(), "new");
    assert_eq!(fs::read_to_string(t.root.join("d")).unwrap(), "now a file");
    assert!(t.root.join("x/y").is_file());
    // The read-only directory keeps its mode, plus the owner's bits.
    let m = fs::metadata(t.root.join("ro"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(m, 0o755);
    let m = fs::metadata(t.root.join("ro/locked")).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o644);
    assert_eq!(m.mtime(), 1_700_000_000);
}

#[test]
fn symlink_loops_and_files_as_directories_are_errors() {
    let t = tree();
    let e = unpack(
        &t,
        &[layer(&[
            symlink("a", "b"),
            symlink("b", "a"),
            file("a/x", b""),
        ])],
    )
    .unwrap_err();
    assert!(e.to_string().contains("symbolic links"), "{e}");
    let t = tree();
    let e = unpack(&t, &[layer(&[file("f", b""), file("f/x", b"")])]).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
}

#[test]
fn owners_other_than_root_are_recorded_not_applied() {
    let t = tree();
    let mut b = tar::Builder::new(Vec::new());
    let mut h = Header::new_gnu();
    h.set_path("home/user/file").unwrap();
    h.set_size(2);
    h.set_mode(0o600);
    h.set_uid(1000);
    h.set_gid(1000);
    h.set_cksum();
    b.append(&h, &b"hi"[..]).unwrap();
    let r = unpack(&t, &[b.into_inner().unwrap()]).unwrap();
    assert_eq!(
        r.owners.get("/home/user/file").map(String::as_str),
        Some("1000:1000")
    );
    let me = fs::metadata(t.root.parent().unwrap()).unwrap().uid();
    assert_eq!(
        fs::metadata(t.root.join("home/user/file")).unwrap().uid(),
        me
    );
}

#[test]
fn garbage_is_not_a_layer() {
    let t = tree();
    let e = unpack(&t, &[b"this is not a tar archive at all, just some text that is long enough to fill a block: ".repeat(8)]).unwrap_err();
    assert!(e.to_string().contains("not a valid tar archive"), "{e}");
}

#[test]
fn a_directory_replaced_by_a_symlink_does_not_carry_its_mode_outside() {
    // `x/etc/` (0777) first, then `x` -> outside: the mode recorded for `x/etc` must
    // not be applied through the symlink to the host's `etc`.
    let host = host_target();
    let outside_etc = host.path().join("etc");
    fs::create_dir(&outside_etc).unwrap();
    fs::set_permissions(&outside_etc, fs::Permissions::from_mode(0o750)).unwrap();
    let climb = "../".repeat(8) + host.path().display().to_string().trim_start_matches('/');
    let t = tree();
    let mut wide = dir("x/etc");
    wide.mode = 0o777;
    unpack(&t, &[layer(&[dir("x"), wide, symlink("x", &climb)])]).unwrap();
    let mode = fs::metadata(&outside_etc).unwrap().mode() & 0o7777;
    assert_eq!(mode, 0o750, "the host directory's mode was changed");
    // The same with an absolute target.
    let t = tree();
    let mut wide = dir("y/etc");
    wide.mode = 0o777;
    let abs = host.path().display().to_string();
    unpack(&t, &[layer(&[dir("y"), wide, symlink("y", &abs)])]).unwrap();
    assert_eq!(fs::metadata(&outside_etc).unwrap().mode() & 0o7777, 0o750);
}

#[test]
fn an_opaque_directory_replaced_by_a_symlink_prunes_nothing_outside() {
    // `a/`, its opaque marker, then `a` -> outside: pruning after the layer must not
    // follow the symlink and delete the host's files.
    let host = host_target();
    let climb = "../".repeat(8) + host.path().display().to_string().trim_start_matches('/');
    let t = tree();
    unpack(
        &t,
        &[layer(&[
            dir("a"),
            file("a/.wh..wh..opq", b""),
            symlink("a", &climb),
        ])],
    )
    .unwrap();
    assert_eq!(
        fs::read_to_string(host.path().join("victim")).unwrap(),
        "host data"
    );
    let t = tree();
    let abs = host.path().display().to_string();
    unpack(
        &t,
        &[layer(&[
            dir("b"),
            file("b/.wh..wh..opq", b""),
            symlink("b", &abs),
        ])],
    )
    .unwrap();
    assert_eq!(names(host.path()), ["victim"]);
}
