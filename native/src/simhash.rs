//! SimHash of text, exactly as `streamcrawl_core.simhash.simhash`: tokens are the maximal runs of word
//! characters (Python's `\w`: `str.isalnum()` or "_") of the lowercased text, all-digit tokens
//! (`str.isdigit()`) are dropped if asked, features are the `shingle`-token windows joined by single
//! spaces (a text with fewer tokens is one feature), each hashed with MurmurHash3 x64-128 (first half)
//! of its UTF-8 bytes; bit j is set iff more than half of the features have it set.
//!
//! ASCII is classified here; a non-ASCII character is classified by asking Python's own `str.isalnum`
//! and `str.isdigit` (once per distinct character and call), so the Unicode tables are CPython's and the
//! tokens cannot drift from the pure path's. The caller passes text that is already lowercased
//! (`str.lower()`) unless it is ASCII, which is lowercased here.

use std::collections::HashMap;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::murmur3::hash128;

/// Column counts of 64-bit hashes, 8 bits per step: lane word i holds, in byte b, the count of bit
/// 8*b + i, and is flushed into 64 plain counters before a byte can overflow (every 255 hashes).
struct BitCounter {
    lanes: [u64; 8],
    pending: u32,
    counts: [u64; 64],
    n: u64,
}

impl BitCounter {
    fn new() -> Self {
        BitCounter { lanes: [0; 8], pending: 0, counts: [0; 64], n: 0 }
    }

    #[inline(always)]
    fn add(&mut self, h: u64) {
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            *lane += (h >> i) & 0x0101_0101_0101_0101;
        }
        self.n += 1;
        self.pending += 1;
        if self.pending == 255 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            for b in 0..8 {
                self.counts[8 * b + i] += (*lane >> (8 * b)) & 0xff;
            }
            *lane = 0;
        }
        self.pending = 0;
    }

    fn finish(mut self) -> u64 {
        self.flush();
        let mut fp = 0u64;
        for (j, &c) in self.counts.iter().enumerate() {
            if 2 * c > self.n {
                fp |= 1 << j;
            }
        }
        fp
    }
}

/// Tokens packed as `tok1 tok2 ... tokN ` (lowercased, single spaces); (start, len) of each in `packed`.
struct Tokens {
    packed: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

fn tokenize(
    py: Python<'_>,
    text: &str,
    ignore_numbers: bool,
    mut classify: impl FnMut(Python<'_>, char) -> PyResult<(bool, bool)>,
) -> PyResult<Tokens> {
    let bytes = text.as_bytes();
    let mut packed = Vec::with_capacity(bytes.len() + 1);
    let mut spans = Vec::with_capacity(bytes.len() / 5 + 1);
    let mut start: Option<usize> = None; // start of the current token in `packed`
    let mut all_digits = true;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let (word, digit, width) = if b < 0x80 {
            (b.is_ascii_alphanumeric() || b == b'_', b.is_ascii_digit(), 1)
        } else {
            let c = text[i..].chars().next().expect("i is on a char boundary");
            let (w, d) = classify(py, c)?;
            (w, d, c.len_utf8())
        };
        if word {
            if start.is_none() {
                start = Some(packed.len());
                all_digits = true;
            }
            all_digits &= digit;
            if width == 1 {
                packed.push(b.to_ascii_lowercase());
            } else {
                packed.extend_from_slice(&bytes[i..i + width]);
            }
        } else if let Some(s) = start.take() {
            end_token(&mut packed, &mut spans, s, ignore_numbers && all_digits);
        }
        i += width;
    }
    if let Some(s) = start {
        end_token(&mut packed, &mut spans, s, ignore_numbers && all_digits);
    }
    Ok(Tokens { packed, spans })
}

#[inline(always)]
fn end_token(packed: &mut Vec<u8>, spans: &mut Vec<(usize, usize)>, start: usize, drop: bool) {
    if drop {
        packed.truncate(start);
    } else {
        spans.push((start, packed.len() - start));
        packed.push(b' ');
    }
}

fn fingerprint(tokens: &Tokens, shingle: u64) -> u64 {
    let spans = &tokens.spans;
    let ntok = spans.len();
    if ntok == 0 {
        return 0;
    }
    let h1 = |first: usize, last: usize| {
        let (s, _) = spans[first];
        let (ls, ll) = spans[last];
        hash128(&tokens.packed[s..ls + ll]).0
    };
    if (ntok as u64) < shingle {
        return h1(0, ntok - 1); // one feature: every token; the majority of one hash is that hash
    }
    let w = shingle as usize; // <= ntok here
    let mut counter = BitCounter::new();
    for first in 0..=ntok - w {
        counter.add(h1(first, first + w - 1));
    }
    counter.finish()
}

/// SimHash of `text` (lowercased by the caller unless ASCII); None if it is not valid UTF-8 (lone
/// surrogates), which the Python path handles. `shingle` must be >= 1.
#[pyfunction]
pub fn simhash(py: Python<'_>, text: &Bound<'_, PyString>, shingle: u64, ignore_numbers: bool) -> PyResult<Option<u64>> {
    if shingle == 0 {
        return Ok(None);
    }
    let Ok(s) = text.to_str() else { return Ok(None) };
    let mut seen: HashMap<char, (bool, bool)> = HashMap::new();
    let classify = |py: Python<'_>, c: char| -> PyResult<(bool, bool)> {
        if let Some(&v) = seen.get(&c) {
            return Ok(v);
        }
        let mut buf = [0u8; 4];
        let one = PyString::new(py, c.encode_utf8(&mut buf));
        let word = one.call_method0(intern!(py, "isalnum"))?.is_truthy()?;
        let digit = one.call_method0(intern!(py, "isdigit"))?.is_truthy()?;
        seen.insert(c, (word, digit));
        Ok((word, digit))
    };
    let tokens = tokenize(py, s, ignore_numbers, classify)?;
    Ok(Some(fingerprint(&tokens, shingle)))
}
