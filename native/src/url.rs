//! The fast paths of `streamcrawl_core.urls.normalize`, byte for byte: an absolute http(s) URL that
//! needs no cleaning, decoding or escaping (`_FAST_RE`), and a simple relative reference against such a
//! base (`_FAST_REF_RE`). Anything else, and every case where the Python code would raise, returns None
//! so that the Python code runs and gives its own answer or error: this side never has to reproduce an
//! error, and "not sure" is always safe. Only ASCII reaches the output (a fragment is dropped).

use std::collections::HashSet;

use pyo3::prelude::*;
use pyo3::types::PyString;

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

const fn table(extra: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < ALNUM.len() {
        t[ALNUM[i] as usize] = true;
        i += 1;
    }
    let mut j = 0;
    while j < extra.len() {
        t[extra[j] as usize] = true;
        j += 1;
    }
    t
}

// The character classes of urls._FAST_RE / _FAST_REF_RE (PCHAR = unreserved, sub-delims, ":" and "@").
static HOST: [bool; 256] = table(b"._-");
static PATH: [bool; 256] = table(b"-._~!$&'()*+,=:@/"); // pchar without ";", plus "/"
static QUERY: [bool; 256] = table(b"-._~!$&'()*+,;=:@/?"); // pchar plus "/" and "?"
static REF_PATH: [bool; 256] = table(b"-._~!$&'()*+,=@/"); // pchar without ";" and ":", plus "/"

#[inline(always)]
fn run(s: &[u8], mut i: usize, class: &[bool; 256]) -> usize {
    while i < s.len() && class[s[i] as usize] {
        i += 1;
    }
    i
}

/// The rest of `s` from `i` is a dropped fragment "#..." with no control character or space.
#[inline(always)]
fn fragment_to_end(s: &[u8], i: usize) -> bool {
    i == s.len() || (s[i] == b'#' && s[i + 1..].iter().all(|&b| b > 0x20))
}

struct Absolute<'a> {
    https: bool,
    host: &'a [u8],
    port: Option<&'a [u8]>,
    path: Option<&'a [u8]>,
    query: Option<&'a [u8]>,
}

/// `_FAST_RE.fullmatch`: `(https?)://([host chars]+(:[0-9]{1,5})?)(/[path]*)?(\?[query]*)?(#[^\0- ]*)?`
fn parse_absolute(s: &[u8]) -> Option<Absolute<'_>> {
    if s.len() < 8 || !s[..4].eq_ignore_ascii_case(b"http") {
        return None;
    }
    let https = s[4] == b's' || s[4] == b'S';
    let mut i = 4 + https as usize;
    if !s[i..].starts_with(b"://") {
        return None;
    }
    i += 3;
    let host_start = i;
    i = run(s, i, &HOST);
    if i == host_start {
        return None;
    }
    let host = &s[host_start..i];
    let mut port = None;
    if i < s.len() && s[i] == b':' {
        let start = i + 1;
        i = start;
        while i < s.len() && s[i].is_ascii_digit() {
            i += 1;
        }
        if i == start || i - start > 5 {
            return None;
        }
        port = Some(&s[start..i]);
    }
    let mut path = None;
    if i < s.len() && s[i] == b'/' {
        let start = i;
        i = run(s, i + 1, &PATH);
        path = Some(&s[start..i]);
    }
    let mut query = None;
    if i < s.len() && s[i] == b'?' {
        let start = i + 1;
        i = run(s, start, &QUERY);
        query = Some(&s[start..i]);
    }
    fragment_to_end(s, i).then_some(Absolute { https, host, port, path, query })
}

