//! `flowhost-gateway`: the edge analytics gateway (spec 002, part A) as a domain, without HTTP. So far the
//! origin map ([`origins`]): the runtime's parsed and checked map from an exact browser origin to tenant, site
//! and player-validation target, and the operators' generator that builds it from one normalized input file.

pub mod origins;
