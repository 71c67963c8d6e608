//! vg-seccomp's rule model as the engines' seccomp JSON profile (the format of
//! Docker's `--security-opt seccomp=FILE`, which Podman shares, turned by runc
//! or crun into a filter through libseccomp).
//!
//! The translation is exact for what the format can express. The model checks a
//! syscall's rules in order, first match wins; the format has no order (libseccomp
//! merges all rules of a syscall into one tree), no negated masked comparison, and
//! runc splits an entry with two comparisons on the same argument into separate
//! entries (an OR, not an AND). So for each syscall the argument space is cut into
//! disjoint boxes (one ternary pattern, mask and value, per argument) with the
//! action the model gives them; each box whose action is not the default becomes
//! one entry, with at most one `SCMP_CMP_MASKED_EQ` (or `SCMP_CMP_EQ`) per
//! argument. A condition on an argument's low 32 bits (the model's
//! [`Width::Low32`]) is a mask within the low 32 bits, so garbage in the high half
//! changes nothing, as in the model.
//!
//! What the JSON cannot express, and what happens instead:
//! - the action for another architecture ([`Filter::bad_arch_action`], our filter
//!   kills the process): only `SCMP_ARCH_X86_64` is listed, so an i386 (`int
//!   0x80`) call gets libseccomp's bad-architecture action, which runc sets to
//!   killing the thread (SIGSYS), not the process;
//! - the action for x32 numbers ([`Filter::x32_action`], `EPERM` in our profile):
//!   libseccomp treats them as another architecture, so the calling thread is
//!   killed with SIGSYS (seen with Docker 20.10 and Podman 4.3 on runc 1.1);
//! - numbers the engine's libseccomp does not know by name: the format names
//!   syscalls, and runc skips a name it does not know, so a call newer than the
//!   host's libseccomp gets the default action (refused, never allowed); and runc
//!   answers `ENOSYS` rather than our `EPERM` for numbers above the highest it
//!   knows (seen: syscall 1000 fails with `ENOSYS`), so that programs fall back;
//! - [`Action::Notify`]: the engines' CLIs give no way to serve a seccomp listener,
//!   so exec tracing and refusal reports cannot go through this profile:
//!   [`seccomp_profile`] refuses a filter that notifies.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use vg_seccomp::rules::AUDIT_ARCH_X86_64;
use vg_seccomp::{Action, Filter, Width};

/// Why a filter cannot be exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeccompExportError {
    #[error(
        "the seccomp filter hands calls to a listener (exec tracing or refusal reports), which Docker and Podman cannot serve: build the profile without those options"
    )]
    Notify,
    #[error("the seccomp filter is for architecture {0:#x}, not x86_64")]
    Arch(u32),
    #[error("a seccomp rule names argument {0}; syscalls have 6")]
    ArgIndex(u8),
}

const ARGS: usize = 6;

/// A ternary pattern on one argument: the bits in `mask` equal those of
/// `value` (`value` has no bits outside `mask`). `mask == 0` is "anything".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Cube {
    mask: u64,
    value: u64,
}

impl Cube {
    const ANY: Cube = Cube { mask: 0, value: 0 };

    fn intersect(self, other: Cube) -> Option<Cube> {
        let common = self.mask & other.mask;
        (self.value & common == other.value & common).then_some(Cube {
            mask: self.mask | other.mask,
            value: self.value | other.value,
        })
    }

    fn contains(self, other: Cube) -> bool {
        other.mask & self.mask == self.mask && other.value & self.mask == self.value
    }
}

/// A box: one cube per argument, all of which must hold.
type Boxed = [Cube; ARGS];

const UNIVERSE: Boxed = [Cube::ANY; ARGS];

fn intersect_box(a: &Boxed, b: &Boxed) -> Option<Boxed> {
    let mut out = UNIVERSE;
    for i in 0..ARGS {
        out[i] = a[i].intersect(b[i])?;
    }
    Some(out)
}

/// Intersection of two sets of disjoint boxes (the result is disjoint too).
fn intersect(a: &[Boxed], b: &[Boxed]) -> Vec<Boxed> {
    a.iter()
        .flat_map(|x| b.iter().filter_map(move |y| intersect_box(x, y)))
        .collect()
}

/// A literal `arg & mask == value` (negated or not) on the raw 64-bit argument.
#[derive(Debug, Clone, Copy)]
struct Literal {
    arg: usize,
    mask: u64,
    value: u64,
    negated: bool,
}

