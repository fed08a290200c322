//! Collection: removing the blobs and packs no kept turn needs, rewriting packs that are
//! mostly unneeded, and dropping the oldest turns while the store is over its size cap (see
//! `docs/formats.md`, "Collection").

use std::collections::{BTreeMap, BTreeSet};

use crate::blob::Listing;
use crate::error::UndoError;
use crate::format::LogLine;
use crate::log::LogState;
use crate::pack::{Pack, pack_path};
use crate::report::{Notice, TurnId};

use super::UndoStore;

impl UndoStore {
    /// Removes the blobs `state` does not need; returns what remains.
    pub(super) fn collect(&self, state: &LogState) -> Result<Listing, UndoError> {
        self.inner
            .blobs
            .collect(|| state.hashes().ok(), &state.packs())
            .map_err(|err| UndoError::io("collect unused blobs in", self.inner.blobs.dir(), err))
    }

    /// Collects after turns left the log (`earlier` is what the turns named before), and
    /// rewrites each pack a turn that left named whose live copies now take less than half
    /// of it (see [`Pack::rewrite`]: crash-safe, under the same name, so no record changes).
    /// Returns what remains.
    pub(super) fn collect_after(
        &self,
        state: &LogState,
        earlier: &[(TurnId, Vec<String>)],
    ) -> Result<Listing, UndoError> {
        let listing = self.collect(state)?;
        let named = state.packs();
        let candidates: BTreeSet<&String> = (earlier.iter())
            .filter(|(id, _)| !state.contains(*id))
            .flat_map(|(_, packs)| packs)
            .filter(|name| named.contains(*name))
            .collect();
        if candidates.is_empty() {
            return Ok(listing);
        }
        // A turn whose paths cannot be read may need any copy: no pack is rewritten.
        let Ok(live) = state.hashes() else {
            return Ok(listing);
        };
        let dir = self.inner.blobs.dir();
        let mut rewrote = false;
        for name in candidates {
            // A pack that cannot be read is left as it is: its turns report it on restore.
            let Ok(pack) = Pack::open(&pack_path(dir, name)) else {
                continue;
            };
            if pack.worth_rewriting(|hash| live.contains(hash)) {
                pack.rewrite(|hash| live.contains(hash))
                    .map_err(|err| UndoError::io("rewrite a pack in", dir, err))?;
                rewrote = true;
            }
        }
        if !rewrote {
            return Ok(listing);
        }
        (self.inner.blobs.list()).map_err(|err| UndoError::io("list", dir, err))
    }

    /// Drops the oldest turns while what the kept ones need (`listing`, after collection)
    /// is over the size cap.
    pub(super) fn enforce_cap(
        &self,
        state: &mut LogState,
        listing: &Listing,
    ) -> Result<(), UndoError> {
        let cap = self.inner.options.max_store_bytes;
        // What the kept turns need is at most what the store holds: when that is under the
        // cap, the turns' needs are not counted (which goes through every path of each).
        if listing.bytes() <= cap {
            return Ok(());
        }
        let blobs = &self.inner.blobs;
        // The packs the dropped turns named, opened: one that a kept turn still names (for a
        // copy it found stored there) counts as collection leaves it, rewritten with the
        // copies still needed when they take less than half of it. Counted whole, it would
        // drop more turns than the cap asks: a turn finds its pre-images in the pack of the
        // turn before it (what that one left), so every turn but the newest.
        let mut weighed: BTreeMap<String, Pack> = BTreeMap::new();
        // What the kept turns need, with the bases of their deltas.
        // `None` when a turn's paths cannot be read, and so what it needs is not known.
        let used = |state: &LogState, weighed: &BTreeMap<String, Pack>| -> Option<u64> {
            let live = state.hashes().ok()?;
            let (reweighed, whole): (BTreeSet<String>, BTreeSet<String>) =
                (state.packs().into_iter()).partition(|name| weighed.contains_key(name));
            let reweighed: u64 = (reweighed.iter())
                .filter_map(|name| weighed.get(name))
                .map(|pack| pack.collected_size(|hash| live.contains(hash)))
                .sum();
            Some(blobs.size_of(&live, &whole, listing) + reweighed)
        };
        // Turns are dropped for size only while what the others need is known.
        let Some(mut total) = used(state, &weighed) else {
            return Ok(());
        };
        let mut dropped = Vec::new();
        let earlier = named_packs(state);
        while total > cap && state.undo.len() > 1 {
            let turn = state.undo.remove(0);
            for name in turn.packs.iter().cloned() {
                if !weighed.contains_key(&name)
                    && let Ok(pack) = Pack::open(&pack_path(blobs.dir(), &name))
                {
                    weighed.insert(name, pack);
                }
            }
            dropped.push(turn.meta.id);
            match used(state, &weighed) {
                Some(now) => total = now,
                None => break,
            }
        }
        if !dropped.is_empty() {
            self.append(
                state,
                LogLine::Drop {
                    ids: dropped.clone(),
                },
            )?;
            self.collect_after(state, &earlier)?;
            self.notify(Notice::DroppedForSize {
                dropped,
                store_bytes: total,
                cap,
            });
        }
        Ok(())
    }
}

/// The packs each kept turn of `state` names.
pub(super) fn named_packs(state: &LogState) -> Vec<(TurnId, Vec<String>)> {
    (state.undo.iter())
        .chain(&state.redo)
        .map(|turn| (turn.meta.id, turn.packs.clone()))
        .collect()
}
