//! The clock that judges Leases and fences: time since the machine booted, suspended
//! time included (Linux `CLOCK_BOOTTIME`, clock_gettime(2)).
//!
//! `std::time::Instant` reads `CLOCK_MONOTONIC`, which stops while the machine (or its
//! VM) is suspended: a replica resumed after a minute would find its last renew "a
//! moment ago" and write under a fence that closed long before, while another replica
//! already holds the shard. Measured on this clock, the minute counts: the fence is
//! closed on resume until a renew lands, and a Lease last seen before the suspend has
//! expired. Elsewhere than Linux and Android, `CLOCK_MONOTONIC`.

use std::{
    ops::{Add, Sub},
    time::Duration,
};

/// A moment on the boot-time clock: [`Instant::now`], compared and offset like
/// `std::time::Instant` (never panics: sums and differences saturate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(Duration);

impl Instant {
    /// Now.
    pub fn now() -> Self {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let id = rustix::time::ClockId::Boottime;
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let id = rustix::time::ClockId::Monotonic;
        let t = rustix::time::clock_gettime(id);
        let secs = u64::try_from(t.tv_sec).unwrap_or(0);
        let nanos = u32::try_from(t.tv_nsec).unwrap_or(0);
        Self(Duration::new(secs, nanos))
    }

    /// The time from `earlier` to `self`; zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// The time since `self`.
    pub fn elapsed(self) -> Duration {
        Self::now().saturating_duration_since(self)
    }

    /// `self` moved back by `d`, unless that is before the clock's start.
    pub fn checked_sub(self, d: Duration) -> Option<Instant> {
        self.0.checked_sub(d).map(Self)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, d: Duration) -> Instant {
        Self(self.0.saturating_add(d))
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    fn sub(self, d: Duration) -> Instant {
        Self(self.0.saturating_sub(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock moves forward with time; offsets and differences agree.
    #[test]
    fn moves_forward_and_offsets_agree() {
        let a = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let b = Instant::now();
        assert!(b.saturating_duration_since(a) >= Duration::from_millis(20));
        assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
        assert_eq!((a + Duration::from_secs(3)).saturating_duration_since(a), Duration::from_secs(3));
        assert_eq!(
            a.checked_sub(Duration::from_secs(1)).map(|e| a.saturating_duration_since(e)),
            Some(Duration::from_secs(1))
        );
        assert!(a.elapsed() >= Duration::from_millis(20));
        // boot time counts suspended time: never behind the monotonic clock's uptime
        let mono = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        assert!(Instant::now().0.as_secs() >= u64::try_from(mono.tv_sec).unwrap_or(0));
    }
}
