//! `vectraguard image`: pull, load, import, list, inspect and remove container images
//! in the store under `$VECTRAGUARD_HOME/images` (default `~/.vectraguard/images`),
//! on top of the `vg-image` library.
//!
//! Exit statuses: 0 on success, 125 when the command fails, with an error that says
//! what to do.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use vg_image::{Digest, Progress, ProgressEvent, Reference, Store};

use crate::EXIT_FAILURE;
use vg_session::host;

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Pull an image from a registry (Docker Hub for names without a host)
    #[command(
        after_help = "NAME is [HOST[:PORT]/]REPOSITORY[:TAG|@sha256:DIGEST]: `ubuntu` is\ndocker.io/library/ubuntu:latest. A multi-platform image gives this host's\nplatform. Credentials come from ~/.docker/config.json (`auths`, or $DOCKER_CONFIG);\nregistries on localhost are spoken to over plain HTTP, all others over HTTPS.\n\nExamples:\n  vectraguard image pull debian:bookworm\n  vectraguard image pull 127.0.0.1:5000/team/tool:1.2\n  vectraguard image pull ubuntu@sha256:<64 hex digits>"
    )]
    Pull(PullArgs),
    /// Load images from a `docker save` archive, an OCI archive or an OCI layout
    #[command(
        after_help = "Examples:\n  docker save debian:bookworm -o debian.tar && vectraguard image load -i debian.tar\n  vectraguard image load -i image-oci/ --tag local/app:1     # an OCI layout directory"
    )]
    Load(LoadArgs),
    /// Import a root filesystem tarball as a one-layer image, like `docker import`
    #[command(
        after_help = "Examples:\n  sudo debootstrap --variant=minbase bookworm root && tar -C root -c . > root.tar\n  vectraguard image import root.tar --tag local/bookworm"
    )]
    Import(ImportArgs),
    /// List the images in the store
    #[command(visible_alias = "list")]
    Ls(LsArgs),
    /// Remove images, then what no image needs any more (layers, unpacked roots)
    #[command(visible_alias = "remove")]
    Rm(RmArgs),
    /// Show images' details (configuration, layers, digests) as JSON
    Inspect(InspectArgs),
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// The image: NAME[:TAG|@sha256:DIGEST]
    #[arg(value_name = "NAME")]
    pub reference: String,
    /// Print only the image's name, no progress
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The archive (.tar, .tar.gz) or OCI layout directory
    #[arg(long = "input", short = 'i', value_name = "FILE", required = true)]
    pub input: PathBuf,
    /// Name the image (the archive must hold exactly one); needed when the archive
    /// does not name it
    #[arg(long, short = 't', value_name = "NAME")]
    pub tag: Option<String>,
    /// Print only the names, no progress
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The root filesystem tarball (.tar or .tar.gz)
    #[arg(value_name = "ROOTFS.tar")]
    pub tarball: PathBuf,
    /// The image's name
    #[arg(long, short = 't', value_name = "NAME", required = true)]
    pub tag: String,
    /// Print only the image id, no progress
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Print a JSON array instead of a table
    #[arg(long)]
    pub json: bool,
    /// Show the manifest digests
    #[arg(long)]
    pub digests: bool,
    /// Print only the names
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// Names or image ids (a prefix of at least 4 hex digits)
    #[arg(required = true, value_name = "IMAGE")]
    pub images: Vec<String>,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Names or image ids (a prefix of at least 4 hex digits)
    #[arg(required = true, value_name = "IMAGE")]
    pub images: Vec<String>,
}

pub fn run(cmd: ImageCommand) -> i32 {
    let result = (|| {
        let store = open_store()?;
        let stdout = io::stdout();
        let mut out = io::BufWriter::new(stdout.lock());
        match cmd {
            ImageCommand::Pull(a) => pull(&store, &a, &mut out),
            ImageCommand::Load(a) => load(&store, &a, &mut out),
            ImageCommand::Import(a) => import(&store, &a, &mut out),
            ImageCommand::Ls(a) => list(&store, &a, &mut out),
            ImageCommand::Rm(a) => remove(&store, &a, &mut out),
            ImageCommand::Inspect(a) => inspect(&store, &a, &mut out),
        }?;
        out.flush()?;
        Ok::<_, anyhow::Error>(())
    })();
    match result {
        Ok(()) => 0,
        Err(e) => {
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e)));
            EXIT_FAILURE
        }
    }
}

/// Pulls `name` for `sandbox run --image`, with the same progress display as
/// `image pull` (on stderr: the command's own output stays clean).
pub fn pull_for_run(store: &Store, name: &str) -> Result<()> {
    let reference = parse_name(name)?;
    let mut progress = Reporter::new(false);
    store
        .pull(&reference, docker_config().as_deref(), &mut progress)
        .with_context(|| format!("cannot pull {reference}"))?;
    progress.finish();
    eprintln!("vectraguard: pulled {reference}");
    Ok(())
}

