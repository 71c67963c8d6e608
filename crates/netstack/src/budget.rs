//! The session's budget for the stack's connection buffers. Every open connection
//! holds a receive and a send buffer inside the mediator, which runs in the supervisor,
//! outside the sandbox's memory limit; this bounds their total, so stalled connections
//! cannot grow the supervisor without limit.
//!
//! The first connections get [`FULL`] buffers (fast bulk transfers); once taking
//! another full grant would eat into the reserve for small ones, new connections get
//! [`SMALL`] buffers; when not even those fit, the connection is refused.

/// All buffers of one session's connections together, both ways.
pub(crate) const TOTAL: usize = 32 << 20;
/// Buffer size each way of a connection while the budget has room. Each new
/// connection's buffers are zeroed when allocated (the allocator hands back freed
/// memory, which must be cleared): 1 MiB each way doubled that, a third of the
/// mediator's time on a run of short connections, for no download speed-up that
/// could be told from the noise.
pub(crate) const FULL: usize = 512 << 10;
/// Buffer size each way once the budget is tight: still a working TCP window.
pub(crate) const SMALL: usize = 32 << 10;

/// The receive buffer of the host socket of a connection granted [`FULL`] buffers:
/// fixed, not left to the kernel's autotuning. Why (session 19): the mediator takes
/// a destination's bytes off that socket only once the sandbox acknowledges them (see
/// `bypass`), and in some downloads autotuning never grew the buffer past its initial
/// 128 KiB (`ss -tmi`: `rb131072` for the whole transfer, against 10-33 MB in the
/// others). The destination could then send only as the sandbox acknowledged, and the
/// download fell into a lock-step of a wake-up per packet or two, 2-3 times slower.
/// Fixed, it also bounds what a sandbox that stops acknowledging can make the host's
/// kernel hold for it (the kernel doubles the value for its bookkeeping: 8 MiB per
/// socket, where autotuning may reach `net.ipv4.tcp_rmem`'s maximum).
pub(crate) const HOST_RECEIVE: usize = 4 << 20;
/// The receive buffer of the host socket of a connection granted [`SMALL`] buffers:
/// fixed too, and small. Left to autotuning (as it was), a sandbox that read a few
/// downloads fast, then stopped acknowledging them, made the host's kernel hold up to
/// `net.ipv4.tcp_rmem`'s maximum (32 MiB on some hosts) for each of up to 240 such
/// connections: gigabytes, past the host's own `tcp_mem` pressure mark. Fixed, each
/// holds at most 512 KiB (the kernel doubles it; where `net.core.rmem_max` is smaller,
/// `SO_RCVBUF` is capped to it, and still fixed, so no privilege is needed): 120 MiB
/// for all of them. A connection past the first 16 is slower for it, not stalled.
pub(crate) const SMALL_HOST_RECEIVE: usize = 256 << 10;
/// The send buffer of the host socket of a connection granted [`SMALL`] buffers,
/// fixed for the same reason: left to autotuning, an upload to a destination that
/// stops reading made the host's kernel queue up to `net.ipv4.tcp_wmem`'s maximum
/// (4 MiB by default) for each (red team: 257 MiB for 64 connections). Doubled by the
/// kernel, 128 KiB each: four times the stack's receive ring it drains.
pub(crate) const SMALL_HOST_SEND: usize = 64 << 10;

/// How a connection's host socket gets its receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostReceive {
    /// `SO_RCVBUF` at this size: within the host's `net.core.rmem_max`.
    Fixed(usize),
    /// `SO_RCVBUFFORCE` at this size: the host's `rmem_max` is smaller (Debian's
    /// default is 208 KiB) or unknown, and `SO_RCVBUF` would be capped below what
    /// autotuning reaches. It needs `CAP_NET_ADMIN` on the host (a supervisor run by
    /// root); refused, the socket is left to autotuning, and the slow mode above can
    /// come back.
    Forced(usize),
}

/// The receive buffer to give a connection's host socket, given its grant and the
/// host's `net.core.rmem_max` (the most `SO_RCVBUF` may ask for).
pub(crate) fn host_receive(grant: usize, rmem_max: Option<usize>) -> HostReceive {
    if grant != FULL {
        // Capped to rmem_max where that is smaller, but fixed all the same.
        return HostReceive::Fixed(SMALL_HOST_RECEIVE);
    }
    match rmem_max {
        Some(max) if max >= HOST_RECEIVE => HostReceive::Fixed(HOST_RECEIVE),
        _ => HostReceive::Forced(HOST_RECEIVE),
    }
}

