//! MurmurHash3 x64-128 with seed 0, the hash behind URL fingerprints, Bloom probe positions and SimHash
//! features. Must equal `mmh3.hash64(data, 0, True, True)` / `mmh3.hash_bytes(data)` bit for bit (the
//! Python tests compare them on many inputs).

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

#[inline(always)]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[inline(always)]
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

#[inline(always)]
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

#[inline(always)]
fn finish(mut h1: u64, mut h2: u64, len: u64) -> (u64, u64) {
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// (h1, h2) of MurmurHash3 x64-128, seed 0.
#[inline]
pub fn hash128(data: &[u8]) -> (u64, u64) {
    let (mut h1, mut h2) = (0u64, 0u64);
    let mut blocks = data.chunks_exact(16);
    for b in &mut blocks {
        let k1 = u64::from_le_bytes(b[..8].try_into().unwrap());
        let k2 = u64::from_le_bytes(b[8..].try_into().unwrap());
        h1 ^= mix_k1(k1);
        h1 = h1.rotate_left(27).wrapping_add(h2).wrapping_mul(5).wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(k2);
        h2 = h2.rotate_left(31).wrapping_add(h1).wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        // A zero-padded little-endian load; the reference's byte switch computes the same words.
        let mut buf = [0u8; 16];
        buf[..tail.len()].copy_from_slice(tail);
        let k1 = u64::from_le_bytes(buf[..8].try_into().unwrap());
        let k2 = u64::from_le_bytes(buf[8..].try_into().unwrap());
        if tail.len() > 8 {
            h2 ^= mix_k2(k2);
        }
        h1 ^= mix_k1(k1);
    }
    finish(h1, h2, data.len() as u64)
}

/// (h1, h2) of the 8 little-endian bytes of `key` (the Bloom filter's int items): the tail-only path.
#[inline(always)]
pub fn hash128_u64(key: u64) -> (u64, u64) {
    finish(mix_k1(key), 0, 8)
}
