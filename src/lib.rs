//! `dhv-conform`: a conformance harness for Nomad dynamic host volume (DHV) plugins,
//! built on a Nomad-compatible host volume plugin manager.
//!
//! The crate is layered, and the arrows go one way:
//! `cli → conformance → manager → plugin → exec`. [`contract`] and [`version`] hold
//! the facts of Nomad's plugin contract and depend on nothing; [`report`] depends only
//! on its own result model.
#![warn(missing_docs)]

pub mod cli;
pub mod conformance;
pub mod contract;
pub mod exec;
pub mod manager;
pub mod plugin;
pub mod report;
pub mod version;