/// Sizes the host socket of a connection the sandbox made, passed through by the
/// mediator or made by the HTTPS inspector, so that what the host's kernel holds for
/// it is bounded whatever the sandbox does (read fast, then stop; send to a
/// destination that does not read): `fast` for one of the session's first 16
/// connections (the mediator's full grants, the inspector's first upstreams), whose
/// receive buffer is 4 MiB ([`host_receive`]; best effort: without it a download is
/// only slower), the rest small and fixed both ways.
pub fn size_host_socket(fd: std::os::fd::BorrowedFd<'_>, fast: bool) {
    let sock = socket2::SockRef::from(&fd);
    let grant = if fast { FULL } else { SMALL };
    match host_receive(grant, rmem_max()) {
        HostReceive::Fixed(size) => {
            let _ = sock.set_recv_buffer_size(size);
        }
        HostReceive::Forced(size) => {
            let _ = vg_sandbox::peek::force_receive_buffer(fd, size);
        }
    }
    if !fast {
        let _ = sock.set_send_buffer_size(SMALL_HOST_SEND);
    }
}

/// The host's `net.core.rmem_max`, if it can be read: read at the first connection
/// that asks, not at every mediator's start, and kept for the process.
pub(crate) fn rmem_max() -> Option<usize> {
    static RMEM_MAX: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *RMEM_MAX.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

#[derive(Debug)]
pub(crate) struct BufferBudget {
    total: usize,
    /// What full grants must leave for small ones.
    reserve: usize,
    used: usize,
}

impl BufferBudget {
    /// `total` bytes, half of it kept for small grants.
    pub fn new(total: usize) -> Self {
        Self {
            total,
            reserve: total / 2,
            used: 0,
        }
    }

    /// The buffer size each way for a new connection, counted until [`Self::release`]
    /// with the same size; `None` when even [`SMALL`] buffers would exceed the budget.
    pub fn grant(&mut self) -> Option<usize> {
        let free = self.total.saturating_sub(self.used);
        let each = if free >= 2 * FULL + self.reserve {
            FULL
        } else if free >= 2 * SMALL {
            SMALL
        } else {
            return None;
        };
        self.used += 2 * each;
        Some(each)
    }

    /// Gives back a grant of `each` bytes each way.
    pub fn release(&mut self, each: usize) {
        self.used = self.used.saturating_sub(2 * each);
    }

    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grant_gets_a_fixed_host_receive_buffer_a_full_one_forced_past_a_small_rmem_max() {
        let big = Some(4 << 20);
        let fixed = HostReceive::Fixed(HOST_RECEIVE);
        let forced = HostReceive::Forced(HOST_RECEIVE);
        assert_eq!(host_receive(FULL, big), fixed);
        assert_eq!(host_receive(FULL, Some(32 << 20)), fixed);
        // Debian's default rmem_max (208 KiB) would cap SO_RCVBUF below autotuning's
        // reach: forced past it (where the supervisor may), as where it is unknown.
        assert_eq!(host_receive(FULL, Some(212_992)), forced);
        assert_eq!(host_receive(FULL, Some((4 << 20) - 1)), forced);
        assert_eq!(host_receive(FULL, None), forced);
        // Small grants are never left to autotuning either (red team: 240 of them
        // autotuned up to tcp_rmem's maximum each).
        let small = HostReceive::Fixed(SMALL_HOST_RECEIVE);
        assert_eq!(host_receive(SMALL, big), small);
        assert_eq!(host_receive(SMALL, Some(212_992)), small);
        assert_eq!(host_receive(SMALL, None), small);
    }

    #[test]
    fn grants_shrink_then_stop_at_the_total() {
        let mut budget = BufferBudget::new(TOTAL);
        let grants: Vec<usize> = std::iter::from_fn(|| budget.grant()).collect();
        // 16 MiB of full grants, then 16 MiB of small ones, then nothing.
        let full = grants.iter().filter(|&&g| g == FULL).count();
        let small = grants.iter().filter(|&&g| g == SMALL).count();
        assert_eq!((full, small), (16, 256), "{grants:?}");
        assert_eq!(grants.len(), full + small, "only the two sizes");
        assert!(grants[..16].iter().all(|&g| g == FULL), "full ones first");
        assert_eq!(budget.used(), TOTAL);
        assert_eq!(budget.grant(), None);
        // The stack's connection limit fits: 256 connections always get buffers.
        assert!(grants.len() >= 256);
        // What is given back is granted again; a freed full grant alone does not
        // lift the reserve, so the next one is small.
        budget.release(SMALL);
        assert_eq!(budget.grant(), Some(SMALL));
        assert_eq!(budget.grant(), None);
        budget.release(FULL);
        assert_eq!(budget.grant(), Some(SMALL));
        assert_eq!(budget.used(), TOTAL - 2 * FULL + 2 * SMALL);
        // Once everything is back, full grants again.
        let mut budget = BufferBudget::new(TOTAL);
        let g = budget.grant().unwrap();
        budget.release(g);
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.grant(), Some(FULL));
    }

    #[test]
    fn a_small_budget_refuses_early_and_never_overshoots() {
        for total in [0, SMALL, 2 * SMALL, 3 * SMALL, 2 * FULL, 4 * FULL, 5 << 20] {
            let mut budget = BufferBudget::new(total);
            let mut sum = 0;
            while let Some(each) = budget.grant() {
                sum += 2 * each;
                assert!(sum <= total, "{total}: {sum}");
            }
            assert_eq!(sum, budget.used());
            assert!(total - sum < 2 * SMALL, "{total}: {sum} left room unused");
        }
    }
}