/// `url_host.normalize_host` for a host of [A-Za-z0-9._-]+; None where it would raise or where the
/// last label is numeric and the host is anything but a canonical dotted quad (Python decides those).
fn normalize_host(raw: &[u8]) -> Option<Vec<u8>> {
    let raw = raw.strip_suffix(b".").unwrap_or(raw);
    if raw.is_empty() || raw.len() > 253 {
        return None;
    }
    let host = raw.to_ascii_lowercase();
    let last = host.rsplit(|&b| b == b'.').next().unwrap_or(&[]);
    let numeric = (!last.is_empty() && last.iter().all(u8::is_ascii_digit))
        || (last.starts_with(b"0x") && last[2..].iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    if numeric {
        // ipaddress.IPv4Address accepts exactly four 1-3 digit decimal octets <= 255 without leading
        // zeros, and prints them back unchanged.
        let quads: Vec<&[u8]> = host.split(|&b| b == b'.').collect();
        let ok = quads.len() == 4
            && quads.iter().all(|q| {
                (1..=3).contains(&q.len())
                    && q.iter().all(u8::is_ascii_digit)
                    && (q.len() == 1 || q[0] != b'0')
                    && std::str::from_utf8(q).ok().and_then(|t| t.parse::<u16>().ok()).is_some_and(|v| v <= 255)
            });
        return ok.then_some(host);
    }
    // _LABEL_RE: [a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?
    let label_ok = |l: &[u8]| {
        (1..=63).contains(&l.len())
            && l.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            && l[0] != b'-'
            && l[l.len() - 1] != b'-'
    };
    host.split(|&b| b == b'.').all(label_ok).then_some(host)
}

/// "scheme://host[:port]" as `url_host.split_authority` + the fast paths spell it; None if it would raise.
fn origin(abs: &Absolute<'_>) -> Option<Vec<u8>> {
    let host = normalize_host(abs.host)?;
    let mut out = Vec::with_capacity(host.len() + 14);
    out.extend_from_slice(if abs.https { b"https://" } else { b"http://" });
    out.extend_from_slice(&host);
    if let Some(port) = abs.port {
        let digits = std::str::from_utf8(port).ok()?;
        let value: u32 = digits.parse().ok()?;
        if value == 0 || value > 65535 {
            return None;
        }
        let default = if abs.https { 443 } else { 80 };
        if value != default {
            out.push(b':');
            out.extend_from_slice(value.to_string().as_bytes()); // drops leading zeros, like str(int())
        }
    }
    Some(out)
}

/// `rfc3986.remove_dot_segments` for "" or an absolute path; None for a rootless one (never reached).
fn remove_dot_segments(path: &[u8]) -> Option<Vec<u8>> {
    if !path.contains(&b'.') || (path.first() == Some(&b'/') && !path.windows(2).any(|w| w == b"/.")) {
        return Some(path.to_vec());
    }
    if path.first() != Some(&b'/') {
        return None;
    }
    let segs: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let last = segs.len() - 1;
    let mut out: Vec<&[u8]> = Vec::with_capacity(segs.len());
    for (i, &seg) in segs.iter().enumerate().skip(1) {
        if seg == b".." {
            out.pop();
        } else if seg != b"." {
            out.push(seg);
            continue;
        }
        if i == last {
            out.push(b""); // a trailing "." or ".." leaves the path ending in "/"
        }
    }
    let mut res = Vec::with_capacity(path.len());
    res.push(b'/');
    for (i, seg) in out.iter().enumerate() {
        if i > 0 {
            res.push(b'/');
        }
        res.extend_from_slice(seg);
    }
    Some(res)
}

/// The policy of one `NormalizerConfig` (names and prefixes already lowercased by Python).
#[pyclass(frozen, module = "streamcrawl_native")]
pub struct Normalizer {
    strip: HashSet<Vec<u8>>,
    prefixes: Vec<Vec<u8>>,
    sort_query: bool,
    max_length: usize,
}

fn param_name(p: &[u8]) -> &[u8] {
    p.split(|&b| b == b'=').next().unwrap_or(p)
}

impl Normalizer {
    /// `url_policy.filter_query` for an already escaped, ASCII query.
    fn filter_query(&self, query: &[u8], out: &mut Vec<u8>) {
        let mut params: Vec<&[u8]> = query.split(|&b| b == b'&').filter(|p| !p.is_empty()).collect();
        if !self.strip.is_empty() || !self.prefixes.is_empty() {
            let mut low = Vec::new();
            params.retain(|p| {
                low.clear();
                low.extend(param_name(p).iter().map(u8::to_ascii_lowercase));
                !(self.strip.contains(&low) || self.prefixes.iter().any(|pre| low.starts_with(pre)))
            });
        }
        if self.sort_query && params.len() > 1 {
            params.sort_by(|a, b| param_name(a).cmp(param_name(b))); // stable: repeated keys keep order
        }
        if !params.is_empty() {
            out.push(b'?');
            for (i, p) in params.iter().enumerate() {
                if i > 0 {
                    out.push(b'&');
                }
                out.extend_from_slice(p);
            }
        }
    }

    fn absolute(&self, abs: &Absolute<'_>) -> Option<Vec<u8>> {
        let mut out = origin(abs)?;
        match abs.path {
            None => out.push(b'/'),
            Some(p) => out.extend_from_slice(&remove_dot_segments(p)?),
        }
        if let Some(q) = abs.query {
            self.filter_query(q, &mut out);
        }
        Some(out)
    }

    /// `urls._normalize_relative_fast`.
    fn relative(&self, r: &[u8], base: &[u8]) -> Option<Vec<u8>> {
        let mut i = run(r, 0, &REF_PATH);
        let rpath = &r[..i];
        let mut rquery = None;
        if i < r.len() && r[i] == b'?' {
            let start = i + 1;
            i = run(r, start, &QUERY);
            rquery = Some(&r[start..i]);
        }
        if !fragment_to_end(r, i) || rpath.starts_with(b"//") || base.len() > 16 * self.max_length {
            return None;
        }
        let b = parse_absolute(base)?;
        let mut out = origin(&b)?;
        let base_path = b.path.unwrap_or(b"");
        let (path, query): (Vec<u8>, Option<&[u8]>) = if rpath.is_empty() {
            (base_path.to_vec(), rquery.or(b.query))
        } else if rpath[0] == b'/' {
            (rpath.to_vec(), rquery)
        } else if base_path.is_empty() {
            ([b"/", rpath].concat(), rquery)
        } else {
            let dir = base_path.iter().rposition(|&c| c == b'/').map_or(0, |p| p + 1);
            ([&base_path[..dir], rpath].concat(), rquery)
        };
        let path = remove_dot_segments(&path)?;
        out.extend_from_slice(if path.is_empty() { b"/" } else { &path });
        if let Some(q) = query {
            self.filter_query(q, &mut out);
        }
        Some(out)
    }
}

#[pymethods]
impl Normalizer {
    #[new]
    fn new(strip: Vec<String>, prefixes: Vec<String>, sort_query: bool, max_length: usize) -> Self {
        Normalizer {
            strip: strip.into_iter().map(String::into_bytes).collect(),
            prefixes: prefixes.into_iter().map(String::into_bytes).collect(),
            sort_query,
            max_length,
        }
    }

    /// `normalize(url, base)` when a fast path applies and succeeds, else None (the caller then runs
    /// the Python code, which gives the same answer or raises).
    #[pyo3(signature = (url, base=None))]
    fn normalize<'py>(
        &self,
        py: Python<'py>,
        url: &Bound<'py, PyAny>,
        base: Option<&Bound<'py, PyAny>>,
    ) -> Option<Bound<'py, PyString>> {
        let url = url.cast::<PyString>().ok()?.to_str().ok()?.as_bytes();
        if url.len() > 16 * self.max_length {
            return None;
        }
        let out = match parse_absolute(url) {
            Some(abs) => self.absolute(&abs)?,
            None => {
                let base = base?.cast::<PyString>().ok()?.to_str().ok()?.as_bytes();
                self.relative(url, base)?
            }
        };
        if out.len() > self.max_length {
            return None; // too_long: the Python code raises it
        }
        Some(PyString::new(py, std::str::from_utf8(&out).ok()?))
    }
}