pub fn open_store() -> Result<Store> {
    Ok(Store::open(&vg_session::home::images_root()?)?)
}

/// Docker's client config: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
fn docker_config() -> Option<PathBuf> {
    std::env::var_os("DOCKER_CONFIG")
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join("config.json"))
        .or_else(|| host::invoker_home().map(|h| h.join(".docker").join("config.json")))
}

fn parse_name(input: &str) -> Result<Reference> {
    Ok(Reference::parse(input)?)
}

fn pull(store: &Store, a: &PullArgs, out: &mut dyn Write) -> Result<()> {
    let reference = parse_name(&a.reference)?;
    let mut progress = Reporter::new(a.quiet);
    let entry = store
        .pull(&reference, docker_config().as_deref(), &mut progress)
        .with_context(|| format!("cannot pull {reference}"))?;
    progress.finish();
    if a.quiet {
        writeln!(out, "{reference}")?;
    } else {
        writeln!(out, "Pulled: {reference}")?;
        if let Some(d) = &entry.repo_digest {
            writeln!(out, "Digest: {d}")?;
        }
        writeln!(out, "Image id: {}", entry.config)?;
    }
    Ok(())
}

fn load(store: &Store, a: &LoadArgs, out: &mut dyn Write) -> Result<()> {
    let tag = a.tag.as_deref().map(parse_name).transpose()?;
    let mut progress = Reporter::new(a.quiet);
    let loaded = store
        .load(&a.input, tag.as_ref(), &mut progress)
        .with_context(|| format!("cannot load {}", a.input.display()))?;
    progress.finish();
    for image in loaded {
        for name in image.names {
            if a.quiet {
                writeln!(out, "{name}")?;
            } else {
                writeln!(out, "Loaded image: {name} ({})", image.entry.config)?;
            }
        }
    }
    Ok(())
}

fn import(store: &Store, a: &ImportArgs, out: &mut dyn Write) -> Result<()> {
    let name = parse_name(&a.tag)?;
    let mut progress = Reporter::new(a.quiet);
    let entry = store
        .import(&a.tarball, &name, &mut progress)
        .with_context(|| format!("cannot import {}", a.tarball.display()))?;
    progress.finish();
    if a.quiet {
        writeln!(out, "{}", entry.config)?;
    } else {
        writeln!(out, "Imported: {name}")?;
        writeln!(out, "Image id: {}", entry.config)?;
    }
    Ok(())
}

fn list(store: &Store, a: &LsArgs, out: &mut dyn Write) -> Result<()> {
    let images = store.list()?;
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &images)?;
        writeln!(out)?;
        return Ok(());
    }
    if a.quiet {
        for i in &images {
            writeln!(out, "{}", i.name)?;
        }
        return Ok(());
    }
    let width = images
        .iter()
        .map(|i| i.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let digest_col = |d: &str| {
        if a.digests {
            format!("{d:<72}  ")
        } else {
            String::new()
        }
    };
    writeln!(
        out,
        "{:<width$}  {}{:<12}  {:>10}  {:<19}  SOURCE",
        "NAME",
        digest_col("DIGEST"),
        "IMAGE ID",
        "SIZE",
        "CREATED"
    )?;
    for i in &images {
        let created = i
            .created
            .as_deref()
            .map(|c| c.get(..19).unwrap_or(c).replace('T', " "))
            .unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{:<width$}  {}{:<12}  {:>10}  {:<19}  {}",
            i.name,
            digest_col(&i.repo_digest.as_ref().unwrap_or(&i.digest).to_string()),
            i.id.short(),
            human_bytes(i.size),
            created,
            i.source
        )?;
    }
    Ok(())
}

fn remove(store: &Store, a: &RmArgs, out: &mut dyn Write) -> Result<()> {
    let report = store.remove(&a.images)?;
    for name in &report.untagged {
        writeln!(out, "Untagged: {name}")?;
    }
    let c = &report.collected;
    writeln!(
        out,
        "Deleted: {} blob(s), {}, {} unpacked root filesystem(s)",
        c.blobs,
        human_bytes(c.blob_bytes),
        c.rootfs
    )?;
    if c.rootfs_in_use > 0 {
        writeln!(
            out,
            "Kept: {} root filesystem(s) in use by a running sandbox; the next `image rm` removes them",
            c.rootfs_in_use
        )?;
    }
    Ok(())
}

fn inspect(store: &Store, a: &InspectArgs, out: &mut dyn Write) -> Result<()> {
    let mut all = Vec::new();
    for input in &a.images {
        all.extend(store.inspect(input)?);
    }
    serde_json::to_writer_pretty(&mut *out, &all)?;
    writeln!(out)?;
    Ok(())
}

