//! A worktree slot's first build starts from the main tree's.
//!
//! Each slot has its own Cargo target folder (kept across runs under
//! `state::build_cache_root`), so its first test run used to build every
//! dependency the user's own `target/` already held: on a small crate most
//! of the run. When the slot's folder does not exist yet, it is seeded from
//! the main tree's `debug` profile, once:
//!
//! - the compiled dependencies (`deps/*.rlib`, `deps/*.rmeta`) are hard
//!   links: rustc replaces these by renaming a new file over the old one,
//!   never by writing into it, so a rebuild in the slot never reaches the
//!   user's file, nor another slot's;
//! - the small files cargo and build scripts write in place (fingerprints,
//!   dep-info, build-script output folders, proc-macro libraries) are
//!   copies, their modification times kept (cargo compares them);
//! - the packages built from the user's own sources (those `Cargo.lock`
//!   lists without a `source`: the workspace's members and path
//!   dependencies) get no fingerprint and no build folder, so cargo builds
//!   them again from the slot's checkout: a fingerprint copied from the
//!   user's build could call a build of their uncommitted files fresh;
//! - test binaries and `incremental/` are left out (they are the user's
//!   packages', rebuilt anyway, and most of the folder's size).
//!
//! Nothing is written under the user's folder. The seed is made beside the
//! slot's folder and renamed into place, so a kill leaves either no folder
//! (the next run seeds again) or a whole one. No `Cargo.lock`, or no main
//! build: the slot starts cold, as before. A file that vanishes while it is
//! read (the user building at the same time) is left out; cargo rebuilds
//! what it misses.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path};

/// What the seed does with one file of the main tree's profile folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// A hard link (a copy where linking fails).
    Link,
    /// A copy with the source's modification time.
    Copy,
    /// Left out.
    Skip,
}

/// What becomes of the file at `rel` (relative to the profile folder,
/// `debug/`), given the packages built from the user's sources and whether
/// the file is executable (module docs).
pub(crate) fn take(rel: &Path, path_packages: &BTreeSet<String>, executable: bool) -> Take {
    let parts: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p),
            _ => None,
        })
        .collect();
    let [top, entry, ..] = parts.as_slice() else {
        return Take::Skip;
    };
    let entry = entry.to_string_lossy();
    match top.to_str() {
        Some(".fingerprint" | "build") => {
            let unit = entry
                .rsplit_once('-')
                .map_or(entry.as_ref(), |(name, _)| name);
            if path_packages.contains(unit) {
                Take::Skip
            } else {
                Take::Copy
            }
        }
        Some("deps") if parts.len() == 2 => {
            match Path::new(entry.as_ref())
                .extension()
                .and_then(OsStr::to_str)
            {
                Some("rlib" | "rmeta") => Take::Link,
                Some("exe" | "pdb") => Take::Skip,
                None if executable => Take::Skip,
                _ => Take::Copy,
            }
        }
        _ => Take::Skip,
    }
}

/// The packages `Cargo.lock` lists without a `source` (built from the
/// user's files); `None` when the text has no package.
pub(crate) fn path_packages(lock: &str) -> Option<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut any = false;
    for block in lock.split("[[package]]").skip(1) {
        let fields = block.split("\n[").next().unwrap_or_default();
        let mut name = None;
        let mut sourced = false;
        for line in fields.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            match key.trim() {
                "name" => name = Some(value.trim().trim_matches('"').to_owned()),
                "source" => sourced = true,
                _ => {}
            }
        }
        if let Some(name) = name {
            any = true;
            if !sourced {
                out.insert(name);
            }
        }
    }
    any.then_some(out)
}

/// What a seed did: files linked and copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Seeded {
    pub linked: u64,
    pub copied: u64,
}

/// Seeds `slot_target` from the main tree's target folder `main_target`
/// for the repository at `repo` (module docs). `Ok(None)`: nothing to do
/// (the slot's folder exists, or there is no lock file or main build).
pub(crate) fn seed_slot(
    repo: &Path,
    main_target: &Path,
    slot_target: &Path,
) -> io::Result<Option<Seeded>> {
    if slot_target.exists() {
        return Ok(None);
    }
    let source = main_target.join("debug");
    let Some(packages) = std::fs::read_to_string(repo.join("Cargo.lock"))
        .ok()
        .and_then(|text| path_packages(&text))
    else {
        return Ok(None);
    };
    if !source.join("deps").is_dir() {
        return Ok(None);
    }
    let mut partial = slot_target.as_os_str().to_owned();
    partial.push(".seeding");
    let partial = Path::new(&partial);
    if partial.exists() {
        std::fs::remove_dir_all(partial)?;
    }
    let mut seeded = Seeded::default();
    for top in [".fingerprint", "build", "deps"] {
        walk(
            &source,
            Path::new(top),
            &partial.join("debug"),
            &packages,
            &mut seeded,
        )?;
    }
    std::fs::rename(partial, slot_target)?;
    Ok(Some(seeded))
}

/// Seeds `rel` (a folder under `source`) into `dest`, recursively.
fn walk(
    source: &Path,
    rel: &Path,
    dest: &Path,
    packages: &BTreeSet<String>,
    seeded: &mut Seeded,
) -> io::Result<()> {
    let entries = match std::fs::read_dir(source.join(rel)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    std::fs::create_dir_all(dest.join(rel))?;
    for entry in entries {
        let entry = entry?;
        let rel = rel.join(entry.file_name());
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            let probe = rel.join("_");
            if take(&probe, packages, false) != Take::Skip {
                walk(source, &rel, dest, packages, seeded)?;
            }
            continue;
        }
        match take(&rel, packages, is_executable(&meta)) {
            Take::Skip => {}
            Take::Link => {
                if std::fs::hard_link(source.join(&rel), dest.join(&rel)).is_ok() {
                    seeded.linked += 1;
                } else if copy_keeping_time(&source.join(&rel), &dest.join(&rel), &meta)? {
                    seeded.copied += 1;
                }
            }
            Take::Copy => {
                if copy_keeping_time(&source.join(&rel), &dest.join(&rel), &meta)? {
                    seeded.copied += 1;
                }
            }
        }
    }
    Ok(())
}

/// Copies `from` to `to` with `from`'s modification time; `false` when
/// `from` vanished meanwhile.
fn copy_keeping_time(from: &Path, to: &Path, meta: &std::fs::Metadata) -> io::Result<bool> {
    match std::fs::copy(from, to) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    if let Ok(modified) = meta.modified() {
        std::fs::File::options()
            .write(true)
            .open(to)?
            .set_modified(modified)?;
    }
    Ok(true)
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &std::fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests;
