//! The sandbox a command run over the overlay lives in: what it may write outside the
//! workspace, whether it reaches the network, and the kernel mechanisms that hold it there
//! (see `docs/tools.md`, "The sandbox", and `docs/architecture.md`).
//!
//! - **Writes.** Landlock confines every write of the command and its children to the
//!   workspace (under the overlay, so captured), the system temp directories, a few device
//!   files and the paths it is given. Landlock cannot be lifted by the process it confines,
//!   whatever its privileges, and a process it confines can neither mount nor unmount,
//!   nor trace a process outside its domain.
//! - **Inside the workspace**, `.git/config` and `.git/hooks` are bound read-only over
//!   themselves, so a command cannot plant a hook or a `core.fsmonitor` that runs later,
//!   outside the sandbox.
//! - **Privilege.** The command runs with no-new-privileges, and a command run as root loses
//!   the capabilities that reach past a mount namespace (modules, raw I/O, mounts, tracing,
//!   device nodes, …) from its bounding set, so no program it runs gets them back.
//! - **`/proc`** is mounted afresh for the command's PID namespace, so it sees no process
//!   outside it.
//! - **Network.** Off, the command gets a network namespace of its own whose only device is
//!   the loopback, brought up.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How much a command may write: `[bash] sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// The workspace, the temp directories and the writable paths; nothing else.
    #[default]
    WorkspaceWrite,
    /// The temp directories and the writable paths; not the workspace either.
    ReadOnly,
    /// No sandbox: the command writes wherever its user may.
    Off,
}

impl SandboxMode {
    /// The name used in the configuration and on the helper's command line.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
        }
    }

    /// The mode called `name`, as [`SandboxMode::as_str`] names it.
    pub fn parse(name: &str) -> Option<Self> {
        [
            SandboxMode::WorkspaceWrite,
            SandboxMode::ReadOnly,
            SandboxMode::Off,
        ]
        .into_iter()
        .find(|mode| mode.as_str() == name)
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The system's temp directories, always writable in a sandbox (those that exist).
pub const TEMP_DIRS: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// Device files a command writes to as a matter of course; they hold no data.
const DEVICES: [&str; 8] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The files inside the workspace a sandboxed command may read but not change, relative to
/// its root: git runs what they name (hooks, `core.fsmonitor`, `core.sshCommand`, …) later,
/// outside any sandbox.
pub const PROTECTED: [&str; 2] = [".git/config", ".git/hooks"];

/// What a command may write and reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// How much it may write.
    pub mode: SandboxMode,
    /// Directories outside the workspace it may write in too, beside [`TEMP_DIRS`].
    pub writable: Vec<PathBuf>,
    /// Whether it reaches the network (false: a loopback of its own only).
    pub network: bool,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::off()
    }
}

impl Sandbox {
    /// No sandbox.
    pub fn off() -> Self {
        Self::new(SandboxMode::Off)
    }

    /// A sandbox of `mode` with no writable paths beyond the temp directories, and the
    /// network on.
    pub fn new(mode: SandboxMode) -> Self {
        Self {
            mode,
            writable: Vec::new(),
            network: true,
        }
    }

    /// The same, with `paths` writable too.
    pub fn writable(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.writable.extend(paths);
        self
    }

    /// The same, with the network on or off.
    pub fn network(mut self, on: bool) -> Self {
        self.network = on;
        self
    }

    /// Whether a sandbox is asked for.
    pub fn is_on(&self) -> bool {
        self.mode != SandboxMode::Off
    }

    /// The caches the common package managers and build tools write, which a sandbox leaves
    /// writable by default: each holds only downloads and build outputs that the tool makes
    /// again, never configuration or credentials. `home` is the user's home directory and
    /// `cargo_home` cargo's (`$CARGO_HOME`, by default `~/.cargo`).
    ///
    /// - `$CARGO_HOME/registry`: the crates cargo downloads and unpacks, and the index;
    /// - `$CARGO_HOME/git`: the checkouts of git dependencies;
    /// - `~/.npm`: npm's download cache (`_cacache`) and its logs (npm's settings are
    ///   `~/.npmrc`, outside it);
    /// - `~/.cache`: the XDG cache directory: pip's wheels and downloads, Go's build cache,
    ///   yarn's and others'.
    pub fn default_caches(home: Option<&Path>, cargo_home: Option<&Path>) -> Vec<PathBuf> {
        let mut caches = Vec::new();
        let cargo = cargo_home
            .map(Path::to_path_buf)
            .or_else(|| home.map(|home| home.join(".cargo")));
        if let Some(cargo) = cargo {
            caches.push(cargo.join("registry"));
            caches.push(cargo.join("git"));
        }
        if let Some(home) = home {
            caches.push(home.join(".npm"));
            caches.push(home.join(".cache"));
        }
        caches
    }

