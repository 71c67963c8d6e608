//! Step three of planning: the argv to execute. A command given after `--` is run as
//! given; a script on the host runs with the interpreter of its `#!` line (or `sh`),
//! at its path inside the sandbox; with an image, Docker's rules apply on top
//! ([`crate::image::ImageRun::argv`]).

use std::path::Path;

use vg_policy::view::ResolvedMount;

use crate::exit::{EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, Error};
use crate::image::ImageRun;
use crate::mounts;
use crate::request::Request;

/// The argv of `request`'s command, inside the sandbox.
pub fn argv(
    request: &Request,
    image: Option<&ImageRun>,
    mounts: &[ResolvedMount],
) -> Result<Vec<String>, Error> {
    let (args, cwd) = (&request.args, &request.cwd);
    let Some(img) = image else {
        return command_argv(args, request.after_dash_dash, cwd, mounts);
    };
    // As with `docker run IMAGE ls`: with an image, arguments that do not
    // name a script on the host are the command itself.
    let script = args
        .first()
        .is_some_and(|a| !request.after_dash_dash && cwd.join(a).is_file());
    let given = if script {
        command_argv(args, request.after_dash_dash, cwd, mounts)?
    } else {
        args.clone()
    };
    let entrypoint = request.image.as_ref().and_then(|i| i.entrypoint.as_deref());
    Ok(img.argv(given, entrypoint, request.shell)?)
}

/// The argv to execute: `-- CMD ARGS...` as given, or the script with its interpreter.
pub fn command_argv(
    args: &[String],
    after_dash_dash: bool,
    cwd: &Path,
    mounts: &[ResolvedMount],
) -> Result<Vec<String>, Error> {
    match args.split_first() {
        None => Err(anyhow::anyhow!(
            "nothing to run: give a script path or `-- CMD ARGS...` (see `vectraguard sandbox run --help`)"
        )
        .into()),
        Some(_) if after_dash_dash => Ok(args.to_vec()),
        Some((first, _)) if first.starts_with('-') => Err(anyhow::anyhow!(
            "unknown option '{first}' (see `vectraguard sandbox run --help`; put the command after `--`)"
        )
        .into()),
        Some((script, rest)) => script_argv(Path::new(script), rest, cwd, mounts),
    }
}

fn script_argv(
    script: &Path,
    rest: &[String],
    cwd: &Path,
    mounts: &[ResolvedMount],
) -> Result<Vec<String>, Error> {
    let host_path = std::fs::canonicalize(cwd.join(script)).map_err(|e| {
        Error::new(
            EXIT_NOT_FOUND,
            anyhow::anyhow!("script {}: {e}", script.display()),
        )
    })?;
    let inside = mounts::to_container(&host_path, mounts).ok_or_else(|| {
        anyhow::anyhow!(
            "script {} is outside the workspace; mount its directory with --mount",
            host_path.display()
        )
    })?;
    let head = read_head(&host_path).map_err(|e| {
        Error::new(
            EXIT_CANNOT_EXECUTE,
            anyhow::anyhow!("script {}: {e}", host_path.display()),
        )
    })?;
    let mut argv = shebang(&head).unwrap_or_else(|| vec!["sh".to_owned()]);
    argv.push(inside.display().to_string());
    argv.extend(rest.iter().cloned());
    Ok(argv)
}

fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = vec![0u8; 256];
    let n = std::fs::File::open(path)?.read(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// `#!interp [one-arg]`, split as the kernel does: the interpreter, then everything
/// after the first run of blanks as a single argument.
pub fn shebang(head: &[u8]) -> Option<Vec<String>> {
    let line = head.strip_prefix(b"#!")?;
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let line = String::from_utf8_lossy(&line[..end]);
    let line = line.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
    if line.is_empty() {
        return None;
    }
    let mut parts = line.splitn(2, [' ', '\t']);
    let interp = parts.next()?.to_owned();
    let mut argv = vec![interp];
    if let Some(arg) = parts
        .next()
        .map(|a| a.trim_matches([' ', '\t']))
        .filter(|a| !a.is_empty())
    {
        argv.push(arg.to_owned());
    }
    Some(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_is_split_like_the_kernel() {
        assert_eq!(shebang(b"#!/bin/sh\necho"), Some(vec!["/bin/sh".into()]));
        assert_eq!(
            shebang(b"#! /usr/bin/env  python3 -u\n"),
            Some(vec!["/usr/bin/env".into(), "python3 -u".into()])
        );
        assert_eq!(shebang(b"echo hi\n"), None);
        assert_eq!(shebang(b"#!\n"), None);
    }
}
