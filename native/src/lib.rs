//! `streamcrawl_native`: optional compiled hot paths of `streamcrawl_core` (loaded by
//! `streamcrawl_core._native`). Every function gives exactly the pure-Python result, or None where it
//! leaves the case to the Python code; the Python tests check both paths against each other.

use pyo3::prelude::*;

mod bloom;
mod murmur3;
mod simhash;
mod url;

/// Bumped whenever a signature or a result changes, so a stale build is ignored rather than misused.
const API_VERSION: u32 = 1;

/// MurmurHash3 x64-128 (seed 0) of `data`: (h1, h2) as unsigned 64-bit ints (for tests).
#[pyfunction]
fn murmur3_128(data: &[u8]) -> (u64, u64) {
    murmur3::hash128(data)
}

#[pymodule]
fn streamcrawl_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("API_VERSION", API_VERSION)?;
    m.add_function(wrap_pyfunction!(murmur3_128, m)?)?;
    m.add_function(wrap_pyfunction!(simhash::simhash, m)?)?;
    m.add_function(wrap_pyfunction!(bloom::bloom_contains, m)?)?;
    m.add_function(wrap_pyfunction!(bloom::bloom_add, m)?)?;
    m.add_class::<url::Normalizer>()?;
    Ok(())
}
