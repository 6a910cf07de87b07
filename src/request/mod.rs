//! The request as the limiter sees it, and what the rules make of it.
//!
//! - [`descriptor`]: the [`RequestView`](descriptor::RequestView) trait the host
//!   implements, and from a request to the rules that apply, their descriptor values and
//!   their costs, refusing input that would let a client dodge a limit;
//! - [`header_map`]: the request's headers as the host hands them over all at once, so
//!   that a header sent twice is seen as such.

pub mod descriptor;
pub mod header_map;
