//! `--resume`: where an interrupted copy can continue, and which bytes of its partial file
//! must match the source before they are trusted.
//!
//! Every copy writes its chunks within [`crate::window::SPAN`] of the first unfinished one,
//! so all bytes of a partial file below `its size - SPAN` were written; only the tail may
//! have holes. Resuming starts there (rounded down to a chunk), after comparing the SHA-256
//! of the chunk just before that point, or with `--verify` of everything before it, with the
//! same range of the source: a partial file left by another source (or damaged) starts over.

use crate::window::SPAN;

/// What to do with a partial file of `partial_len` bytes for a source of `source_len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Longer than the source: it cannot be a prefix of it.
    Mismatch,
    /// Nothing in it can be trusted without holes: copy from the start.
    FromStart,
    /// Compare `check_len` bytes at `check_from` with the source, then continue at `offset`.
    Continue {
        /// Where copying continues.
        offset: u64,
        /// First byte compared with the source.
        check_from: u64,
        /// Bytes compared.
        check_len: u64,
    },
}

/// The resume plan for a partial file; `full_check` (`--verify`) compares every byte kept.
pub(crate) fn plan(partial_len: u64, source_len: u64, chunk: u32, full_check: bool) -> Plan {
    if partial_len > source_len {
        return Plan::Mismatch;
    }
    let c = u64::from(chunk.max(1));
    let offset = partial_len.saturating_sub(SPAN) / c * c;
    if offset == 0 {
        return Plan::FromStart;
    }
    let check_from = if full_check {
        0
    } else {
        offset - c.min(offset)
    };
    Plan::Continue {
        offset,
        check_from,
        check_len: offset - check_from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        let m = 1024 * 1024;
        assert_eq!(plan(10, 5, m as u32, false), Plan::Mismatch);
        assert_eq!(plan(SPAN, 2 * SPAN, m as u32, false), Plan::FromStart);
        assert_eq!(
            plan(SPAN + 3 * m + 5, 2 * SPAN, m as u32, false),
            Plan::Continue {
                offset: 3 * m,
                check_from: 2 * m,
                check_len: m
            }
        );
        assert_eq!(
            plan(SPAN + 3 * m + 5, 2 * SPAN, m as u32, true),
            Plan::Continue {
                offset: 3 * m,
                check_from: 0,
                check_len: 3 * m
            }
        );
        // A complete partial (killed before the rename) still re-copies its tail.
        assert!(matches!(
            plan(2 * SPAN, 2 * SPAN, m as u32, false),
            Plan::Continue { offset, .. } if offset == SPAN
        ));
    }
}
