//! [`EnvProvisioner`]: gives each worktree a flow makes what the project
//! needs — the `[worktree]` section of `orchestrator.toml`, or, without
//! one, the ignored dependency folders of known ecosystems it finds.
//!
//! ```text
//!  first provision of a run: the plan
//!    [worktree] copy  ─┐
//!    detected folders ─┴─► items (path, folder or file, venv?) + how folders
//!    (node_modules/,        are shared: copy-on-write clones when the file
//!     .venv/, venv/ that     system has them, else hard links to the
//!     git ignores)           engine's snapshot, or copies (link = "copy")
//!  every provision:
//!    items ─► the worktree (share.rs) ─► venvs relocated ─► setup lines
//!    (sh -c, [worktree] env, time limit) ─► Provisioned (what, how, times)
//! ```
//!
//! Nothing is ever written into the main tree. Commands run in a worktree
//! get [`Provisioner::env`]: `[worktree] env` (`{repo}` and `{worktree}`
//! replaced), and for a provided virtualenv `VIRTUAL_ENV` and its `bin/`
//! first on `PATH`, with `PATH` entries inside the main tree moved into the
//! worktree.

mod share;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use orchestrator_core::command::{CommandRunner, CommandSpec};
use orchestrator_core::worktree::{
    ProvideHow, ProvidedPath, ProvisionError, Provisioned, Provisioner, SetupRun,
};
use tokio::sync::OnceCell;

use crate::config::{LinkMode, WorktreeSection};
use crate::git::GitVcs;

/// Ignored folders provided without configuration: the dependency folders
/// of npm/yarn/pnpm and of Python virtualenvs (`.venv/`, `venv/`: only
/// with a `pyvenv.cfg`).
pub const DETECTED_FOLDERS: [&str; 3] = ["node_modules", ".venv", "venv"];

/// Bytes of a failed setup command's output kept in the error.
const SETUP_OUTPUT_TAIL: usize = 4000;

/// One path to provide.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    /// Relative to the repository root, without a trailing `/`.
    rel: String,
    /// A folder (else a file).
    dir: bool,
    /// Found by detection rather than configured.
    detected: bool,
    /// A Python virtualenv (it has `pyvenv.cfg`).
    venv: bool,
}

/// What every worktree of the run gets, decided once.
#[derive(Debug, Clone)]
struct Plan {
    items: Vec<Item>,
    /// How folders are shared.
    how: ProvideHow,
    /// The main tree's root, as given and canonical.
    main: Vec<PathBuf>,
}

/// The real [`Provisioner`]: `[worktree]` (or detection), see the module
/// documentation.
#[derive(Debug)]
pub struct EnvProvisioner {
    section: WorktreeSection,
    runner: Arc<dyn CommandRunner>,
    plan: OnceCell<Result<Plan, ProvisionError>>,
    /// One snapshot sync at a time (slots are provisioned concurrently).
    snapshot: tokio::sync::Mutex<()>,
    /// The plan's virtualenvs and main roots, for [`Provisioner::env`].
    known: Mutex<Option<Plan>>,
}

impl EnvProvisioner {
    /// Provisions by `section`, running setup lines through `runner`.
    pub fn new(section: WorktreeSection, runner: Arc<dyn CommandRunner>) -> Self {
        Self {
            section,
            runner,
            plan: OnceCell::new(),
            snapshot: tokio::sync::Mutex::new(()),
            known: Mutex::new(None),
        }
    }

    /// Whether this provisioner could give a worktree anything at all
    /// (something configured, or detection on).
    pub fn is_active(&self) -> bool {
        self.section.detects()
            || !self.section.copy.is_empty()
            || !self.section.setup.is_empty()
            || !self.section.env.is_empty()
    }

    /// The plan, made on first use.
    async fn plan(&self, main: &Path) -> Result<Plan, ProvisionError> {
        self.plan
            .get_or_init(|| async {
                let plan = make_plan(&self.section, main).await;
                if let Ok(p) = &plan {
                    *self.known.lock().unwrap_or_else(PoisonError::into_inner) = Some(p.clone());
                }
                plan
            })
            .await
            .clone()
    }

