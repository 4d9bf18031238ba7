//! The command registry, collected at link time.
//!
//! Every operation crate adds [`CommandEntry`] values to the [`COMMANDS`]
//! distributed slice with [`register_command!`](crate::register_command). The
//! linker gathers them before `main` runs, so every rank of a job owns the same
//! registry without any start-up registration step. This replaces the C++
//! design's `dladdr`/`dlsym` locator (design note `persistent_dispatch.md`,
//! not in this repository, "Command registration"; docs/architecture.md,
//! "The registry").
//!
//! At start-up each rank hashes its sorted `(wire name, schema version)` list
//! ([`Registry::digest`]); the root compares every rank's list and refuses to
//! run on any difference ([`diff_signatures`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::context::WorkerContext;
use crate::diag::HandlerError;
use crate::envelope::Envelope;

/// Type-erased signature of a registered handler, as stored in the registry.
///
/// Users write a [`TypedHandler`](crate::TypedHandler) and register it with
/// [`register_command!`](crate::register_command), which generates this
/// wrapper around [`run_typed`](crate::run_typed): it receives the rank's
/// [`WorkerContext`] and the decoded [`Envelope`] and returns the
/// postcard-encoded reply bytes for the root.
///
/// # Errors
/// Any [`HandlerError`]; the worker loop forwards it to the root as a
/// [`Diagnostic`](crate::Diagnostic) and the job stops (fail-stop).
pub type HandlerFn = fn(&mut WorkerContext<'_>, &Envelope) -> Result<Vec<u8>, HandlerError>;

/// Source location of a handler registration: our analogue of the C++
/// registration symbol, used only in diagnostics (invariant 11 of the design
/// note `persistent_dispatch.md`, not in this repository: locators are not
/// part of the ABI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandlerLocation {
    /// `module_path!()` of the registration.
    pub module_path: &'static str,
    /// `file!()` of the registration.
    pub file: &'static str,
    /// `line!()` of the registration.
    pub line: u32,
}

impl fmt::Display for HandlerLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}:{})", self.module_path, self.file, self.line)
    }
}

/// One registered command: the ABI (wire name, schema version, id) plus the
/// handler and its locator.
#[derive(Clone, Copy, Debug)]
pub struct CommandEntry {
    /// Versioned wire name, e.g. `uni20.contract.v1`. Part of the ABI.
    pub wire_name: &'static str,
    /// Human-readable name for diagnostics, e.g. `contract`.
    pub debug_name: &'static str,
    /// Schema version of the descriptor the handler decodes. Part of the ABI.
    pub schema_version: u32,
    /// [`command_id`] of `wire_name`, computed at compile time.
    pub command_id: u64,
    /// The worker-side handler.
    pub handler: HandlerFn,
    /// The same handler for a descriptor passed as a value: the root runs
    /// its own share of a command through it, without encoding and
    /// decoding the descriptor ([`register_command!`](crate::register_command)
    /// sets it; `None` makes the root encode its share like any rank's).
    pub inline: Option<crate::InlineFn>,
    /// Where the entry was registered.
    pub location: HandlerLocation,
}

impl CommandEntry {
    /// The debug name of a wire name: the part between its first and its
    /// last `.` (`"uni20.reduce.v1"` gives `"reduce"`,
    /// `"example.block_norms.v1"` gives `"block_norms"`); a name with fewer
    /// than two dots is its own debug name. `const`, so
    /// [`command!`](crate::command) derives `DEBUG_NAME` at compile time.
    pub const fn debug_name_of(wire_name: &'static str) -> &'static str {
        let bytes = wire_name.as_bytes();
        let mut first = None;
        let mut last = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'.' {
                if first.is_none() {
                    first = Some(i);
                }
                last = i;
            }
            i += 1;
        }
        let start = match first {
            Some(f) if f < last => f + 1,
            _ => return wire_name,
        };
        let (head, _) = bytes.split_at(last);
        let (_, middle) = head.split_at(start);
        match std::str::from_utf8(middle) {
            Ok(s) => s,
            // Cut at ASCII dots, so always valid UTF-8.
            Err(_) => wire_name,
        }
    }

