//! The `RateLimitResponse` decoded in place: the fields [`super::interpret`] reads,
//! borrowed from the answer's bytes.
//!
//! prost's decoder copied every header, name and body into owned strings and vectors,
//! read each varint through its `Buf` trait, and cost a global request about 2 500
//! instructions and a dozen allocations. This one walks the bytes once and allocates
//! only for more than two statuses or for headers the service adds. It accepts and
//! refuses exactly what prost's decoding of the same message does (a property test
//! compares them on generated and mangled answers): unknown fields of every wire type
//! are skipped, groups included, down to prost's recursion limit; a known field with
//! another wire type, a string that is not UTF-8, a varint longer than ten bytes, a
//! length past the end and an unmatched end-group tag are errors; a scalar or string
//! sent twice keeps the last value, a singular message sent twice is merged, each
//! repeated message is a new element. Fields the filter never reads (a limit's name, a
//! quota's id, the response's `quota` and `dynamic_metadata`) are checked the same way
//! and dropped.

use smallvec::SmallVec;

/// Any way the bytes are not a `RateLimitResponse` prost would decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

type Decoded<T> = Result<T, Malformed>;

/// prost's recursion limit: how deep messages and groups may nest.
const DEPTH: u32 = 100;

/// Protobuf wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const DELIMITED: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

/// The response's fields the filter reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response<'a> {
    /// `overall_code` (an open enum: any value).
    pub overall_code: i32,
    /// `statuses`, in order (inline for two: most requests send one or two descriptors).
    pub statuses: SmallVec<[Status; 2]>,
    /// `response_headers_to_add`.
    pub response_headers: Vec<HeaderValue<'a>>,
    /// `request_headers_to_add`.
    pub request_headers: Vec<HeaderValue<'a>>,
    /// `raw_body`.
    pub raw_body: &'a [u8],
}

/// One `DescriptorStatus`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// `code`.
    pub code: i32,
    /// `current_limit`.
    pub current_limit: Option<Limit>,
    /// `limit_remaining`.
    pub limit_remaining: u32,
    /// `duration_until_reset`, as (seconds, nanos).
    pub duration_until_reset: Option<(i64, i32)>,
    /// `quota`.
    pub quota: Option<Quota>,
}

/// A status's `RateLimit` (its `name` checked, not kept).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limit {
    /// `requests_per_unit`.
    pub requests_per_unit: u32,
    /// `unit` (an open enum).
    pub unit: i32,
    /// `unit_multiplier` (a `UInt32Value`).
    pub unit_multiplier: Option<u32>,
}

/// A status's `Quota` (its `id` checked, not kept).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// `requests`.
    pub requests: u32,
    /// `valid_until`, as (seconds, nanos).
    pub valid_until: Option<(i64, i32)>,
}

/// One `HeaderValue`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeaderValue<'a> {
    /// `key`.
    pub key: &'a str,
    /// `value`.
    pub value: &'a str,
    /// `raw_value`.
    pub raw_value: &'a [u8],
}

/// A `RateLimitResponse`'s `overall_code` alone, every other field skipped (and checked
/// as [`decode`] checks it): whether a call took a hold, read without the statuses.
pub fn overall_code(bytes: &[u8]) -> Result<i32, Malformed> {
    let mut reader = Reader(bytes);
    let mut code = 0;
    while !reader.0.is_empty() {
        let (tag, wire) = reader.key()?;
        match tag {
            1 => code = reader.int(wire)? as i32,
            _ => reader.skip(wire, tag, DEPTH)?,
        }
    }
    Ok(code)
}

/// Decodes a `RateLimitResponse` as prost's `Message::decode` would, into `response`
/// (a default one: filled in place, not returned, so that its inline statuses are not
/// copied).
pub fn decode<'a>(bytes: &'a [u8], response: &mut Response<'a>) -> Result<(), Malformed> {
    let mut reader = Reader(bytes);
    while !reader.0.is_empty() {
        let (tag, wire) = reader.key()?;
        match tag {
            1 => response.overall_code = reader.int(wire)? as i32,
            2 => {
                // Decoded where it is kept (a failure fails the whole answer).
                response.statuses.push(Status::default());
                if let Some(status) = response.statuses.last_mut() {
                    reader.message(wire, DEPTH, status, status_field)?;
                }
            }
            3 | 4 => {
                let mut header = HeaderValue::default();
                reader.message(wire, DEPTH, &mut header, header_field)?;
                let list = if tag == 3 {
                    &mut response.response_headers
                } else {
                    &mut response.request_headers
                };
                list.push(header);
            }
            5 => response.raw_body = reader.bytes(wire)?,
            // `dynamic_metadata`: a message whose every field is skipped.
            6 => reader.message(wire, DEPTH, &mut (), |_, tag, wire, r, depth| {
                r.skip(wire, tag, depth)
            })?,
            7 => reader.message(wire, DEPTH, &mut Quota::default(), quota_field)?,
            _ => reader.skip(wire, tag, DEPTH)?,
        }
    }
    Ok(())
}

