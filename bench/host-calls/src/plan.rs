//! The plans: what each request makes the host do, as the plugin configuration names it.

/// What each request does: a kind of host call, and how many times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// No host call.
    None,
    /// `proxy_get_header_map_value` of an absent request header, n times.
    Header(u32),
    /// `proxy_get_header_map_value` of a request header that is there, n times.
    Value(u32),
    /// `proxy_get_property` of a request header that is there, n times.
    Property(u32),
    /// `proxy_get_header_map_pairs` of the request headers, n times.
    Pairs(u32),
    /// `proxy_get_current_time_nanoseconds`, n times.
    Clock(u32),
    /// `proxy_get_shared_data` of an absent key, n times.
    SharedGet(u32),
    /// `proxy_set_shared_data` of 16 bytes, n times.
    SharedSet(u32),
    /// One local reply (429), and the request stops there.
    Reply,
    /// The limit floor, admitted: the header map, the clock, the bucket's read and its
    /// compare-and-swap.
    Limit,
    /// The limit floor, rejected: the same three reads, then floodgate's default reply.
    LimitReject,
}

impl Plan {
    /// The plan a configuration `"<kind> <n>"` names (`None` for anything else, so a
    /// configuration mistake measures nothing rather than something else).
    pub fn parse(text: &[u8]) -> Plan {
        let text = std::str::from_utf8(text).unwrap_or("").trim();
        let mut words = text.split_whitespace();
        let kind = words.next().unwrap_or("none");
        let n = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        match kind {
            "header" => Plan::Header(n),
            "value" => Plan::Value(n),
            "property" => Plan::Property(n),
            "pairs" => Plan::Pairs(n),
            "clock" => Plan::Clock(n),
            "shared-get" => Plan::SharedGet(n),
            "shared-set" => Plan::SharedSet(n),
            "reply" => Plan::Reply,
            "limit" => Plan::Limit,
            "limit-reject" => Plan::LimitReject,
            _ => Plan::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Plan;

    #[test]
    fn configurations_name_a_kind_and_a_count() {
        assert_eq!(Plan::parse(b"pairs 16"), Plan::Pairs(16));
        assert_eq!(Plan::parse(b"value 16"), Plan::Value(16));
        assert_eq!(Plan::parse(b"property 16"), Plan::Property(16));
        assert_eq!(Plan::parse(b" shared-set 4 "), Plan::SharedSet(4));
        assert_eq!(Plan::parse(b"clock"), Plan::Clock(0));
        assert_eq!(Plan::parse(b"reply"), Plan::Reply);
        assert_eq!(Plan::parse(b"limit"), Plan::Limit);
        assert_eq!(Plan::parse(b"limit-reject"), Plan::LimitReject);
        assert_eq!(Plan::parse(b"none 16"), Plan::None);
        assert_eq!(Plan::parse(b"\xff"), Plan::None);
    }
}