    /// The entry of command `C` with an erased `handler` (what
    /// [`register_command!`](crate::register_command) builds): wire name,
    /// debug name, schema version and id all come from `C`.
    pub const fn of<C: crate::CommandSpec>(handler: HandlerFn, location: HandlerLocation) -> CommandEntry {
        CommandEntry {
            wire_name: C::WIRE_NAME,
            debug_name: C::DEBUG_NAME,
            schema_version: C::SCHEMA_VERSION,
            command_id: command_id(C::WIRE_NAME),
            handler,
            inline: None,
            location,
        }
    }

    /// This entry with `inline` as its [`CommandEntry::inline`] handler
    /// (what [`register_command!`](crate::register_command) adds).
    pub const fn with_inline(self, inline: crate::InlineFn) -> CommandEntry {
        CommandEntry {
            inline: Some(inline),
            ..self
        }
    }
}

/// The link-time registry: every [`CommandEntry`] of every linked crate.
#[linkme::distributed_slice]
pub static COMMANDS: [CommandEntry];

/// Persistent types known to every rank's store from the moment it opens
/// (one registration function per type, collected at link time like
/// [`COMMANDS`]; add one with [`register_store_type!`](crate::register_store_type)). `Store::gc` must
/// know the references of every object it keeps, including objects of a
/// reopened disk store that this process has not loaded yet; without the
/// registration it refuses to collect.
#[linkme::distributed_slice]
pub static STORE_TYPES: [fn(&uni20_persist::Store)];

/// Registers a [`uni20_persist::Persist`] type with every rank's store when
/// it opens (see [`STORE_TYPES`]): `register_store_type!(Block);`.
#[macro_export]
macro_rules! register_store_type {
    ($t:ty) => {
        const _: () = {
            fn __uni20_register_store_type(store: &$crate::StoreHandle) {
                store.register::<$t>();
            }

            #[$crate::linkme::distributed_slice($crate::STORE_TYPES)]
            #[linkme(crate = $crate::linkme)]
            static __UNI20_STORE_TYPE: fn(&$crate::StoreHandle) = __uni20_register_store_type;
        };
    };
}