fn status_field(s: &mut Status, tag: u32, wire: u8, r: &mut Reader<'_>, depth: u32) -> Decoded<()> {
    match tag {
        1 => s.code = r.int(wire)? as i32,
        2 => r.message(
            wire,
            depth,
            s.current_limit.get_or_insert_default(),
            limit_field,
        )?,
        3 => s.limit_remaining = r.int(wire)? as u32,
        4 => r.message(
            wire,
            depth,
            s.duration_until_reset.get_or_insert_default(),
            time_field,
        )?,
        5 => r.message(wire, depth, s.quota.get_or_insert_default(), quota_field)?,
        _ => r.skip(wire, tag, depth)?,
    }
    Ok(())
}

fn limit_field(l: &mut Limit, tag: u32, wire: u8, r: &mut Reader<'_>, depth: u32) -> Decoded<()> {
    match tag {
        1 => l.requests_per_unit = r.int(wire)? as u32,
        2 => l.unit = r.int(wire)? as i32,
        3 => {
            r.string(wire)?;
        }
        4 => r.message(
            wire,
            depth,
            l.unit_multiplier.get_or_insert_default(),
            |m, tag, wire, r, depth| match tag {
                1 => {
                    *m = r.int(wire)? as u32;
                    Ok(())
                }
                _ => r.skip(wire, tag, depth),
            },
        )?,
        _ => r.skip(wire, tag, depth)?,
    }
    Ok(())
}

fn quota_field(q: &mut Quota, tag: u32, wire: u8, r: &mut Reader<'_>, depth: u32) -> Decoded<()> {
    match tag {
        1 => q.requests = r.int(wire)? as u32,
        // The `expiration_specifier` oneof's one member: merged like a singular message.
        2 => r.message(
            wire,
            depth,
            q.valid_until.get_or_insert_default(),
            time_field,
        )?,
        3 => {
            r.string(wire)?;
        }
        _ => r.skip(wire, tag, depth)?,
    }
    Ok(())
}

/// A `Duration` or `Timestamp`: seconds, nanos.
fn time_field(
    t: &mut (i64, i32),
    tag: u32,
    wire: u8,
    r: &mut Reader<'_>,
    depth: u32,
) -> Decoded<()> {
    match tag {
        1 => t.0 = r.int(wire)? as i64,
        2 => t.1 = r.int(wire)? as i32,
        _ => r.skip(wire, tag, depth)?,
    }
    Ok(())
}

fn header_field<'a>(
    h: &mut HeaderValue<'a>,
    tag: u32,
    wire: u8,
    r: &mut Reader<'a>,
    depth: u32,
) -> Decoded<()> {
    match tag {
        1 => h.key = r.string(wire)?,
        2 => h.value = r.string(wire)?,
        3 => h.raw_value = r.bytes(wire)?,
        _ => r.skip(wire, tag, depth)?,
    }
    Ok(())
}

