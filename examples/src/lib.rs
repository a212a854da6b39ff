//! Examples live in examples/*.rs.
