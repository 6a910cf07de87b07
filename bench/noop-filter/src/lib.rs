//! The floor of any wasm filter: read one request header, do nothing with it.