/// The bytes not read yet.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// A varint of at most ten bytes, the tenth at most 1 (prost's overflow rule). A
    /// single byte (every key, most small values) is read inline, without a call.
    #[inline(always)]
    fn varint(&mut self) -> Decoded<u64> {
        match self.0 {
            [byte, rest @ ..] if *byte < 0x80 => {
                self.0 = rest;
                Ok(u64::from(*byte))
            }
            _ => self.long_varint(),
        }
    }

    /// [`Reader::varint`] of more than one byte (or none). Up to eight bytes (any
    /// value below 2^56) are read as one word, their 7-bit groups gathered in three
    /// steps; longer ones, and one the bytes end in, byte by byte.
    #[inline(never)]
    fn long_varint(&mut self) -> Decoded<u64> {
        let bytes = self.0;
        let n = bytes.len().min(8);
        let mut word = [0u8; 8];
        word[..n].copy_from_slice(&bytes[..n]);
        let word = u64::from_le_bytes(word);
        // A byte without its high bit ends the varint; the zeros past `n` are not bytes.
        let last = ((!word & 0x8080_8080_8080_8080).trailing_zeros() / 8) as usize;
        if last < n {
            let used = u64::MAX >> (8 * (7 - last));
            let mut value = word & used & 0x7f7f_7f7f_7f7f_7f7f;
            value = (value & 0x007f_007f_007f_007f) | ((value & 0x7f00_7f00_7f00_7f00) >> 1);
            value = (value & 0x0000_3fff_0000_3fff) | ((value & 0x3fff_0000_3fff_0000) >> 2);
            value = (value & 0x0000_0000_0fff_ffff) | ((value & 0x0fff_ffff_0000_0000) >> 4);
            self.0 = bytes.get(last + 1..).unwrap_or_default();
            return Ok(value);
        }
        let mut value = 0u64;
        for (i, &byte) in bytes.iter().take(10).enumerate() {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                if i == 9 && byte > 1 {
                    return Err(Malformed);
                }
                self.0 = &bytes[i + 1..];
                return Ok(value);
            }
        }
        Err(Malformed)
    }

    /// A field's key: its tag (at least 1) and wire type.
    fn key(&mut self) -> Decoded<(u32, u8)> {
        let key = u32::try_from(self.varint()?).map_err(|_| Malformed)?;
        let wire = (key & 7) as u8;
        let tag = key >> 3;
        if wire > FIXED32 || tag == 0 {
            return Err(Malformed);
        }
        Ok((tag, wire))
    }

    /// A varint field's value (`wire` must say varint), for the caller to truncate.
    fn int(&mut self, wire: u8) -> Decoded<u64> {
        expect(wire, VARINT)?;
        self.varint()
    }

    /// A length-delimited field's bytes.
    fn bytes(&mut self, wire: u8) -> Decoded<&'a [u8]> {
        expect(wire, DELIMITED)?;
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| Malformed)?;
        self.take(len)
    }

    /// A string field: UTF-8 or an error.
    fn string(&mut self, wire: u8) -> Decoded<&'a str> {
        std::str::from_utf8(self.bytes(wire)?).map_err(|_| Malformed)
    }

    fn take(&mut self, len: usize) -> Decoded<&'a [u8]> {
        if len > self.0.len() {
            return Err(Malformed);
        }
        let (taken, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(taken)
    }

    /// A message field merged into `into`, each of its fields handed to `field` one
    /// level deeper; `depth` is what is left of the recursion limit at this level.
    fn message<T>(
        &mut self,
        wire: u8,
        depth: u32,
        into: &mut T,
        mut field: impl FnMut(&mut T, u32, u8, &mut Reader<'a>, u32) -> Decoded<()>,
    ) -> Decoded<()> {
        expect(wire, DELIMITED)?;
        if depth == 0 {
            return Err(Malformed);
        }
        let mut inner = Reader(self.bytes(wire)?);
        while !inner.0.is_empty() {
            let (tag, wire) = inner.key()?;
            field(into, tag, wire, &mut inner, depth - 1)?;
        }
        Ok(())
    }

    /// Skips an unknown field (a group up to its matching end).
    fn skip(&mut self, wire: u8, tag: u32, depth: u32) -> Decoded<()> {
        if depth == 0 {
            return Err(Malformed);
        }
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8).map(drop),
            FIXED32 => self.take(4).map(drop),
            DELIMITED => self.bytes(wire).map(drop),
            START_GROUP => loop {
                let (inner_tag, inner_wire) = self.key()?;
                if inner_wire == END_GROUP {
                    return if inner_tag == tag {
                        Ok(())
                    } else {
                        Err(Malformed)
                    };
                }
                self.skip(inner_wire, inner_tag, depth - 1)?;
            },
            _ => Err(Malformed),
        }
    }
}

/// A known field must come with its own wire type.
fn expect(wire: u8, wanted: u8) -> Decoded<()> {
    if wire == wanted {
        Ok(())
    } else {
        Err(Malformed)
    }
}

#[cfg(test)]
mod tests;
