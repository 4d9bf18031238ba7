//! Work and result buffers of the CPU kernels: zeroed ones, and uninitialised capacity for
//! outputs that the GEMMs overwrite completely.
//!
//! A large buffer (at least [`HUGEPAGE_MIN_BYTES`]) is advised to the kernel as
//! transparent-huge-page memory before its first touch (Linux `madvise(MADV_HUGEPAGE)`, the
//! same advice and threshold numpy uses for its array data). A fresh 8 MiB buffer otherwise
//! takes 2048 page faults of 4 KiB, each zeroing a page under the mm locks; with huge pages it
//! takes four. Where transparent huge pages are disabled or unsupported the advice is a no-op.

use crate::scalar::Element;

/// Buffers of at least this many bytes get the huge-page advice (4 MiB, as numpy).
pub(crate) const HUGEPAGE_MIN_BYTES: usize = 4 << 20;

/// Huge-page size on x86-64 and aarch64 with 4 KiB base pages.
#[cfg(target_os = "linux")]
const HUGEPAGE: usize = 2 << 20;

/// A vector of `len` zeros of `T`, huge-page advised when large.
///
/// # Panics
/// If the allocation fails or exceeds `isize::MAX` bytes (as `vec!`); callers check sizes
/// with `checked_len` first.
pub(crate) fn zeroed<T: Element>(len: usize) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    advise_huge(&mut v);
    v.resize(len, T::zero());
    v
}

/// An empty vector with capacity for `len` elements of `T` (uninitialised), huge-page advised
/// when large; the caller writes the elements through its pointer and then sets the length.
///
/// # Panics
/// As [`zeroed`].
pub(crate) fn uninit_capacity<T>(len: usize) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    advise_huge(&mut v);
    v
}

/// Advises the allocated capacity of `v` (rounded inwards to whole huge pages) as huge-page
/// memory, if it is at least [`HUGEPAGE_MIN_BYTES`]. Call before the first write.
#[cfg(target_os = "linux")]
pub(crate) fn advise_huge<T>(v: &mut Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    if bytes < HUGEPAGE_MIN_BYTES {
        return;
    }
    let start = v.as_mut_ptr() as usize;
    let first = start.next_multiple_of(HUGEPAGE);
    let last = (start + bytes) / HUGEPAGE * HUGEPAGE;
    if last > first {
        // SAFETY: [first, last) lies inside the allocation owned by `v` (capacity * size_of
        // bytes from its pointer); MADV_HUGEPAGE only changes how the kernel backs those pages,
        // never their contents or validity. A failure (EINVAL without THP) is harmless.
        unsafe {
            libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_huge<T>(_v: &mut Vec<T>) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_has_len_zeros() {
        for len in [0usize, 1, 7, (HUGEPAGE_MIN_BYTES / 8) + 3] {
            let v = zeroed::<f64>(len);
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&x| x == 0.0));
        }
    }
}
