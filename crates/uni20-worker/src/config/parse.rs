//! Parsers of the value forms used by `UNI20_*` variables: counts, sizes
//! with units, seconds and booleans. Each returns `None` for anything it does
//! not accept; the caller turns that into a
//! [`JobError::Config`](crate::JobError::Config) naming the variable, the
//! value and the accepted form.

use std::time::Duration;

/// The accepted form of a size, for error messages.
pub(crate) const SIZE_FORM: &str = "a size in bytes: an integer with an optional unit B, KB, MB, GB, TB \
     (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 65536, 64KiB or 10MB";

/// Parses a size: an unsigned integer followed by an optional unit (`B`,
/// `KB`/`MB`/`GB`/`TB` in powers of 1000, `KiB`/`MiB`/`GiB`/`TiB` in powers
/// of 1024; units case-insensitive, blanks around the unit allowed).
/// `None` for anything else, including fractions, signs and overflow.
pub(crate) fn size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    if number.is_empty() {
        return None;
    }
    let n: u64 = number.parse().ok()?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(multiplier)
}

/// Parses a decimal integer in `min..=max` (blanks around it allowed).
pub(crate) fn count(text: &str, min: usize, max: usize) -> Option<usize> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok().filter(|n| (min..=max).contains(n))
}

/// Parses a positive, finite number of seconds (`60`, `2.5`).
pub(crate) fn seconds(text: &str) -> Option<Duration> {
    let t = text.trim();
    // `f64::from_str` also accepts `inf`, `NaN` and exponents; keep to plain decimals.
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let v: f64 = t.parse().ok()?;
    if v > 0.0 {
        Duration::try_from_secs_f64(v).ok()
    } else {
        None
    }
}

/// Parses a boolean: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`
/// (case-insensitive).
pub(crate) fn boolean(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}
