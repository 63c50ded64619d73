//! Bloom filter probes over the Python filter's own `bytearray`, for batches of int items taken straight
//! from a Python list or tuple (no numpy conversion). Positions are exactly those of
//! `streamcrawl_core.bloom`: (h1, h2) = MurmurHash3 x64-128 of the item's 8 little-endian bytes read as
//! signed int64, floor modulo m, then g_i = (h1 + i*h2) mod m; bit i is `byte[i >> 3] >> (i & 7) & 1`.
//! `add` inserts one item after another, so its "new" flags are those of one-by-one inserts.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyList, PyTuple};

use crate::murmur3::hash128_u64;

/// The items as their 64-bit patterns, or None when the Python path must handle the batch: an item that
/// is not exactly an int (bool, bytes, subclasses) or an int outside [-2^63, 2^64), so that path raises
/// its own error (before inserting anything).
fn int_keys(items: &Bound<'_, PyAny>) -> Option<Vec<u64>> {
    let (ptr, n, is_list) = if let Ok(list) = items.cast::<PyList>() {
        (list.as_ptr(), list.len(), true)
    } else if let Ok(tuple) = items.cast::<PyTuple>() {
        (tuple.as_ptr(), tuple.len(), false)
    } else {
        return None;
    };
    let mut keys = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: i < len of a list/tuple we hold a reference to; no Python code runs in this loop
        // (exact ints only: no __index__), so the list cannot change under us. Items are borrowed.
        unsafe {
            let obj = if is_list {
                ffi::PyList_GET_ITEM(ptr, i as ffi::Py_ssize_t)
            } else {
                ffi::PyTuple_GET_ITEM(ptr, i as ffi::Py_ssize_t)
            };
            if ffi::PyLong_CheckExact(obj) == 0 {
                return None;
            }
            let mut overflow: std::os::raw::c_int = 0;
            let v = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
            if overflow == 0 {
                keys.push(v as u64);
            } else if overflow > 0 {
                let u = ffi::PyLong_AsUnsignedLongLong(obj);
                if u == u64::MAX && !ffi::PyErr_Occurred().is_null() {
                    ffi::PyErr_Clear(); // >= 2^64: the Python path raises ValueError
                    return None;
                }
                keys.push(u);
            } else {
                return None; // < -2^63
            }
        }
    }
    Some(keys)
}

#[inline(always)]
fn probes(key: u64, m: u64) -> (u64, u64) {
    let (h1, h2) = hash128_u64(key);
    let mi = m as i64;
    ((h1 as i64).rem_euclid(mi) as u64, (h2 as i64).rem_euclid(mi) as u64)
}

fn checked_bits<'a>(bits: &'a Bound<'_, PyByteArray>, m: u64, k: u32) -> Option<&'a mut [u8]> {
    if m == 0 || m > i64::MAX as u64 || k == 0 || bits.len() as u64 != m.div_ceil(8) {
        return None;
    }
    // SAFETY: the caller holds the GIL and runs no Python code while the slice is alive, so the
    // bytearray can be neither resized nor read by anyone else meanwhile.
    Some(unsafe { bits.as_bytes_mut() })
}

/// Membership of each int item of `items` (a list or tuple), or None to use the Python path.
#[pyfunction]
pub fn bloom_contains<'py>(
    py: Python<'py>,
    bits: &Bound<'py, PyByteArray>,
    m: u64,
    k: u32,
    items: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let Some(keys) = int_keys(items) else { return Ok(None) };
    let Some(arr) = checked_bits(bits, m, k) else { return Ok(None) };
    let out: Vec<bool> = keys
        .iter()
        .map(|&key| {
            let (mut pos, step) = probes(key, m);
            for _ in 0..k {
                if arr[(pos >> 3) as usize] >> (pos & 7) & 1 == 0 {
                    return false; // most absent items stop at the first or second probe
                }
                pos += step;
                if pos >= m {
                    pos -= m;
                }
            }
            true
        })
        .collect();
    PyList::new(py, out).map(Some)
}

/// Insert every int item one after another; (per-item "was new" flags, number of new items), or None.
#[pyfunction]
pub fn bloom_add<'py>(
    py: Python<'py>,
    bits: &Bound<'py, PyByteArray>,
    m: u64,
    k: u32,
    items: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyList>, usize)>> {
    let Some(keys) = int_keys(items) else { return Ok(None) };
    let Some(arr) = checked_bits(bits, m, k) else { return Ok(None) };
    let mut added = 0usize;
    let out: Vec<bool> = keys
        .iter()
        .map(|&key| {
            let (mut pos, step) = probes(key, m);
            let mut new = false;
            for _ in 0..k {
                let (byte, mask) = ((pos >> 3) as usize, 1u8 << (pos & 7));
                if arr[byte] & mask == 0 {
                    arr[byte] |= mask;
                    new = true;
                }
                pos += step;
                if pos >= m {
                    pos -= m;
                }
            }
            added += new as usize;
            new
        })
        .collect();
    Ok(Some((PyList::new(py, out)?, added)))
}
