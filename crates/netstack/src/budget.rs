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