impl Literal {
    fn of(cond: &vg_seccomp::Cond) -> Result<Literal, SeccompExportError> {
        let arg = usize::from(cond.arg);
        if arg >= ARGS {
            return Err(SeccompExportError::ArgIndex(cond.arg));
        }
        let (mask, value, negated) = cond.cmp.normal_form();
        // The model compares `arg & width & mask`: a mask within the width says
        // the same of the raw register.
        let width = match cond.width {
            Width::Low32 => u64::from(u32::MAX),
            Width::Full64 => u64::MAX,
        };
        Ok(Literal {
            arg,
            mask: mask & width,
            value,
            negated,
        })
    }

    /// The arguments for which it holds, as disjoint boxes.
    fn boxes(self) -> Vec<Boxed> {
        let Literal {
            arg,
            mask,
            value,
            negated,
        } = self;
        let never = value & !mask != 0;
        let with = |cube: Cube| {
            let mut b = UNIVERSE;
            b[arg] = cube;
            b
        };
        match (negated, never) {
            (false, true) => Vec::new(),
            (true, true) => vec![UNIVERSE],
            (false, false) => vec![with(Cube { mask, value })],
            // Not equal: the first bit of the mask (from the top) that differs,
            // with every earlier one equal. Disjoint.
            (true, false) => {
                let mut out = Vec::new();
                let mut prefix = 0u64;
                for bit in (0..64).rev().map(|b| 1u64 << b).filter(|b| mask & b != 0) {
                    out.push(with(Cube {
                        mask: prefix | bit,
                        value: (value & prefix) | (!value & bit),
                    }));
                    prefix |= bit;
                }
                out
            }
        }
    }

    fn negate(self) -> Literal {
        Literal {
            negated: !self.negated,
            ..self
        }
    }
}

/// The arguments for which all `literals` hold, and those for which some
/// does not, each as disjoint boxes.
fn split(literals: &[Literal]) -> (Vec<Boxed>, Vec<Boxed>) {
    let mut holds = vec![UNIVERSE];
    let mut fails = Vec::new();
    for lit in literals {
        // Fails here: everything before held, this one does not.
        fails.extend(intersect(&holds, &lit.negate().boxes()));
        holds = intersect(&holds, &lit.boxes());
    }
    (holds, fails)
}

/// Merges boxes that differ in one bit of one argument, and drops boxes that
/// another contains, until nothing changes: fewer entries, same set.
fn minimise(mut boxes: Vec<Boxed>) -> Vec<Boxed> {
    loop {
        boxes.sort();
        boxes.dedup();
        let mut changed = false;
        'outer: for i in 0..boxes.len() {
            for j in 0..boxes.len() {
                if i == j {
                    continue;
                }
                let (a, b) = (boxes[i], boxes[j]);
                if (0..ARGS).all(|k| a[k].contains(b[k])) {
                    boxes.remove(j);
                    changed = true;
                    break 'outer;
                }
                let differing: Vec<usize> = (0..ARGS).filter(|&k| a[k] != b[k]).collect();
                if let [k] = differing[..] {
                    let diff = a[k].value ^ b[k].value;
                    if a[k].mask == b[k].mask && diff.count_ones() == 1 {
                        let mut merged = a;
                        merged[k] = Cube {
                            mask: a[k].mask & !diff,
                            value: a[k].value & !diff,
                        };
                        boxes[i] = merged;
                        boxes.remove(j);
                        changed = true;
                        break 'outer;
                    }
                }
            }
        }
        if !changed {
            return boxes;
        }
    }
}

