//! Write-behind: a FUSE WRITE is answered as soon as its SMB WRITE is sent, so one
//! application's `write(2)`s keep many requests in flight on all channels instead of waiting a
//! round trip each.
//!
//! The rules that keep this honest:
//! - Memory is bounded: every write in flight holds permits for its bytes from one budget
//!   shared by the whole mount; a writer waits when it is spent.
//! - Writes that overlap a write still in flight wait for it, so two writes to the same bytes
//!   reach the server in the application's order even when they go over different channels.
//! - The first failure is kept and returned by the next write, flush (every `close(2)`) or
//!   fsync of that handle; close and fsync return only once every write was answered, so
//!   an application that checks them never believes unacknowledged data is on the server.
//! - Anything that reads the file or its size (READ, GETATTR, SETATTR) first waits for the
//!   writes in flight on that file ([`WriteBehind::drain`]).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use smb3_client::File;
use tokio::sync::{Notify, Semaphore};

use crate::errno::FsError;

/// Permits are KiB, so a budget of many GiB fits the semaphore's range.
const UNIT: u64 = 1024;

/// The budget shared by every handle of a mount.
#[derive(Debug, Clone)]
pub struct Budget {
    permits: Arc<Semaphore>,
    total: u32,
}

impl Budget {
    /// A budget of `bytes` in flight (at least one 1 MiB write).
    pub fn new(bytes: u64) -> Budget {
        let total = (bytes / UNIT).clamp(1024, u64::from(u32::MAX >> 4)) as u32;
        Budget {
            permits: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Byte ranges `[start, end)` of the writes in flight.
    in_flight: Vec<(u64, u64)>,
    /// The first failure since it was last reported.
    error: Option<FsError>,
}

/// The writes in flight of one handle.
#[derive(Debug, Default)]
pub struct WriteBehind {
    state: Mutex<State>,
    changed: Notify,
}

impl WriteBehind {
    /// Wait until `cond(state)` holds, re-checking after every completed write.
    async fn wait_for(&self, cond: impl Fn(&State) -> bool) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if cond(&self.state.lock().unwrap()) {
                return;
            }
            notified.await;
        }
    }

    /// The kept failure, if any (reported once).
    pub fn take_error(&self) -> Option<FsError> {
        self.state.lock().unwrap().error.take()
    }

    /// Send `data` at `offset` in the background. Returns once it is sent (or an earlier
    /// failure, which is then reported instead).
    pub async fn write(
        self: &Arc<Self>,
        file: &File,
        budget: &Budget,
        offset: u64,
        data: Bytes,
    ) -> Result<(), FsError> {
        if let Some(e) = self.take_error() {
            return Err(e);
        }
        let end = offset + data.len() as u64;
        self.wait_for(|s| !s.in_flight.iter().any(|&(a, b)| a < end && offset < b))
            .await;
        let units = (data.len() as u64)
            .div_ceil(UNIT)
            .clamp(1, u64::from(budget.total)) as u32;
        let permit = budget
            .permits
            .clone()
            .acquire_many_owned(units)
            .await
            .map_err(|_| FsError::new(libc::EIO))?;
        self.state.lock().unwrap().in_flight.push((offset, end));
        let (this, file) = (self.clone(), file.clone());
        tokio::spawn(async move {
            let result = file.write_at(offset, data).await;
            drop(permit);
            let mut s = this.state.lock().unwrap();
            if let Some(i) = s.in_flight.iter().position(|r| *r == (offset, end)) {
                s.in_flight.swap_remove(i);
            }
            if let Err(e) = result {
                tracing::warn!(path = file.path(), offset, error = %e, "write-behind failed");
                s.error.get_or_insert(FsError::from(e));
            }
            drop(s);
            this.changed.notify_waiters();
        });
        Ok(())
    }

    /// Wait for every write in flight to be answered.
    pub async fn drain(&self) {
        self.wait_for(|s| s.in_flight.is_empty()).await;
    }

    /// Wait for every write in flight, then report a failure kept since the last report.
    pub async fn settle(&self) -> Result<(), FsError> {
        self.drain().await;
        match self.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
