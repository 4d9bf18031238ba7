//! Internal synchronisation shim.
//!
//! Under `cfg(loom)` every primitive the epoch queue and the blocking waits use comes from
//! `loom`, so that the `tests/loom.rs` models explore every interleaving, check every access
//! to the value slot, and see every thread park and unpark. Otherwise the crate uses
//! `std::sync::Arc`, `parking_lot::Mutex`, `std`'s atomics and thread parking, and a thin
//! wrapper over `std::cell::UnsafeCell` with the same API as loom's.

#[cfg(loom)]
mod imp {
    pub(crate) use loom::cell::{ConstPtr, MutPtr, UnsafeCell};
    pub(crate) use loom::sync::atomic::AtomicBool;
    pub(crate) use loom::sync::Arc;
    pub(crate) use loom::thread::{current as current_thread, park, Thread};

    /// `loom::sync::Mutex` with a `parking_lot`-style infallible `lock`.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            // The epoch code never panics while holding the lock; recover anyway.
            match self.0.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            }
        }
    }
}

#[cfg(not(loom))]
mod imp {
    pub(crate) use parking_lot::Mutex;
    pub(crate) use std::sync::atomic::AtomicBool;
    pub(crate) use std::sync::Arc;
    pub(crate) use std::thread::{current as current_thread, park, Thread};

    /// `std::cell::UnsafeCell` with loom's pointer-handing API.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        /// A shared-access pointer (loom tracks the access while the pointer lives).
        pub(crate) fn get(&self) -> ConstPtr<T> {
            ConstPtr(self.0.get())
        }

        /// An exclusive-access pointer (loom tracks the access while the pointer lives).
        pub(crate) fn get_mut(&self) -> MutPtr<T> {
            MutPtr(self.0.get())
        }
    }

    /// Shared-access pointer into an [`UnsafeCell`].
    #[derive(Debug)]
    pub(crate) struct ConstPtr<T>(*const T);

    impl<T> ConstPtr<T> {
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0)
        }
    }

    /// Exclusive-access pointer into an [`UnsafeCell`].
    #[derive(Debug)]
    pub(crate) struct MutPtr<T>(*mut T);

    impl<T> MutPtr<T> {
        pub(crate) fn with<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0)
        }
    }
}

pub(crate) use imp::*;