    /// Provides one item in the worktree.
    async fn provide(
        &self,
        plan: &Plan,
        item: &Item,
        worktree: &Path,
    ) -> Result<ProvidedPath, ProvisionError> {
        let source = plan.main[0].join(&item.rel);
        let dest = worktree.join(&item.rel);
        let fail = |message: String| ProvisionError::Provide {
            path: item.rel.clone(),
            message,
        };
        if dest.symlink_metadata().is_ok() {
            return Err(fail(format!(
                "{} already exists in the worktree (is it tracked by git?)",
                dest.display()
            )));
        }
        let main = plan.main.clone();
        let wt = worktree.to_path_buf();
        let (how, files) = if !item.dir {
            let (s, d) = (source.clone(), dest.clone());
            blocking(move || share::copy_file(&s, &d))
                .await
                .map_err(|e| fail(e.to_string()))?;
            (ProvideHow::Copied, 1)
        } else {
            match plan.how {
                ProvideHow::LinkedSnapshot => {
                    let snapshot = snapshot_path(&plan.main[0], &item.rel);
                    let _one = self.snapshot.lock().await;
                    let (s, d) = (source.clone(), dest.clone());
                    let counts = blocking(move || {
                        if let Some(parent) = snapshot.parent() {
                            std::fs::create_dir_all(parent)?;
                        }
                        share::link_snapshot(&s, &snapshot, &d, &main, &wt)
                    })
                    .await
                    .map_err(|e| fail(e.to_string()))?;
                    (ProvideHow::LinkedSnapshot, counts.files)
                }
                how => {
                    let (s, d) = (source.clone(), dest.clone());
                    let reflink = how == ProvideHow::Reflinked;
                    let counts = blocking(move || share::clone_tree(&s, &d, &main, &wt, reflink))
                        .await
                        .map_err(|e| fail(e.to_string()))?;
                    (how, counts.files)
                }
            }
        };
        if item.venv {
            let (venv, main, wt) = (dest.clone(), plan.main.clone(), worktree.to_path_buf());
            blocking(move || share::relocate_venv(&venv, &main, &wt))
                .await
                .map_err(|e| fail(format!("relocating the virtualenv: {e}")))?;
        }
        Ok(ProvidedPath {
            path: item.rel.clone(),
            how,
            files,
            detected: item.detected,
        })
    }

    /// Runs one setup line in the worktree.
    async fn setup(&self, line: &str, worktree: &Path) -> Result<SetupRun, ProvisionError> {
        let mut spec = CommandSpec::shell(line, worktree);
        spec.env = self.env(worktree);
        spec.time_limit = Some(self.section.setup_timeout());
        let started = Instant::now();
        let failed = |outcome: String, output: String| ProvisionError::Setup {
            command: line.to_owned(),
            outcome,
            output,
        };
        let out = self
            .runner
            .run(spec)
            .await
            .map_err(|e| failed("could not run".to_owned(), e.to_string()))?;
        let output = tail(&format!("{}{}", out.stdout, out.stderr));
        if out.timed_out {
            return Err(failed(
                format!(
                    "timed out after {}s ([worktree] setup_timeout_secs)",
                    self.section.setup_timeout().as_secs()
                ),
                output,
            ));
        }
        match out.exit_code {
            Some(0) => Ok(SetupRun {
                command: line.to_owned(),
                duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            }),
            Some(code) => Err(failed(format!("exited with status {code}"), output)),
            None => Err(failed("was killed by a signal".to_owned(), output)),
        }
    }
}

#[async_trait]
impl Provisioner for EnvProvisioner {
    async fn provision(&self, main: &Path, worktree: &Path) -> Result<Provisioned, ProvisionError> {
        let started = Instant::now();
        let plan = self.plan(main).await?;
        let mut report = Provisioned::default();
        for item in &plan.items {
            report
                .provided
                .push(self.provide(&plan, item, worktree).await?);
        }
        for line in &self.section.setup {
            report.setup.push(self.setup(line, worktree).await?);
        }
        report.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Ok(report)
    }

    fn env(&self, worktree: &Path) -> BTreeMap<String, String> {
        let known = self
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let wt = worktree.to_string_lossy().into_owned();
        let repo = known
            .as_ref()
            .map(|p| p.main[0].to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut env: BTreeMap<String, String> = self
            .section
            .env
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.replace("{worktree}", &wt).replace("{repo}", &repo),
                )
            })
            .collect();
        let Some(plan) = known else {
            return env;
        };
        let venvs: Vec<&Item> = plan.items.iter().filter(|i| i.venv).collect();
        let path = std::env::var_os("PATH").map(|p| p.to_string_lossy().into_owned());
        let mut entries: Vec<String> = venvs
            .iter()
            .map(|v| {
                worktree
                    .join(&v.rel)
                    .join("bin")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let mut moved = false;
        for entry in path.as_deref().unwrap_or_default().split(':') {
            let relocated = share::relocate_target(Path::new(entry), &plan.main, worktree);
            moved |= relocated != Path::new(entry);
            entries.push(relocated.to_string_lossy().into_owned());
        }
        if let Some(venv) = venvs.first() {
            env.entry("VIRTUAL_ENV".to_owned())
                .or_insert_with(|| worktree.join(&venv.rel).to_string_lossy().into_owned());
        }
        if (!venvs.is_empty() || moved) && path.is_some() {
            env.entry("PATH".to_owned())
                .or_insert_with(|| entries.join(":"));
        }
        env
    }
}

