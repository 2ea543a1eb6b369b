//! Wake-ups for `collect` watch sessions (`PROTOCOL.md` §7): one
//! [`tokio::sync::Notify`] per watched `rkid`, signalled by the server's
//! submit path after an `admitted` verdict (admission only ever happens
//! there, so the engine needs no hook). Entries exist only while a watch
//! session holds them.

use rltp_proofs::multikey::Rkid;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;

/// The registry of watched queues.
#[derive(Debug, Default)]
pub(crate) struct Watchers(Mutex<HashMap<Rkid, Arc<Notify>>>);

/// A watch session's subscription; dropping the last one for an `rkid`
/// removes its entry.
pub(crate) struct Subscription {
    watchers: Arc<Watchers>,
    rkid: Rkid,
    notify: Arc<Notify>,
}

impl Watchers {
    /// Subscribes to admissions into the queue of `rkid`.
    pub(crate) fn subscribe(self: &Arc<Self>, rkid: Rkid) -> Subscription {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let notify = Arc::clone(map.entry(rkid).or_default());
        Subscription {
            watchers: Arc::clone(self),
            rkid,
            notify,
        }
    }

    /// Wakes every watch session of `rkid` (after a durable admission).
    pub(crate) fn admitted(&self, rkid: &Rkid) {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(notify) = map.get(rkid) {
            notify.notify_waiters();
        }
    }

    /// Wakes every watch session (another node's admissions may have been
    /// missed: the database listener came back after a gap).
    pub(crate) fn admitted_any(&self) {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for notify in map.values() {
            notify.notify_waiters();
        }
    }

    /// Watched queues (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Slots allocated (for tests).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .capacity()
    }
}

impl Subscription {
    /// The notifier: create `notified()` and `enable()` it **before**
    /// reading the queue, so an admission in between is not missed.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = self
            .watchers
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The map's clone plus ours: we are the last subscriber.
        if Arc::strong_count(&self.notify) <= 2 {
            map.remove(&self.rkid);
            // Keyed by what recipients watch: memory follows the sessions.
            rltp_storage::challenges::release_capacity(&mut map);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn admission_wakes_subscribers_and_entries_do_not_leak() {
        let watchers = Arc::new(Watchers::default());
        let rkid = Rkid::from_bytes([1u8; 32]);
        let a = watchers.subscribe(rkid);
        let b = watchers.subscribe(rkid);
        assert_eq!(watchers.len(), 1);
        {
            let notified = a.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            watchers.admitted(&Rkid::from_bytes([2u8; 32]));
            watchers.admitted(&rkid);
            tokio::time::timeout(std::time::Duration::from_secs(1), notified)
                .await
                .unwrap();
        }
        drop(a);
        assert_eq!(watchers.len(), 1);
        drop(b);
        assert_eq!(watchers.len(), 0);
    }

    #[test]
    fn the_registry_gives_its_memory_back_when_sessions_end() {
        let watchers = Arc::new(Watchers::default());
        let sessions: Vec<Subscription> = (0..50_000u32)
            .map(|n| {
                let mut bytes = [0u8; 32];
                bytes[..4].copy_from_slice(&n.to_be_bytes());
                watchers.subscribe(Rkid::from_bytes(bytes))
            })
            .collect();
        assert!(watchers.capacity() >= 50_000);
        drop(sessions);
        assert_eq!(watchers.len(), 0);
        assert!(watchers.capacity() <= 2048, "{}", watchers.capacity());
    }
}