/// Stable 64-bit command id of a wire name: FNV-1a over its UTF-8 bytes.
///
/// `const`, so ids are computed at compile time; the same wire name gives the
/// same id on every rank, build and platform.
pub const fn command_id(wire_name: &str) -> u64 {
    let bytes = wire_name.as_bytes();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

/// Registers the handler of a [`CommandSpec`](crate::CommandSpec) type in
/// [`COMMANDS`] at link time: `register_command!(MyCmdV1 => handle_my_cmd);`.
///
/// The wire name, debug name and schema version are read from the type's
/// `CommandSpec` impl, so a registration cannot disagree with the type the
/// root submits. The handler is a [`TypedHandler`](crate::TypedHandler):
/// `fn(&mut WorkerContext<'_>, C::Descriptor) -> Result<C::Reply,
/// HandlerError>`; a handler whose descriptor or reply type differs from
/// the command's is a compile error. Decoding the envelope, encoding the
/// reply and wrapping errors happen in [`run_typed`](crate::run_typed).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use uni20_worker::{register_command, CommandSpec, HandlerError, Registry, WorkerContext};
///
/// /// `example.hello.v1`: every participant answers `greeting` with its rank.
/// pub struct HelloV1;
///
/// #[derive(Serialize, Deserialize)]
/// pub struct HelloDesc {
///     pub greeting: String,
/// }
///
/// impl CommandSpec for HelloV1 {
///     const WIRE_NAME: &'static str = "example.hello.v1";
///     const DEBUG_NAME: &'static str = "hello";
///     const SCHEMA_VERSION: u32 = 1;
///     type Descriptor = HelloDesc;
///     type Reply = String;
/// }
///
/// fn handle_hello(ctx: &mut WorkerContext<'_>, d: HelloDesc) -> Result<String, HandlerError> {
///     Ok(format!("{} from rank {}", d.greeting, ctx.rank()))
/// }
///
/// register_command!(HelloV1 => handle_hello);
///
/// // The linker collected the entry before `main`: every rank has it.
/// let registry = Registry::linked().unwrap();
/// let entry = registry.by_wire_name("example.hello.v1").unwrap();
/// assert_eq!(entry.command_id, uni20_worker::command_id("example.hello.v1"));
/// assert_eq!(entry.debug_name, "hello");
/// ```
#[macro_export]
macro_rules! register_command {
    ($command:ty => $handler:expr $(,)?) => {
        const _: () = {
            fn __uni20_erased_handler(
                ctx: &mut $crate::WorkerContext<'_>,
                envelope: &$crate::Envelope,
            ) -> ::core::result::Result<::std::vec::Vec<u8>, $crate::HandlerError> {
                $crate::run_typed::<$command>(ctx, envelope, $handler)
            }

            fn __uni20_inline_handler(
                ctx: &mut $crate::WorkerContext<'_>,
                descriptor: ::std::boxed::Box<dyn ::core::any::Any>,
            ) -> ::core::result::Result<::std::vec::Vec<u8>, $crate::HandlerError> {
                $crate::run_typed_inline::<$command>(ctx, descriptor, $handler)
            }

            #[$crate::linkme::distributed_slice($crate::COMMANDS)]
            #[linkme(crate = $crate::linkme)]
            static __UNI20_COMMAND_ENTRY: $crate::CommandEntry = $crate::CommandEntry::of::<$command>(
                __uni20_erased_handler,
                $crate::HandlerLocation {
                    module_path: module_path!(),
                    file: file!(),
                    line: line!(),
                },
            )
            .with_inline(__uni20_inline_handler);
        };
    };
}

/// Declares a command in one line: the unit type, its
/// [`CommandSpec`](crate::CommandSpec) impl and its registration in
/// [`COMMANDS`] (what [`register_command!`](crate::register_command) does).
///
/// `command!(pub MyCmdV1 = "example.my_cmd.v1", schema 1, MyDesc => MyReply, handle_my_cmd);`
/// declares `pub struct MyCmdV1;` (doc comments and attributes before the
/// visibility go onto it) with `WIRE_NAME = "example.my_cmd.v1"`,
/// `SCHEMA_VERSION = 1`, `Descriptor = MyDesc`, `Reply = MyReply` and
/// `DEBUG_NAME` derived from the wire name ([`CommandEntry::debug_name_of`]:
/// `"my_cmd"`), and registers `handle_my_cmd`, a
/// [`TypedHandler`](crate::TypedHandler) (`fn(&mut WorkerContext<'_>,
/// MyDesc) -> Result<MyReply, HandlerError>`; another signature is a
/// compile error).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use uni20_worker::{command, CommandSpec, HandlerError, Registry, WorkerContext};
///
/// #[derive(Serialize, Deserialize)]
/// pub struct HelloDesc {
///     pub greeting: String,
/// }
///
/// fn handle_hello(ctx: &mut WorkerContext<'_>, d: HelloDesc) -> Result<String, HandlerError> {
///     Ok(format!("{} from rank {}", d.greeting, ctx.rank()))
/// }
///
/// command!(
///     /// `example.hello.v1`: every participant answers `greeting` with its rank.
///     pub HelloV1 = "example.hello.v1", schema 1, HelloDesc => String, handle_hello
/// );
///
/// assert_eq!(HelloV1::DEBUG_NAME, "hello");
/// let registry = Registry::linked().unwrap();
/// let entry = registry.by_wire_name("example.hello.v1").unwrap();
/// assert_eq!((entry.debug_name, entry.schema_version), ("hello", 1));
/// ```
#[macro_export]
macro_rules! command {
    (
        $(#[$meta:meta])*
        $vis:vis $name:ident = $wire:literal, schema $schema:literal, $desc:ty => $reply:ty, $handler:expr $(,)?
    ) => {
        $(#[$meta])*
        $vis struct $name;

        impl $crate::CommandSpec for $name {
            const WIRE_NAME: &'static str = $wire;
            const DEBUG_NAME: &'static str = $crate::CommandEntry::debug_name_of($wire);
            const SCHEMA_VERSION: u32 = $schema;
            type Descriptor = $desc;
            type Reply = $reply;
        }

        $crate::register_command!($name => $handler);
    };
}

/// The `(wire name, schema version, command id)` signature of one entry, as
/// exchanged in the start-up handshake.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CommandSignature {
    /// Versioned wire name.
    pub wire_name: String,
    /// Descriptor schema version.
    pub schema_version: u32,
    /// Command id (hash of the wire name).
    pub command_id: u64,
}

/// Errors detected while building a registry.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two entries share a wire name.
    #[error("duplicate command wire name `{wire_name}` registered at {first} and {second}")]
    DuplicateWireName {
        /// The repeated wire name.
        wire_name: String,
        /// Location of the first registration.
        first: String,
        /// Location of the second registration.
        second: String,
    },
    /// Two distinct wire names hash to the same command id.
    #[error("command id collision {command_id:#018x} between `{first}` and `{second}`")]
    DuplicateId {
        /// The colliding id.
        command_id: u64,
        /// First wire name.
        first: String,
        /// Second wire name.
        second: String,
    },
    /// An entry's stored id is not the hash of its wire name.
    #[error("command `{wire_name}` carries id {stored:#018x}, expected {expected:#018x}")]
    BadId {
        /// Wire name.
        wire_name: String,
        /// The id in the entry.
        stored: u64,
        /// `command_id(wire_name)`.
        expected: u64,
    },
}

/// A validated, id-indexed view of a set of command entries.
#[derive(Clone, Debug)]
pub struct Registry {
    by_id: BTreeMap<u64, CommandEntry>,
}

impl Registry {
    /// The registry of this binary: every entry of [`COMMANDS`].
    ///
    /// # Errors
    /// [`RegistryError`] on duplicate wire names or ids (a start-up error).
    pub fn linked() -> Result<Registry, RegistryError> {
        Registry::from_entries(COMMANDS.iter().copied())
    }

    /// Builds a registry from explicit entries (tests, plugins).
    ///
    /// # Errors
    /// [`RegistryError`] on duplicate wire names, duplicate ids or an id that
    /// is not the hash of its wire name.
    pub fn from_entries(entries: impl IntoIterator<Item = CommandEntry>) -> Result<Registry, RegistryError> {
        let mut by_id: BTreeMap<u64, CommandEntry> = BTreeMap::new();
        let mut by_name: BTreeMap<&'static str, CommandEntry> = BTreeMap::new();
        for e in entries {
            let expected = command_id(e.wire_name);
            if e.command_id != expected {
                return Err(RegistryError::BadId {
                    wire_name: e.wire_name.to_string(),
                    stored: e.command_id,
                    expected,
                });
            }
            if let Some(prev) = by_name.get(e.wire_name) {
                return Err(RegistryError::DuplicateWireName {
                    wire_name: e.wire_name.to_string(),
                    first: prev.location.to_string(),
                    second: e.location.to_string(),
                });
            }
            if let Some(prev) = by_id.get(&e.command_id) {
                return Err(RegistryError::DuplicateId {
                    command_id: e.command_id,
                    first: prev.wire_name.to_string(),
                    second: e.wire_name.to_string(),
                });
            }
            by_name.insert(e.wire_name, e);
            by_id.insert(e.command_id, e);
        }
        Ok(Registry { by_id })
    }

    /// Looks up an entry by command id.
    pub fn get(&self, command_id: u64) -> Option<&CommandEntry> {
        self.by_id.get(&command_id)
    }

    /// Looks up an entry by wire name.
    pub fn by_wire_name(&self, wire_name: &str) -> Option<&CommandEntry> {
        self.by_id
            .get(&command_id(wire_name))
            .filter(|e| e.wire_name == wire_name)
    }

    /// All entries, ordered by wire name.
    pub fn entries(&self) -> Vec<&CommandEntry> {
        let mut v: Vec<_> = self.by_id.values().collect();
        v.sort_by_key(|e| e.wire_name);
        v
    }

    /// Sorted `(wire name, schema version, id)` signatures.
    pub fn signatures(&self) -> Vec<CommandSignature> {
        let mut v: Vec<_> = self
            .by_id
            .values()
            .map(|e| CommandSignature {
                wire_name: e.wire_name.to_string(),
                schema_version: e.schema_version,
                command_id: e.command_id,
            })
            .collect();
        v.sort();
        v
    }

    /// FNV-1a digest of the sorted `(wire name, schema version)` list.
    pub fn digest(&self) -> u64 {
        digest_of(&self.signatures())
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True if no command is registered.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// Digest of a sorted signature list (see [`Registry::digest`]).
pub fn digest_of(signatures: &[CommandSignature]) -> u64 {
    let mut text = String::new();
    for s in signatures {
        text.push_str(&s.wire_name);
        text.push('#');
        text.push_str(&s.schema_version.to_string());
        text.push('\n');
    }
    command_id(&text)
}

/// Human-readable differences between the root's and another rank's
/// signature lists: one line per command that is missing on one side or has
/// a different schema version. Empty when the lists agree.
pub fn diff_signatures(root: &[CommandSignature], other: &[CommandSignature], other_rank: usize) -> Vec<String> {
    let a: BTreeMap<&str, u32> = root.iter().map(|s| (s.wire_name.as_str(), s.schema_version)).collect();
    let b: BTreeMap<&str, u32> = other.iter().map(|s| (s.wire_name.as_str(), s.schema_version)).collect();
    let mut out = Vec::new();
    for (name, va) in &a {
        match b.get(name) {
            None => out.push(format!(
                "`{name}` (schema v{va}) is registered on rank 0 but missing on rank {other_rank}"
            )),
            Some(vb) if vb != va => out.push(format!(
                "`{name}` has schema v{va} on rank 0 but v{vb} on rank {other_rank}"
            )),
            _ => {}
        }
    }
    for (name, vb) in &b {
        if !a.contains_key(name) {
            out.push(format!(
                "`{name}` (schema v{vb}) is registered on rank {other_rank} but missing on rank 0"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names_are_the_middle_of_the_wire_name() {
        assert_eq!(CommandEntry::debug_name_of("uni20.reduce.v1"), "reduce");
        assert_eq!(
            CommandEntry::debug_name_of("uni20.distribute_factors.v1"),
            "distribute_factors"
        );
        assert_eq!(CommandEntry::debug_name_of("a.b.c.v2"), "b.c");
        assert_eq!(CommandEntry::debug_name_of("plain"), "plain");
        assert_eq!(CommandEntry::debug_name_of("one.dot"), "one.dot");
        assert_eq!(CommandEntry::debug_name_of("a..v1"), "");
    }

    fn dummy(_: &mut WorkerContext<'_>, _: &Envelope) -> Result<Vec<u8>, HandlerError> {
        Ok(Vec::new())
    }

    fn entry(wire: &'static str, schema: u32) -> CommandEntry {
        CommandEntry {
            wire_name: wire,
            debug_name: wire,
            schema_version: schema,
            command_id: command_id(wire),
            handler: dummy,
            inline: None,
            location: HandlerLocation {
                module_path: "t",
                file: "t.rs",
                line: 1,
            },
        }
    }

    #[test]
    fn command_id_is_fnv1a() {
        // Reference values of 64-bit FNV-1a.
        assert_eq!(command_id(""), 0xcbf29ce484222325);
        assert_eq!(command_id("a"), 0xaf63dc4c8601ec8c);
        assert_ne!(command_id("uni20.contract.v1"), command_id("uni20.contract.v2"));
    }

    #[test]
    fn duplicate_wire_name_is_an_error() {
        let r = Registry::from_entries([entry("x.v1", 1), entry("x.v1", 1)]);
        assert!(matches!(r, Err(RegistryError::DuplicateWireName { .. })));
    }

    #[test]
    fn bad_id_is_an_error() {
        let mut e = entry("x.v1", 1);
        e.command_id = 7;
        assert!(matches!(Registry::from_entries([e]), Err(RegistryError::BadId { .. })));
    }

    #[test]
    fn digest_depends_on_names_and_versions() {
        let a = Registry::from_entries([entry("x.v1", 1), entry("y.v1", 1)]).unwrap();
        let b = Registry::from_entries([entry("y.v1", 1), entry("x.v1", 1)]).unwrap();
        let c = Registry::from_entries([entry("x.v1", 2), entry("y.v1", 1)]).unwrap();
        assert_eq!(a.digest(), b.digest());
        assert_ne!(a.digest(), c.digest());
        let d = diff_signatures(&a.signatures(), &c.signatures(), 2);
        assert_eq!(d, vec!["`x.v1` has schema v1 on rank 0 but v2 on rank 2".to_string()]);
        let only = Registry::from_entries([entry("x.v1", 1)]).unwrap();
        let d = diff_signatures(&a.signatures(), &only.signatures(), 1);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("`y.v1`") && d[0].contains("missing on rank 1"));
    }
}