/// `1.5 MiB`.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Progress on stderr: a bar per layer on a terminal, plain lines otherwise,
/// nothing with `--quiet`.
struct Reporter {
    quiet: bool,
    bars: Option<MultiProgress>,
    layers: Vec<(Digest, u64)>,
    layer_bars: Vec<ProgressBar>,
    status: Option<ProgressBar>,
}

impl Reporter {
    fn new(quiet: bool) -> Self {
        let bars = (!quiet && io::stderr().is_terminal())
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Self {
            quiet,
            bars,
            layers: Vec::new(),
            layer_bars: Vec::new(),
            status: None,
        }
    }

    fn finish(&mut self) {
        if let Some(s) = self.status.take() {
            s.finish_and_clear();
        }
    }

    fn label(&self, index: usize) -> String {
        let short = self.layers.get(index).map_or("?", |(d, _)| d.short());
        format!("layer {}/{} {short}", index + 1, self.layers.len())
    }
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{msg:32} [{bar:30}] {bytes:>10}/{total_bytes:<10} {bytes_per_sec}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
}

impl Progress for Reporter {
    fn event(&mut self, event: ProgressEvent<'_>) {
        if self.quiet {
            return;
        }
        match (&self.bars, event) {
            (None, ProgressEvent::Status(s)) => eprintln!("{s}"),
            (Some(mp), ProgressEvent::Status(s)) => {
                let _ = mp.println(s);
            }
            (bars, ProgressEvent::Layers { layers }) => {
                self.layers = layers.to_vec();
                if let Some(mp) = bars {
                    self.layer_bars = layers
                        .iter()
                        .enumerate()
                        .map(|(i, (d, size))| {
                            let pb = mp.add(ProgressBar::new(*size));
                            pb.set_style(bar_style());
                            pb.set_message(format!(
                                "layer {}/{} {}",
                                i + 1,
                                layers.len(),
                                d.short()
                            ));
                            pb
                        })
                        .collect();
                } else {
                    let total: u64 = layers.iter().map(|(_, s)| s).sum();
                    eprintln!("{} layer(s), {}", layers.len(), human_bytes(total));
                }
            }
            (None, ProgressEvent::LayerStart { index }) => {
                let size = self.layers.get(index).map_or(0, |l| l.1);
                eprintln!("{}: downloading {}", self.label(index), human_bytes(size));
            }
            (Some(_), ProgressEvent::LayerStart { .. }) => {}
            (None, ProgressEvent::LayerBytes { .. }) => {}
            (Some(_), ProgressEvent::LayerBytes { index, bytes }) => {
                if let Some(pb) = self.layer_bars.get(index) {
                    pb.inc(bytes);
                }
            }
            (None, ProgressEvent::LayerDone { index, cached }) => {
                let what = if cached {
                    "already in the store"
                } else {
                    "verified"
                };
                eprintln!("{}: {what}", self.label(index));
            }
            (Some(_), ProgressEvent::LayerDone { index, cached }) => {
                if let Some(pb) = self.layer_bars.get(index) {
                    if cached {
                        pb.set_position(pb.length().unwrap_or(0));
                    }
                    pb.finish();
                }
            }
            (None, ProgressEvent::Unpacking { index }) => {
                eprintln!("unpacking layer {}", index + 1);
            }
            (Some(mp), ProgressEvent::Unpacking { index }) => {
                let s = self
                    .status
                    .get_or_insert_with(|| mp.add(ProgressBar::new_spinner()));
                s.set_message(format!("unpacking layer {}", index + 1));
                s.tick();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<ImageCommand, clap::Error> {
        let argv = std::iter::once("vectraguard").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Image(cmd) => cmd.0,
            other => panic!("parsed as {other:?}"),
        })
    }

    #[test]
    fn commands_parse_and_required_arguments_are_enforced() {
        assert!(matches!(
            parse(&["image", "pull", "ubuntu"]),
            Ok(ImageCommand::Pull(_))
        ));
        assert!(parse(&["image", "pull"]).is_err());
        assert!(parse(&["image", "load"]).is_err());
        let Ok(ImageCommand::Load(l)) = parse(&["image", "load", "-i", "x.tar", "--tag", "a:b"])
        else {
            panic!("load did not parse");
        };
        assert_eq!(
            (l.input, l.tag.as_deref()),
            (PathBuf::from("x.tar"), Some("a:b"))
        );
        assert!(parse(&["image", "import", "root.tar"]).is_err());
        assert!(parse(&["image", "import", "root.tar", "--tag", "x"]).is_ok());
        assert!(parse(&["image", "rm"]).is_err());
        assert!(parse(&["image", "inspect"]).is_err());
        assert!(matches!(
            parse(&["image", "list", "--json"]),
            Ok(ImageCommand::Ls(_))
        ));
    }

    #[test]
    fn sizes_are_human() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(200 << 20), "200.0 MiB");
    }
}
