//! One lease table entry: the grants of one (rule, descriptor values), as plain data, and
//! the decisions on it (spend, add a grant, give back), all at a given instant. The table
//! ([`super::LeaseTable`]) reads, applies one of these and writes by compare-and-swap.

/// Separate grants one entry keeps.
pub const SUB_GRANTS: usize = 2;

/// Bytes of one entry.
pub const ENTRY_LEN: usize = 16 + 4 + 8 + SUB_GRANTS * 12;

/// One grant's tokens left and the instant after which none may be spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubGrant {
    /// Tokens left.
    pub remaining: u32,
    /// Wall-clock instant (ns) from which the tokens are void.
    pub valid_until_ns: u64,
}

impl SubGrant {
    /// Whether it still has tokens that may be spent at `now_ns`.
    pub fn live(&self, now_ns: u64) -> bool {
        self.remaining > 0 && now_ns < self.valid_until_ns
    }
}

/// The leases of one (rule, descriptor values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Which descriptor (see [`crate::shared::placement::PlacementKey::lease`]).
    pub fingerprint: u128,
    /// Size of the last grant received: the low-water mark is half of it.
    pub last_grant: u32,
    /// Until when a refill is in flight (0: none).
    pub flight_until_ns: u64,
    /// The separate grants.
    pub grants: [SubGrant; SUB_GRANTS],
}

impl Lease {
    /// The entry of a descriptor with no grant yet.
    pub(super) fn empty(fingerprint: u128) -> Lease {
        Lease {
            fingerprint,
            last_grant: 0,
            flight_until_ns: 0,
            grants: [SubGrant::default(); SUB_GRANTS],
        }
    }

    /// Tokens that may be spent at `now_ns`.
    pub fn available(&self, now_ns: u64) -> u32 {
        self.grants
            .iter()
            .filter(|g| g.live(now_ns))
            .fold(0u32, |sum, g| sum.saturating_add(g.remaining))
    }

    /// Whether the entry still says anything at `now_ns` (else its place is free).
    pub(super) fn live(&self, now_ns: u64) -> bool {
        self.available(now_ns) > 0 || now_ns < self.flight_until_ns
    }

    /// When its last live grant expires (for eviction: the earliest goes first).
    pub(super) fn expires_ns(&self) -> u64 {
        self.grants
            .iter()
            .map(|g| g.valid_until_ns)
            .max()
            .unwrap_or(0)
    }

    /// Takes `cost` tokens at `now_ns`, from the grants expiring first, and says what was
    /// taken from which grant; `None` (and nothing taken) when the live grants hold fewer.
    pub fn take(&mut self, cost: u32, now_ns: u64) -> Option<Taken> {
        if self.available(now_ns) < cost {
            return None;
        }
        let mut order: [usize; SUB_GRANTS] = std::array::from_fn(|i| i);
        order.sort_by_key(|&i| self.grants[i].valid_until_ns);
        let mut taken = Taken::default();
        let mut left = cost;
        for (slot, i) in order.into_iter().enumerate() {
            let g = &mut self.grants[i];
            if left == 0 || !g.live(now_ns) {
                continue;
            }
            let n = left.min(g.remaining);
            g.remaining -= n;
            left -= n;
            taken.parts[slot] = SubGrant {
                remaining: n,
                valid_until_ns: g.valid_until_ns,
            };
        }
        Some(taken)
    }

    /// Whether a refill should start at `now_ns`: fewer than half of the last grant
    /// left, and no refill in flight.
    pub(super) fn needs_refill(&self, now_ns: u64) -> bool {
        u64::from(self.available(now_ns)) * 2 < u64::from(self.last_grant)
            && now_ns >= self.flight_until_ns
    }

    /// Adds a grant received at `now_ns` (see the module documentation for how it is
    /// kept apart from, or merged to an earlier deadline with, the grants already held).
    pub fn add(&mut self, grant: SubGrant, now_ns: u64) {
        self.last_grant = grant.remaining;
        if !grant.live(now_ns) {
            return;
        }
        // The same deadline: the same sub-grant.
        if let Some(g) = self
            .grants
            .iter_mut()
            .find(|g| g.live(now_ns) && g.valid_until_ns == grant.valid_until_ns)
        {
            g.remaining = g.remaining.saturating_add(grant.remaining);
            return;
        }
        if let Some(g) = self.grants.iter_mut().find(|g| !g.live(now_ns)) {
            *g = grant;
            return;
        }
        // Every sub-grant is live: merge two of the three to the earlier deadline of
        // the two, keeping the one expiring first apart.
        let later = if self.grants[0].valid_until_ns >= self.grants[1].valid_until_ns {
            0
        } else {
            1
        };
        let g = &mut self.grants[later];
        g.remaining = g.remaining.saturating_add(grant.remaining);
        g.valid_until_ns = g.valid_until_ns.min(grant.valid_until_ns);
    }