/// Decides what each worktree gets: configured paths checked, known
/// folders detected, and how folders are shared.
async fn make_plan(section: &WorktreeSection, main: &Path) -> Result<Plan, ProvisionError> {
    let canonical = tokio::fs::canonicalize(main)
        .await
        .unwrap_or_else(|_| main.to_path_buf());
    let mut roots = vec![canonical.clone()];
    if main != canonical {
        roots.push(main.to_path_buf());
    }
    let git = GitVcs::open(&canonical)
        .await
        .map_err(|e| ProvisionError::Config(format!("the repository cannot be read: {e}")))?;
    let ignored = git
        .ignored_entries()
        .await
        .map_err(|e| ProvisionError::Config(format!("ignored files cannot be listed: {e}")))?;
    let mut items = configured_items(&section.copy, &canonical, &ignored)?;
    if section.detects() {
        detect_items(&ignored, &canonical, &mut items);
    }
    let how = choose_how(section.link, &items, &canonical).await;
    Ok(Plan {
        items,
        how,
        main: roots,
    })
}

/// The configured `copy` entries, each checked: readable, and ignored by
/// git (a worktree already has what git tracks).
fn configured_items(
    copy: &[String],
    canonical: &Path,
    ignored: &[String],
) -> Result<Vec<Item>, ProvisionError> {
    let mut items = Vec::new();
    for (i, rel) in copy.iter().enumerate() {
        let rel = rel.trim_end_matches('/').to_owned();
        let full = canonical.join(&rel);
        let meta = full.symlink_metadata().map_err(|e| {
            ProvisionError::Config(format!(
                "copy[{i}] = {rel:?}: {} cannot be read: {e}",
                full.display()
            ))
        })?;
        let is_ignored = ignored
            .iter()
            .any(|e| e.trim_end_matches('/') == rel || rel.starts_with(e.as_str()));
        if !is_ignored {
            return Err(ProvisionError::Config(format!(
                "copy[{i}] = {rel:?} is not ignored by git: a worktree already has what git tracks (and untracked files are never given to an agent)"
            )));
        }
        items.push(Item {
            venv: full.join("pyvenv.cfg").is_file(),
            dir: meta.is_dir(),
            rel,
            detected: false,
        });
    }
    Ok(items)
}

/// Adds the known ignored folders not configured already: `node_modules`
/// and Python virtualenvs (a folder with a `pyvenv.cfg`).
fn detect_items(ignored: &[String], canonical: &Path, items: &mut Vec<Item>) {
    for entry in ignored {
        let Some(dir) = entry.strip_suffix('/') else {
            continue;
        };
        let name = dir.rsplit('/').next().unwrap_or(dir);
        if !DETECTED_FOLDERS.contains(&name) || items.iter().any(|i| i.rel == dir) {
            continue;
        }
        let venv = canonical.join(dir).join("pyvenv.cfg").is_file();
        if name != "node_modules" && !venv {
            continue;
        }
        items.push(Item {
            rel: dir.to_owned(),
            dir: true,
            detected: true,
            venv,
        });
    }
}

/// How folders are shared: copied when configured so, else reflinked when
/// the filesystem can (probed with a file of the first folder), else linked
/// to a snapshot.
async fn choose_how(link: LinkMode, items: &[Item], canonical: &Path) -> ProvideHow {
    match link {
        LinkMode::Copy => ProvideHow::Copied,
        LinkMode::Auto => {
            let probe = items
                .iter()
                .filter(|i| i.dir)
                .find_map(|i| share::first_file(&canonical.join(&i.rel)));
            let into = orchestrator_core::state::worktree_root(canonical);
            let works = match probe {
                Some(file) => blocking(move || {
                    std::fs::create_dir_all(&into)?;
                    Ok(share::reflink_works(&file, &into))
                })
                .await
                .unwrap_or(false),
                None => false,
            };
            if works {
                ProvideHow::Reflinked
            } else {
                ProvideHow::LinkedSnapshot
            }
        }
    }
}

/// Where the engine keeps its snapshot of a folder of the repository at
/// `main`: beside the repository's worktrees, outside the repository.
fn snapshot_path(main: &Path, rel: &str) -> PathBuf {
    let key: String = rel
        .chars()
        .map(|c| if c == '/' { '%' } else { c })
        .collect();
    orchestrator_core::state::worktree_root(main)
        .join(".snapshots")
        .join(key)
}

/// Runs blocking file-system work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(std::io::Error::other)?
}

/// The end of a command's output, at most [`SETUP_OUTPUT_TAIL`] bytes.
fn tail(text: &str) -> String {
    let text = text.trim_end();
    if text.len() <= SETUP_OUTPUT_TAIL {
        return text.to_owned();
    }
    let mut start = text.len() - SETUP_OUTPUT_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}