    /// The helpers' arguments for this sandbox: `MODE NETWORK COUNT WRITABLE…`. The init
    /// helper ([`crate::capture::HELPER_INIT`]) takes `ROOT`, then these, then the command.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut args = vec![
            self.mode.as_str().into(),
            (if self.network { "net" } else { "no-net" }).into(),
            self.writable.len().to_string().into(),
        ];
        args.extend(self.writable.iter().map(|path| path.as_os_str().to_owned()));
        args
    }

    /// A sandbox read back from [`Sandbox::to_args`], and the arguments after it.
    pub(crate) fn from_args(args: &[std::ffi::OsString]) -> Option<(Self, &[std::ffi::OsString])> {
        let [mode, network, count, rest @ ..] = args else {
            return None;
        };
        let mode = SandboxMode::parse(mode.to_str()?)?;
        let network = match network.to_str()? {
            "net" => true,
            "no-net" => false,
            _ => return None,
        };
        let count = count.to_str()?.parse::<usize>().ok()?;
        let (writable, rest) = rest.split_at_checked(count)?;
        let sandbox = Sandbox {
            mode,
            writable: writable.iter().map(PathBuf::from).collect(),
            network,
        };
        Some((sandbox, rest))
    }

    /// The line that ends the output of a command that failed on a write the sandbox
    /// refused, so that the model knows why and what to ask for; `None` when the output
    /// shows no refused write. The kernel says `Permission denied` (Landlock) or
    /// `Read-only file system` (a protected path); the path is named when the line that
    /// says so names one outside the workspace `root` or a protected one.
    pub fn refused_note(&self, root: &Path, output: &str) -> Option<String> {
        if !self.is_on() {
            return None;
        }
        let refused = |line: &&str| {
            line.contains("Permission denied") || line.contains("Read-only file system")
        };
        let mut lines = output.lines().filter(refused).peekable();
        lines.peek()?;
        let named = lines.find_map(|line| {
            line.split(|c: char| {
                c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ',' | '‘' | '’')
            })
            .map(|word| word.trim_end_matches(':'))
            .find(|word| word.starts_with('/') && word.len() > 1)
            .map(Path::new)
            .filter(|path| self.blocks(root, path))
            .map(Path::to_path_buf)
        });
        let how = "to let commands write there, add a directory that holds it to `writable` \
                   under [bash] in your user config (~/.config/shiro/config.toml)";
        let what = match self.mode {
            SandboxMode::WorkspaceWrite => {
                "commands may write only in the workspace, the temp directories and [bash] \
                 writable paths, and .git/config and .git/hooks are read-only"
            }
            _ => {
                "commands may write only in the temp directories and [bash] writable paths, \
                 and the workspace is read-only (the session is in read-only mode, or [bash] \
                 sandbox is \"read-only\")"
            }
        };
        Some(match named {
            Some(path) if path.starts_with(root) => format!(
                "the {} sandbox refused a write to {}: {what}; do not try to get around it, \
                 tell the user what you needed",
                self.mode,
                path.display()
            ),
            Some(path) => format!(
                "the {} sandbox refused a write to {}: {what}; {how}",
                self.mode,
                path.display()
            ),
            // A write the output does not place (a relative path) most likely went to the
            // workspace, which no `writable` path opens in the read-only sandbox.
            None if self.mode == SandboxMode::ReadOnly => format!(
                "the command ran in the read-only sandbox, and a write may have been refused by \
                 it: {what}; do not try to get around it, tell the user what you needed (only \
                 a directory outside the workspace can be added to `writable` under [bash])"
            ),
            None => format!(
                "the command ran in the {} sandbox, and a write may have been refused by it: \
                 {what}; {how}",
                self.mode
            ),
        })
    }

    /// Whether a write to `path` is one the sandbox refuses.
    fn blocks(&self, root: &Path, path: &Path) -> bool {
        let inside = path.starts_with(root);
        if inside {
            let protected = PROTECTED.iter().any(|rel| path.starts_with(root.join(rel)));
            return self.mode == SandboxMode::ReadOnly || protected;
        }
        let allowed = (TEMP_DIRS.iter().map(Path::new))
            .chain(self.writable.iter().map(PathBuf::as_path))
            .any(|dir| path.starts_with(dir));
        !allowed
    }
}

