//! A small deterministic mutator for the replay test: variations of the committed inputs
//! in the spirit of libFuzzer's (bit flips, interesting bytes, inserted, deleted, repeated
//! and spliced chunks), from a fixed seed, so that `cargo test` tries the same new inputs
//! on every machine and a failure reproduces.

/// Inputs never grow past this (libFuzzer's default `-max_len` with a small corpus).
pub const MAX_LEN: usize = 4096;

/// Bytes that change the meaning of the formats under test: delimiters, quotes, signs,
/// varint continuation bits, limits.
const INTERESTING: &[u8] = b"\x00\x01\x7f\x80\xff\"\\{}[]:,-+.0 9e\n#&*!|>'";

/// xorshift64*: fast, good enough to pick mutations, the same everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; 0 is remapped).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.bits() % n as u64) as usize
        }
    }
}

/// `input` changed by one to four mutations, splicing from `other`.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(7) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.bits() as u8).collect();
                out.splice(at..at, bytes);
            }
            3 => {
                let end = (at + 1 + rng.below(16)).min(out.len());
                out.drain(at.min(end)..end);
            }
            4 => {
                // A chunk repeated: deep nesting, long lists, many descriptors.
                let end = (at + 1 + rng.below(8)).min(out.len());
                let chunk = out.get(at.min(end)..end).unwrap_or_default().to_vec();
                let copies = 1 + rng.below(64);
                let repeated = chunk.repeat(copies);
                out.splice(at..at, repeated);
            }
            5 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + 1 + rng.below(64)).min(other.len());
                out.splice(at..at, other[from..end].iter().copied());
            }
            _ => out.truncate(at),
        }
    }
    out.truncate(MAX_LEN);
    out
}