/// An entry's identity: action, errno, its comparisons as JSON text.
type EntryKey = (&'static str, Option<u16>, String);

/// `(action, errnoRet)` in the format's words.
fn action_json(action: Action) -> Result<(&'static str, Option<u16>), SeccompExportError> {
    Ok(match action {
        Action::Allow => ("SCMP_ACT_ALLOW", None),
        Action::Errno(e) => ("SCMP_ACT_ERRNO", Some(e)),
        Action::KillProcess => ("SCMP_ACT_KILL_PROCESS", None),
        Action::Log => ("SCMP_ACT_LOG", None),
        Action::Notify => return Err(SeccompExportError::Notify),
    })
}

fn args_json(b: &Boxed) -> Vec<Value> {
    b.iter()
        .enumerate()
        .filter(|(_, c)| c.mask != 0)
        .map(|(index, c)| {
            if c.mask == u64::MAX {
                json!({"index": index, "value": c.value, "valueTwo": 0, "op": "SCMP_CMP_EQ"})
            } else {
                // libseccomp's masked equality: `value` is the mask, `valueTwo` the datum.
                json!({"index": index, "value": c.mask, "valueTwo": c.value, "op": "SCMP_CMP_MASKED_EQ"})
            }
        })
        .collect()
}

/// `filter` as a Docker/Podman seccomp profile (see the module's documentation
/// for what the format cannot express). Deterministic: the same filter gives the
/// same JSON. For the sandbox's rules:
/// `seccomp_profile(&vg_seccomp::default_profile(ProfileOptions::default()))`.
pub fn seccomp_profile(filter: &Filter) -> Result<Value, SeccompExportError> {
    if filter.arch != AUDIT_ARCH_X86_64 {
        return Err(SeccompExportError::Arch(filter.arch));
    }
    let (default, default_errno) = action_json(filter.default_action)?;
    // The actions other ways into the filter have must exist in the format too.
    action_json(filter.bad_arch_action)?;
    action_json(filter.x32_action)?;

    // Syscalls in the order the filter first names them.
    let mut syscalls: Vec<(u32, &'static str)> = Vec::new();
    for rule in &filter.rules {
        if !syscalls.iter().any(|(nr, _)| *nr == rule.nr) {
            syscalls.push((rule.nr, rule.name));
        }
    }
    // (action, conditions) -> names; BTreeMap keys keep the output deterministic.
    let mut entries: BTreeMap<EntryKey, (Vec<Value>, Vec<&str>)> = BTreeMap::new();
    for (nr, name) in syscalls {
        let mut rest = vec![UNIVERSE];
        let mut by_action: BTreeMap<Action, Vec<Boxed>> = BTreeMap::new();
        for rule in filter.rules_for(nr) {
            let literals = rule
                .conditions
                .iter()
                .map(Literal::of)
                .collect::<Result<Vec<_>, _>>()?;
            let (holds, fails) = split(&literals);
            let region = intersect(&rest, &holds);
            rest = intersect(&rest, &fails);
            if rule.action != filter.default_action && !region.is_empty() {
                action_json(rule.action)?;
                by_action.entry(rule.action).or_default().extend(region);
            }
        }
        for (action, boxes) in by_action {
            let (act, errno) = action_json(action)?;
            for b in minimise(boxes) {
                let args = args_json(&b);
                let key = (act, errno, Value::Array(args.clone()).to_string());
                entries
                    .entry(key)
                    .or_insert_with(|| (args, Vec::new()))
                    .1
                    .push(name);
            }
        }
    }
    let syscalls: Vec<Value> = entries
        .into_iter()
        .map(|((action, errno, _), (args, names))| {
            let mut entry = json!({"names": names, "action": action});
            if let Some(e) = errno {
                entry["errnoRet"] = json!(e);
            }
            if !args.is_empty() {
                entry["args"] = Value::Array(args);
            }
            entry
        })
        .collect();
    let mut profile = json!({
        "defaultAction": default,
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": syscalls,
    });
    if let Some(e) = default_errno {
        profile["defaultErrnoRet"] = json!(e);
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vg_seccomp::{Cmp, Cond, ProfileOptions, Syscall, SyscallRule, default_profile};

    /// One entry of the JSON, read once: action, comparisons `(index, mask, value)`.
    struct Entry {
        names: Vec<String>,
        action: Action,
        conds: Vec<(usize, u64, u64)>,
    }

    fn action_of(a: &Value, e: Option<&Value>) -> Action {
        match a.as_str().unwrap() {
            "SCMP_ACT_ALLOW" => Action::Allow,
            "SCMP_ACT_ERRNO" => Action::Errno(
                e.and_then(Value::as_u64)
                    .and_then(|e| u16::try_from(e).ok())
                    .unwrap_or(u16::MAX),
            ),
            "SCMP_ACT_KILL_PROCESS" => Action::KillProcess,
            "SCMP_ACT_LOG" => Action::Log,
            other => panic!("action {other}"),
        }
    }

    /// The JSON as a runtime reads it (runc: each entry an AND of its
    /// comparisons, which the export keeps to one per argument).
    fn entries(profile: &Value) -> Vec<Entry> {
        profile["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| {
                let mut seen = [false; ARGS];
                let conds = entry["args"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|c| {
                        let i = usize::try_from(c["index"].as_u64().unwrap()).unwrap();
                        assert!(!seen[i], "two comparisons on argument {i}: {entry}");
                        seen[i] = true;
                        let (v, v2) = (
                            c["value"].as_u64().unwrap(),
                            c["valueTwo"].as_u64().unwrap(),
                        );
                        match c["op"].as_str().unwrap() {
                            "SCMP_CMP_EQ" => (i, u64::MAX, v),
                            "SCMP_CMP_MASKED_EQ" => (i, v, v2),
                            op => panic!("op {op}"),
                        }
                    })
                    .collect();
                Entry {
                    names: entry["names"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|n| n.as_str().unwrap().to_owned())
                        .collect(),
                    action: action_of(&entry["action"], entry.get("errnoRet")),
                    conds,
                }
            })
            .collect()
    }

    /// What a runtime does with the JSON for a native x86_64 call: the entry
    /// naming the call whose comparisons all hold (never two different ones);
    /// none, the default.
    fn evaluate(profile: &Value, entries: &[&Entry], args: &[u64; ARGS]) -> Action {
        let mut matched: Vec<Action> = entries
            .iter()
            .filter(|e| {
                e.conds
                    .iter()
                    .all(|&(i, mask, value)| args[i] & mask == value)
            })
            .map(|e| e.action)
            .collect();
        matched.sort();
        matched.dedup();
        assert!(
            matched.len() <= 1,
            "{args:x?}: overlapping entries {matched:?}"
        );
        matched
            .pop()
            .unwrap_or_else(|| action_of(&profile["defaultAction"], profile.get("defaultErrnoRet")))
    }

    /// Argument vectors that reach each comparison of these rules from both sides.
    fn samples(rules: &[&SyscallRule]) -> Vec<[u64; ARGS]> {
        let mut values = vec![0, u64::MAX, 1, 0xffff_ffff, 0xdead_beef_0000_0000];
        for c in rules.iter().flat_map(|r| &r.conditions) {
            let (mask, value, _) = c.cmp.normal_form();
            values.push(value);
            values.push(value | 0xffff_ffff_0000_0000);
            values.push(value ^ 0x1_0000_0000);
            for bit in (0..64).map(|b| 1u64 << b).filter(|b| mask & b != 0) {
                values.push(value ^ bit);
            }
        }
        values.sort_unstable();
        values.dedup();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut out = vec![[0; ARGS], [u64::MAX; ARGS]];
        if rules.iter().all(|r| r.conditions.is_empty()) {
            return out;
        }
        for &v in &values {
            for slot in 0..ARGS {
                let mut a = [0; ARGS];
                a[slot] = v;
                out.push(a);
            }
            for &w in &values {
                out.push([v, w, 0, 0, 0, 0]);
            }
            out.push([random(), v, random(), 0, 0, 0]);
        }
        for _ in 0..500 {
            out.push([random(), random(), random(), random(), random(), random()]);
        }
        out
    }

    fn check_faithful(filter: &Filter) -> Value {
        let profile = seccomp_profile(filter).unwrap();
        let all = entries(&profile);
        let mut names: Vec<(u32, &str)> = filter.rules.iter().map(|r| (r.nr, r.name)).collect();
        names.sort_unstable();
        names.dedup();
        for (nr, name) in names {
            let mine: Vec<&Entry> = all
                .iter()
                .filter(|e| e.names.iter().any(|n| n == name))
                .collect();
            let rules: Vec<&SyscallRule> = filter.rules_for(nr).collect();
            for args in samples(&rules) {
                assert_eq!(
                    evaluate(&profile, &mine, &args),
                    filter.action_for(nr, args),
                    "{name} {args:x?}"
                );
            }
        }
        // A call no rule names gets the default action.
        assert_eq!(evaluate(&profile, &[], &[0; ARGS]), filter.default_action);
        profile
    }

    #[test]
    fn the_default_profile_is_exported_faithfully() {
        let filter = default_profile(ProfileOptions::default());
        let profile = check_faithful(&filter);
        assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(profile["defaultErrnoRet"], libc::EPERM);
        assert_eq!(profile["architectures"], json!(["SCMP_ARCH_X86_64"]));
        let entries = profile["syscalls"].as_array().unwrap();
        // Small enough for libseccomp and the kernel's 4096 instructions.
        assert!(entries.len() < 120, "{} entries", entries.len());
        let allowed_outright: Vec<&str> = entries
            .iter()
            .filter(|e| e["action"] == "SCMP_ACT_ALLOW" && e.get("args").is_none())
            .flat_map(|e| {
                e["names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
            })
            .collect();
        for name in ["read", "write", "execve", "openat", "exit_group"] {
            assert!(allowed_outright.contains(&name), "{name}");
        }
        // Denied outright, or only with conditions: never named unconditionally.
        for name in [
            "ptrace",
            "unshare",
            "keyctl",
            "mount",
            "io_uring_setup",
            "bpf",
            "clone",
            "ioctl",
            "personality",
            "socket",
            "clone3",
        ] {
            assert!(!allowed_outright.contains(&name), "{name}");
        }
        let clone3 = entries
            .iter()
            .find(|e| e["names"].as_array().unwrap().iter().any(|n| n == "clone3"))
            .unwrap();
        assert_eq!(clone3["action"], "SCMP_ACT_ERRNO");
        assert_eq!(clone3["errnoRet"], libc::ENOSYS);
        // clone: allowed exactly when no namespace flag is set, in the low 32 bits.
        let clone: Vec<&Value> = entries
            .iter()
            .filter(|e| e["names"].as_array().unwrap().iter().any(|n| n == "clone"))
            .collect();
        assert_eq!(clone.len(), 1, "{clone:?}");
        assert_eq!(
            clone[0]["args"],
            json!([{"index": 0, "value": 0x7e02_0080u64, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}])
        );
        assert_eq!(seccomp_profile(&filter).unwrap(), profile, "deterministic");
    }

    #[test]
    fn filters_that_notify_are_refused() {
        for opts in [
            ProfileOptions {
                trace_exec: true,
                ..ProfileOptions::default()
            },
            ProfileOptions {
                report_refusals: true,
                ..ProfileOptions::default()
            },
        ] {
            assert_eq!(
                seccomp_profile(&default_profile(opts)),
                Err(SeccompExportError::Notify)
            );
        }
        let mut f = default_profile(ProfileOptions::default());
        f.arch = 0x4000_0003;
        assert_eq!(
            seccomp_profile(&f),
            Err(SeccompExportError::Arch(0x4000_0003))
        );
    }

    #[test]
    fn order_negation_and_widths_survive_the_translation() {
        let read = Syscall {
            name: "read",
            nr: 0,
        };
        let write = Syscall {
            name: "write",
            nr: 1,
        };
        let mut f = Filter::new(Action::Errno(1));
        // First match wins: an allow after a narrower kill, a log overlapping both.
        f.push(SyscallRule::when(
            read,
            vec![Cond::arg32(0, Cmp::Eq(5)), Cond::arg64(1, Cmp::Ne(7))],
            Action::KillProcess,
        ));
        f.push(SyscallRule::when(
            read,
            vec![Cond::arg64(
                1,
                Cmp::MaskedNe {
                    mask: 0xf0,
                    value: 0x10,
                },
            )],
            Action::Log,
        ));
        f.push(SyscallRule::when(
            read,
            vec![Cond::arg32(
                0,
                Cmp::MaskedEq {
                    mask: 0x3,
                    value: 0x1,
                },
            )],
            Action::Allow,
        ));
        f.push(SyscallRule::always(read, Action::Errno(22)));
        // A condition that can never hold, then a default-equal rule.
        f.push(SyscallRule::when(
            write,
            vec![Cond::arg64(
                2,
                Cmp::MaskedEq {
                    mask: 0x1,
                    value: 0x2,
                },
            )],
            Action::Allow,
        ));
        f.push(SyscallRule::when(
            write,
            vec![Cond::arg64(2, Cmp::Eq(9))],
            Action::Errno(1),
        ));
        f.push(SyscallRule::always(write, Action::Allow));
        let profile = check_faithful(&f);
        let all = entries(&profile);
        let named = |name: &str| -> Vec<&Entry> {
            all.iter()
                .filter(|e| e.names.iter().any(|n| n == name))
                .collect()
        };
        assert_eq!(
            evaluate(
                &profile,
                &named("read"),
                &[0xffff_0000_0000_0005, 8, 0, 0, 0, 0]
            ),
            Action::KillProcess
        );
        assert_eq!(
            evaluate(&profile, &named("read"), &[5, 7, 0, 0, 0, 0]),
            Action::Log
        );
        assert_eq!(
            evaluate(&profile, &named("write"), &[0, 0, 9, 0, 0, 0]),
            Action::Errno(1)
        );
        assert_eq!(
            evaluate(&profile, &named("write"), &[0, 0, 8, 0, 0, 0]),
            Action::Allow
        );
    }

    #[test]
    fn minimising_keeps_the_set() {
        let cube = |mask, value| {
            let mut b = UNIVERSE;
            b[1] = Cube { mask, value };
            b
        };
        // 0..=3 in the low two bits: one cube.
        let merged = minimise(vec![cube(3, 0), cube(3, 1), cube(3, 2), cube(3, 3)]);
        assert_eq!(merged, vec![cube(0, 0)]);
        // A contained box goes.
        assert_eq!(minimise(vec![cube(1, 1), cube(3, 1)]), vec![cube(1, 1)]);
        // Not mergeable: two bits apart.
        assert_eq!(minimise(vec![cube(3, 0), cube(3, 3)]).len(), 2);
    }
}
