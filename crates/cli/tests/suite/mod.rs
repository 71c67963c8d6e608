//! The end-to-end suite, one module per topic.

pub mod harness;

mod agent;
mod approval;
mod approval_attacks;
mod attacks_files;
mod attacks_network;
mod attacks_processes;
#[cfg(target_arch = "x86_64")]
mod attacks_syscalls;
mod bounded;
mod browser;
mod config;
mod dashboard;
mod dashboard_browser;
mod engines;
mod engines_persistent;
mod exec_records;
mod faults;
mod filesystem;
mod first_hour;
mod gvisor;
mod gvisor_persistent;
mod https_inspection;
mod https_servers;
mod image_runs;
mod images;
mod learning;
mod ledger;
mod lifecycle;
mod limits;
mod live;
mod logs;
mod mcp;
mod mediated_network;
mod mounts;
mod network_denials;
mod options;
mod persistent;
mod posture;
mod profiles;
mod records;
mod red_learning;
mod replay;
mod risk;
mod shell;
mod soak;