    /// Gives back what [`Lease::take`] took, to the grants it came from if they are
    /// still live at `now_ns` (tokens of an expired grant are void).
    pub fn give_back(&mut self, taken: &Taken, now_ns: u64) {
        for part in taken.parts.iter().filter(|p| p.remaining > 0) {
            if let Some(g) = self
                .grants
                .iter_mut()
                .find(|g| g.valid_until_ns == part.valid_until_ns && now_ns < g.valid_until_ns)
            {
                g.remaining = g.remaining.saturating_add(part.remaining);
            }
        }
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        out.extend_from_slice(&self.last_grant.to_le_bytes());
        out.extend_from_slice(&self.flight_until_ns.to_le_bytes());
        for g in &self.grants {
            out.extend_from_slice(&g.remaining.to_le_bytes());
            out.extend_from_slice(&g.valid_until_ns.to_le_bytes());
        }
    }

    fn decode(bytes: &[u8; ENTRY_LEN]) -> Lease {
        let u32_at = |at: usize| u32::from_le_bytes([0, 1, 2, 3].map(|i| bytes[at + i]));
        let u64_at = |at: usize| u64::from_le_bytes(std::array::from_fn(|i| bytes[at + i]));
        let fingerprint = u128::from_le_bytes(std::array::from_fn(|i| bytes[i]));
        Lease {
            fingerprint,
            last_grant: u32_at(16),
            flight_until_ns: u64_at(20),
            grants: std::array::from_fn(|i| SubGrant {
                remaining: u32_at(28 + 12 * i),
                valid_until_ns: u64_at(32 + 12 * i),
            }),
        }
    }
}

/// What one spend took from each sub-grant (by deadline), to give it back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Taken {
    /// Tokens taken and the deadline of the grant they came from.
    pub parts: [SubGrant; SUB_GRANTS],
}

/// The entries of a set's value; a trailing partial entry is ignored.
pub fn decode_set(bytes: &[u8]) -> Vec<Lease> {
    bytes
        .chunks_exact(ENTRY_LEN)
        .filter_map(|c| c.try_into().ok().map(Lease::decode))
        .collect()
}

/// The first entry of a set's value that is `fingerprint`'s, and its position: only that
/// one decoded (the others are told apart by their first 16 bytes), as the first such of
/// [`decode_set`].
pub fn find_in_set(bytes: &[u8], fingerprint: u128) -> Option<(usize, Lease)> {
    bytes
        .chunks_exact(ENTRY_LEN)
        .enumerate()
        .find_map(|(index, chunk)| {
            let entry: &[u8; ENTRY_LEN] = chunk.try_into().ok()?;
            let head = u128::from_le_bytes(*entry.first_chunk::<16>()?);
            (head == fingerprint).then(|| (index, Lease::decode(entry)))
        })
}

/// The set `bytes` with its entry at `index` (from [`find_in_set`]) now `lease`: what
/// [`encode_set`] gives for [`decode_set`]'s entries with that one changed (a trailing
/// partial entry dropped), with no vector of the others decoded and encoded again.
pub fn replace_in_set(bytes: &[u8], index: usize, lease: &Lease) -> Vec<u8> {
    let whole = bytes.len() - bytes.len() % ENTRY_LEN;
    let at = index.saturating_mul(ENTRY_LEN).min(whole);
    let after = at.saturating_add(ENTRY_LEN).min(whole);
    let mut out = Vec::with_capacity(whole.max(ENTRY_LEN));
    out.extend_from_slice(&bytes[..at]);
    lease.encode_into(&mut out);
    out.extend_from_slice(&bytes[after..whole]);
    out
}

/// What a set of `entries` stores.
pub fn encode_set(entries: &[Lease]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_LEN);
    for e in entries {
        e.encode_into(&mut out);
    }
    out
}
