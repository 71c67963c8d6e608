//! Which tool an executable file is, whatever it is called: the approval gate rates
//! `x -rf /` as `rm` when `x` is a symlink to, a hard link of, or a copy of the
//! sandbox's `rm`.
//!
//! The tools are the programs the risk rules name (`rm`, `dd`, `curl`, `python*` …),
//! as found in the sandbox's own system folders (the host's read-only, or the image's).
//! A file is known by device and inode; a file that is not one of them but has the
//! size of one is compared by content (a copy). A file known under a few names
//! (`python3` and `python3.11`, `sh` and `dash`) is the first of them; one known
//! under many (a multi-call binary such as busybox) names no tool: its argv[0] decides.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::sync::{Mutex, PoisonError};

use vg_policy::risk::{Classifier, rule::Matcher};
use vg_sandbox::trace::{ExecFile, FileIdentity};

/// Where the tools are looked for, inside the sandbox.
const FOLDERS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];
/// More names than this for one file: a multi-call binary.
const MAX_NAMES: usize = 4;
/// A copy is compared by content only up to this size (the biggest tools, such as
/// interpreters, are a few MiB).
const MAX_COMPARED: u64 = 64 * 1024 * 1024;

/// The sandbox's tools by identity.
pub struct Tools {
    /// (device, inode) → the names the tool is found under.
    by_file: HashMap<(u64, u64), Vec<String>>,
    /// size → (path inside, name) of every tool of that size, for copies.
    by_size: HashMap<u64, Vec<(Vec<u8>, String)>>,
    /// Content digests already computed, by identity.
    digests: Mutex<HashMap<FileIdentity, [u8; 32]>>,
    root: Option<std::fs::File>,
}

impl Tools {
    /// An empty table: no file is known as any tool.
    pub fn none() -> Self {
        Tools {
            by_file: HashMap::new(),
            by_size: HashMap::new(),
            digests: Mutex::new(HashMap::new()),
            root: None,
        }
    }

    /// Finds the tools the rules of `classifier` name in the sandbox whose root is
    /// `root` (a directory opened from `/proc/PID/root`).
    pub fn find(classifier: &Classifier, root: std::fs::File) -> Self {
        let names = Names::of(classifier);
        let mut tools = Tools::none();
        for folder in FOLDERS {
            let Ok(entries) = ExecFile::list_dir_in(root.as_fd(), folder.as_bytes()) else {
                continue;
            };
            for entry in entries {
                let Ok(name) = String::from_utf8(entry) else {
                    continue;
                };
                if !names.matches(&name) {
                    continue;
                }
                let path = format!("{folder}/{name}").into_bytes();
                let Some(file) = ExecFile::open_in(root.as_fd(), b"/", &path) else {
                    continue;
                };
                tools.add(&file, path, name);
            }
        }
        tools.root = Some(root);
        tools
    }

    fn add(&mut self, file: &ExecFile, path: Vec<u8>, name: String) {
        let key = (file.identity.dev, file.identity.ino);
        match self.by_file.get_mut(&key) {
            Some(names) => {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            None => {
                self.by_file.insert(key, vec![name.clone()]);
                self.by_size
                    .entry(file.size)
                    .or_default()
                    .push((path, name));
            }
        }
    }

    /// The name a file known under `names` is rated by.
    fn pick(names: &[String]) -> Option<String> {
        (names.len() <= MAX_NAMES)
            .then(|| names.iter().min().cloned())
            .flatten()
    }

    /// The tool `file` is, if any.
    pub fn name_of(&self, file: &ExecFile) -> Option<String> {
        let key = (file.identity.dev, file.identity.ino);
        if let Some(names) = self.by_file.get(&key) {
            return Self::pick(names);
        }
        let candidates = self.by_size.get(&file.size)?;
        if file.size > MAX_COMPARED {
            return None;
        }
        let digest = self.digest(file)?;
        let root = self.root.as_ref()?;
        candidates.iter().find_map(|(path, _)| {
            let tool = ExecFile::open_in(root.as_fd(), b"/", path)?;
            let names = self.by_file.get(&(tool.identity.dev, tool.identity.ino))?;
            (self.digest(&tool)? == digest)
                .then(|| Self::pick(names))
                .flatten()
        })
    }

    fn digest(&self, file: &ExecFile) -> Option<[u8; 32]> {
        use std::io::Read;
        let mut digests = self.digests.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(digest) = digests.get(&file.identity) {
            return Some(*digest);
        }
        let mut content = Vec::new();
        file.reader()
            .ok()?
            .take(MAX_COMPARED)
            .read_to_end(&mut content)
            .ok()?;
        let digest = vg_records::chain::digest(&content);
        if digests.len() > 1024 {
            digests.clear();
        }
        digests.insert(file.identity, digest);
        Some(digest)
    }
}

/// The program names the exec rules match on: literal names, and patterns.
struct Names {
    literal: std::collections::HashSet<String>,
    patterns: Vec<vg_policy::risk::rule::Glob>,
}

impl Names {
    fn of(classifier: &Classifier) -> Self {
        let mut names = Names {
            literal: std::collections::HashSet::new(),
            patterns: Vec::new(),
        };
        for rule in classifier.rules() {
            let Matcher::Exec(m) = &rule.matcher else {
                continue;
            };
            for glob in &m.executable {
                let text = glob.text.rsplit('/').next().unwrap_or(&glob.text);
                if text.contains(['*', '?']) {
                    names.patterns.push(glob.clone());
                } else {
                    names.literal.insert(text.to_owned());
                }
            }
        }
        names
    }

    fn matches(&self, name: &str) -> bool {
        self.literal.contains(name) || self.patterns.iter().any(|g| g.matches(name))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn classifier() -> Classifier {
        Classifier::new(vg_policy::risk::defaults::rules().unwrap())
    }

    #[test]
    fn symlinks_and_copies_of_a_tool_are_that_tool() {
        let tools = Tools::find(&classifier(), std::fs::File::open("/").unwrap());
        let root = std::fs::File::open("/").unwrap();
        let rm = ExecFile::open_in(root.as_fd(), b"/", b"/usr/bin/rm").unwrap();
        assert_eq!(tools.name_of(&rm).as_deref(), Some("rm"));
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("innocent");
        std::os::unix::fs::symlink("/usr/bin/rm", &link).unwrap();
        let copy = dir.path().join("copy");
        std::fs::copy("/usr/bin/rm", &copy).unwrap();
        let other = dir.path().join("other");
        std::fs::copy("/usr/bin/true", &other).unwrap();
        let open = |p: &std::path::Path| {
            ExecFile::open_in(root.as_fd(), b"/", p.as_os_str().as_encoded_bytes()).unwrap()
        };
        assert_eq!(tools.name_of(&open(&link)).as_deref(), Some("rm"));
        assert_eq!(tools.name_of(&open(&copy)).as_deref(), Some("rm"));
        assert_eq!(tools.name_of(&open(&other)), None);
        // Known under two names (python3 and python3.x here): still that tool.
        let py = ExecFile::open_in(root.as_fd(), b"/", b"/usr/bin/python3").unwrap();
        assert!(
            tools.name_of(&py).is_some_and(|n| n.starts_with("python3")),
            "{:?}",
            tools.name_of(&py)
        );
        // A program no rule names is no tool.
        let ls = ExecFile::open_in(root.as_fd(), b"/", b"/usr/bin/ls").unwrap();
        assert_eq!(tools.name_of(&ls), None);
    }
}