#[cfg(target_os = "linux")]
pub(crate) mod linux {
    //! The kernel side, run by the helpers (single-threaded, before the command starts).

    use std::path::Path;

    use landlock::{
        ABI, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, Scope,
    };
    use rustix::fs::StatVfsMountFlags;
    use rustix::mount::MountFlags;
    use rustix::thread::CapabilitySet;

    use super::{DEVICES, PROTECTED, Sandbox, SandboxMode, TEMP_DIRS};

    /// Checks that the kernel enforces Landlock, before anything is set up: a sandbox that
    /// cannot be made is said so, never skipped.
    pub(crate) fn probe() -> Result<(), String> {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_write(ABI::V1))
            .and_then(|ruleset| ruleset.create())
            .map(drop)
            .map_err(|err| {
                format!(
                    "the bash sandbox needs Landlock (Linux 5.13 or later, enabled at boot), and this kernel refuses it ({err}); set [bash] sandbox = \"off\" to run commands without one"
                )
            })
    }

    /// Binds `.git/config` and `.git/hooks` of the workspace `root` read-only over
    /// themselves (those that exist), keeping the other flags of the mount they are on: in a
    /// user namespace, those are locked.
    pub(crate) fn protect(root: &Path) -> Result<(), String> {
        for rel in PROTECTED {
            let path = root.join(rel);
            if std::fs::symlink_metadata(&path).is_err() {
                continue;
            }
            let failed = |err| format!("cannot make {} read-only: {err}", path.display());
            let kept = kept_flags(&path).map_err(failed)?;
            rustix::mount::mount_bind(&path, &path).map_err(failed)?;
            rustix::mount::mount_remount(&path, MountFlags::BIND | MountFlags::RDONLY | kept, "")
                .map_err(failed)?;
        }
        Ok(())
    }

    /// Remounts the workspace `root` (the overlay) and the `.git` bound through it
    /// read-only, for a `read-only` sandbox: Landlock only adds rights, so a workspace that
    /// lies under a temp directory or a writable path would otherwise stay writable.
    pub(crate) fn read_only_workspace(root: &Path) -> Result<(), String> {
        for path in [root.join(".git"), root.to_path_buf()] {
            // `.git` is bound through only when it is a directory or a file (a worktree's).
            let bound =
                std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir() || meta.is_file());
            if path != root && !bound {
                continue;
            }
            let failed = |err| format!("cannot make {} read-only: {err}", path.display());
            let kept = kept_flags(&path).map_err(failed)?;
            rustix::mount::mount_remount(&path, MountFlags::BIND | MountFlags::RDONLY | kept, "")
                .map_err(failed)?;
        }
        Ok(())
    }

    /// Remounts the mount at `path` read-only, keeping its other flags.
    pub(crate) fn read_only_mount(path: &Path) -> Result<(), String> {
        let failed = |err| format!("cannot make {} read-only: {err}", path.display());
        let kept = kept_flags(path).map_err(failed)?;
        rustix::mount::mount_remount(path, MountFlags::BIND | MountFlags::RDONLY | kept, "")
            .map_err(failed)
    }

    fn kept_flags(path: &Path) -> rustix::io::Result<MountFlags> {
        let flags = rustix::fs::statvfs(path)?.f_flag;
        let pairs = [
            (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
            (StatVfsMountFlags::NODEV, MountFlags::NODEV),
            (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
            (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
            (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
            (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
        ];
        Ok(pairs
            .into_iter()
            .filter(|(has, _)| flags.contains(*has))
            .fold(MountFlags::empty(), |all, (_, flag)| all | flag))
    }

    /// Brings up the loopback of a network namespace just made: a `RTM_NEWLINK` request over
    /// netlink that sets `IFF_UP` on interface 1, which is the loopback in every namespace.
    pub(crate) fn loopback_up() -> Result<(), String> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType, netlink};
        let failed = |err: rustix::io::Errno| format!("cannot bring up the loopback: {err}");
        let socket = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(failed)?;
        const RTM_NEWLINK: u16 = 16;
        const NLM_F_REQUEST: u16 = 1;
        const NLM_F_ACK: u16 = 4;
        const NLMSG_ERROR: u16 = 2;
        const IFF_UP: u32 = 1;
        const LOOPBACK_INDEX: i32 = 1;
        // struct nlmsghdr (16 bytes), then struct ifinfomsg (16 bytes).
        let mut message = Vec::with_capacity(32);
        message.extend_from_slice(&32u32.to_ne_bytes());
        message.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
        message.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        message.extend_from_slice(&1u32.to_ne_bytes());
        message.extend_from_slice(&0u32.to_ne_bytes());
        message.extend_from_slice(&[0, 0]);
        message.extend_from_slice(&0u16.to_ne_bytes());
        message.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes());
        message.extend_from_slice(&IFF_UP.to_ne_bytes());
        message.extend_from_slice(&IFF_UP.to_ne_bytes());
        let kernel = netlink::SocketAddrNetlink::new(0, 0);
        rustix::net::sendto(&socket, &message, rustix::net::SendFlags::empty(), &kernel)
            .map_err(failed)?;
        // The acknowledgement: a header of type NLMSG_ERROR, then the error (0: done).
        let mut reply = [0u8; 64];
        let (read, _) = rustix::net::recv(&socket, &mut reply, rustix::net::RecvFlags::empty())
            .map_err(failed)?;
        let field = |at: usize, len: usize| reply.get(at..at + len).filter(|_| at + len <= read);
        let kind = field(4, 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
        let error = field(16, 4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
        match (kind, error) {
            (Some(NLMSG_ERROR), Some(0)) => Ok(()),
            (Some(NLMSG_ERROR), Some(code)) => Err(failed(rustix::io::Errno::from_raw_os_error(
                code.saturating_neg(),
            ))),
            _ => Err("cannot bring up the loopback: the kernel's reply was not understood".into()),
        }
    }

    /// Mounts a `/proc` of the command's own PID namespace over the host's, so that it
    /// neither sees nor reaches a process outside (`/proc/PID/root`). Best effort: where the
    /// kernel refuses it (a `/proc` partly covered, in a user namespace), Landlock still
    /// refuses every write through the host's.
    pub(crate) fn fresh_proc() {
        let _ = rustix::mount::mount(
            "proc",
            "/proc",
            "proc",
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            c"",
        );
    }

    /// The capabilities a command run as root loses: those that reach past its mount
    /// namespace and Landlock (loading a module, raw I/O, device nodes, mounts, tracing,
    /// opening files by handle, the clock, the audit and security modules, the firewall).
    /// It keeps those that make root root over files (owners, modes, DAC).
    fn dropped() -> CapabilitySet {
        [
            CapabilitySet::SYS_MODULE,
            CapabilitySet::SYS_RAWIO,
            CapabilitySet::SYS_ADMIN,
            CapabilitySet::SYS_PTRACE,
            CapabilitySet::SYS_BOOT,
            CapabilitySet::SYS_TIME,
            CapabilitySet::SYS_TTY_CONFIG,
            CapabilitySet::SYS_PACCT,
            CapabilitySet::SYS_CHROOT,
            CapabilitySet::MKNOD,
            CapabilitySet::DAC_READ_SEARCH,
            CapabilitySet::LINUX_IMMUTABLE,
            CapabilitySet::NET_ADMIN,
            CapabilitySet::AUDIT_CONTROL,
            CapabilitySet::MAC_OVERRIDE,
            CapabilitySet::MAC_ADMIN,
            CapabilitySet::SYSLOG,
            CapabilitySet::PERFMON,
            CapabilitySet::BPF,
            CapabilitySet::CHECKPOINT_RESTORE,
            CapabilitySet::SETFCAP,
        ]
        .into_iter()
        .fold(CapabilitySet::empty(), |all, one| all | one)
    }

    /// Confines this process and everything it starts: no new privileges, the capabilities
    /// above gone, and Landlock's rules for `sandbox` over the workspace `root`.
    pub(crate) fn confine(sandbox: &Sandbox, root: &Path) -> Result<(), String> {
        let sets = rustix::thread::capabilities(None)
            .map_err(|err| format!("cannot read the capabilities: {err}"))?;
        // Without CAP_SETPCAP (a user who is not root: its capabilities were cleared when
        // this helper started), there is nothing to take from the bounding set, and
        // no-new-privileges below keeps a program from gaining any.
        let privileged = sets.effective.contains(CapabilitySet::SETPCAP);
        for capability in dropped().iter().filter(|_| privileged) {
            match rustix::thread::remove_capability_from_bounding_set(capability) {
                // A kernel older than the capability does not know it: nothing to drop.
                Ok(()) | Err(rustix::io::Errno::INVAL) => {}
                Err(err) => {
                    return Err(format!("cannot drop the capability {capability:?}: {err}"));
                }
            }
        }
        let mut kept = sets;
        kept.effective.remove(dropped());
        kept.permitted.remove(dropped());
        kept.inheritable.remove(dropped());
        rustix::thread::set_capabilities(None, kept)
            .map_err(|err| format!("cannot drop capabilities: {err}"))?;
        rustix::thread::set_no_new_privs(true)
            .map_err(|err| format!("cannot set no-new-privileges: {err}"))?;
        let failed = |err: landlock::RulesetError| format!("cannot set up Landlock: {err}");
        let abi = ABI::V6;
        let write = AccessFs::from_write(abi) & !AccessFs::IoctlDev;
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_write(ABI::V1))
            .map_err(failed)?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(write)
            .map_err(failed)?
            .scope(Scope::Signal)
            .map_err(failed)?
            .create()
            .map_err(failed)?;
        let workspace = (sandbox.mode == SandboxMode::WorkspaceWrite).then_some(root);
        let dirs = (workspace.into_iter())
            .chain(TEMP_DIRS.iter().map(Path::new))
            .chain(sandbox.writable.iter().map(|path| path.as_path()));
        for dir in dirs {
            // A directory that is not there cannot be written in anyway.
            if let Ok(fd) = PathFd::new(dir) {
                ruleset = ruleset
                    .add_rule(PathBeneath::new(fd, write))
                    .map_err(failed)?;
            }
        }
        for device in DEVICES {
            if let Ok(fd) = PathFd::new(device) {
                ruleset = ruleset
                    .add_rule(PathBeneath::new(
                        fd,
                        AccessFs::WriteFile | AccessFs::Truncate,
                    ))
                    .map_err(failed)?;
            }
        }
        let status = ruleset.restrict_self().map_err(failed)?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err("cannot set up Landlock: this kernel does not enforce it".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_arguments_read_back_as_written() {
        let sandbox = Sandbox::new(SandboxMode::ReadOnly)
            .writable([PathBuf::from("/home/u/.cache"), PathBuf::from("/opt/x y")])
            .network(false);
        let mut args = sandbox.to_args();
        args.push("bash".into());
        let (back, rest) = Sandbox::from_args(&args).unwrap();
        assert_eq!(back, sandbox);
        assert_eq!(rest, ["bash"]);
        assert!(Sandbox::from_args(&["sometimes".into(), "net".into(), "0".into()]).is_none());
        assert!(
            Sandbox::from_args(&["off".into(), "net".into(), "2".into(), "/a".into()]).is_none()
        );
    }

    #[test]
    fn the_default_caches_are_cargo_npm_and_xdg_caches() {
        let home = Path::new("/home/u");
        assert_eq!(
            Sandbox::default_caches(Some(home), None),
            [
                "/home/u/.cargo/registry",
                "/home/u/.cargo/git",
                "/home/u/.npm",
                "/home/u/.cache"
            ]
            .map(PathBuf::from)
        );
        assert_eq!(
            Sandbox::default_caches(Some(home), Some(Path::new("/opt/cargo")))[..2],
            ["/opt/cargo/registry", "/opt/cargo/git"].map(PathBuf::from)
        );
        assert!(Sandbox::default_caches(None, None).is_empty());
    }

    #[test]
    fn a_refused_write_is_named_with_how_to_allow_it() {
        let root = Path::new("/work/ws");
        let sandbox =
            Sandbox::new(SandboxMode::WorkspaceWrite).writable([PathBuf::from("/home/u/.cache")]);
        let note = |output: &str| sandbox.refused_note(root, output);
        insta::assert_snapshot!(
            note("bash: line 1: /home/u/.bashrc: Permission denied").unwrap(),
            @"the workspace-write sandbox refused a write to /home/u/.bashrc: commands may write only in the workspace, the temp directories and [bash] writable paths, and .git/config and .git/hooks are read-only; to let commands write there, add a directory that holds it to `writable` under [bash] in your user config (~/.config/shiro/config.toml)"
        );
        insta::assert_snapshot!(
            note("touch: cannot touch '/work/ws/.git/hooks/pre-commit': Read-only file system").unwrap(),
            @"the workspace-write sandbox refused a write to /work/ws/.git/hooks/pre-commit: commands may write only in the workspace, the temp directories and [bash] writable paths, and .git/config and .git/hooks are read-only; do not try to get around it, tell the user what you needed"
        );
        // A refusal that names no path the sandbox blocks still says the sandbox may be why.
        insta::assert_snapshot!(
            note("mkdir: cannot create directory 'x': Permission denied").unwrap(),
            @"the command ran in the workspace-write sandbox, and a write may have been refused by it: commands may write only in the workspace, the temp directories and [bash] writable paths, and .git/config and .git/hooks are read-only; to let commands write there, add a directory that holds it to `writable` under [bash] in your user config (~/.config/shiro/config.toml)"
        );
        assert_eq!(note("all good\n"), None);
        assert_eq!(
            Sandbox::off().refused_note(root, "x: Permission denied"),
            None
        );
        let read_only = Sandbox::new(SandboxMode::ReadOnly);
        assert!(
            read_only
                .refused_note(root, "sh: /work/ws/a: Permission denied")
                .unwrap()
                .starts_with("the read-only sandbox refused a write to /work/ws/a: ")
        );
    }

    /// In the read-only sandbox a write to the workspace is refused because the workspace
    /// is read-only (read-only mode, or `sandbox = "read-only"`): `writable` cannot change
    /// that, so the note does not offer it for the workspace.
    #[test]
    fn a_refused_write_in_the_read_only_sandbox_names_its_cause() {
        let root = Path::new("/work/ws");
        let sandbox = Sandbox::new(SandboxMode::ReadOnly);
        let note = |output: &str| sandbox.refused_note(root, output).unwrap();
        insta::assert_snapshot!(
            [
                note("touch: cannot touch 'c.txt': Read-only file system"),
                note("bash: line 1: /work/ws/a.txt: Read-only file system"),
                note("bash: line 1: /home/u/.bashrc: Permission denied"),
            ]
            .join("\n"),
            @r#"
        the command ran in the read-only sandbox, and a write may have been refused by it: commands may write only in the temp directories and [bash] writable paths, and the workspace is read-only (the session is in read-only mode, or [bash] sandbox is "read-only"); do not try to get around it, tell the user what you needed (only a directory outside the workspace can be added to `writable` under [bash])
        the read-only sandbox refused a write to /work/ws/a.txt: commands may write only in the temp directories and [bash] writable paths, and the workspace is read-only (the session is in read-only mode, or [bash] sandbox is "read-only"); do not try to get around it, tell the user what you needed
        the read-only sandbox refused a write to /home/u/.bashrc: commands may write only in the temp directories and [bash] writable paths, and the workspace is read-only (the session is in read-only mode, or [bash] sandbox is "read-only"); to let commands write there, add a directory that holds it to `writable` under [bash] in your user config (~/.config/shiro/config.toml)
        "#
        );
    }
}
