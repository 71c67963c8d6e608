//! What can stop the mediator, one variant per step, each naming it.

use std::io;

/// A failure of the network mediator. Any of them ends the sandbox's only way out:
/// nothing passes without the mediator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create the network mediator's event poller: {0}")]
    Poller(io::Error),
    #[error("cannot create the network mediator's waker: {0}")]
    Waker(io::Error),
    #[error("cannot watch the sandbox's TUN interface for packets: {0}")]
    WatchTun(io::Error),
    #[error("cannot bind the sandbox's DNS server on the gateway (DNS socket: {0})")]
    DnsSocket(smoltcp::socket::udp::BindError),
    #[error("cannot start the network mediator's thread: {0}")]
    Thread(io::Error),
    #[error("the network mediator cannot wait for network events: {0}")]
    Wait(io::Error),
    #[error("cannot read a packet from the sandbox's TUN interface: {0}")]
    ReadTun(io::Error),
    #[error("the network mediator panicked")]
    Panicked,
}
