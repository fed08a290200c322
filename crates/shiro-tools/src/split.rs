//! Work split between threads, where the system gives them.

use std::thread;

/// Runs `work` on `items` in parts of `chunk` items (each with the index of its first
/// item): the first part on this thread, each other on a thread of its own, and returns
/// the parts' results in order. A part whose thread the system refuses runs on this thread,
/// after the first; one whose thread panics gives what `lost` gives for it. Never panics
/// for want of a thread.
pub fn on_threads<T: Sync, R: Send>(
    items: &[T],
    chunk: usize,
    work: impl Fn(usize, &[T]) -> R + Sync,
    lost: impl Fn(usize, &[T]) -> R,
) -> Vec<R> {
    let chunk = chunk.max(1);
    let work = &work;
    let mut parts = items
        .chunks(chunk)
        .enumerate()
        .map(|(n, part)| (n * chunk, part));
    let Some((_, first)) = parts.next() else {
        return Vec::new();
    };
    thread::scope(|scope| {
        let others: Vec<_> = parts
            .map(|(at, part)| {
                let worker = thread::Builder::new().spawn_scoped(scope, move || work(at, part));
                (at, part, worker)
            })
            .collect();
        let mut results = Vec::with_capacity(others.len() + 1);
        results.push(work(0, first));
        for (at, part, worker) in others {
            results.push(match worker {
                Ok(worker) => worker.join().unwrap_or_else(|_| lost(at, part)),
                Err(_) => work(at, part),
            });
        }
        results
    })
}

#[cfg(test)]
mod tests {
    use super::on_threads;

    /// Every item is worked on once, in parts of the size asked, with the index of each
    /// part's first item, and the results come back in the parts' order.
    #[test]
    fn every_part_is_worked_once_in_order() {
        let items: Vec<u32> = (0..10).collect();
        let results = on_threads(
            &items,
            3,
            |at, part| (at, part.to_vec()),
            |_, _| unreachable!("no thread panics"),
        );
        assert_eq!(
            results,
            [
                (0, vec![0, 1, 2]),
                (3, vec![3, 4, 5]),
                (6, vec![6, 7, 8]),
                (9, vec![9]),
            ]
        );
        assert!(on_threads(&[] as &[u32], 3, |_, _| 1, |_, _| 2).is_empty());
        // A chunk of nothing is taken as one item a part.
        assert_eq!(on_threads(&[5, 6], 0, |at, _| at, |_, _| 99), [0, 1]);
    }

    /// A part whose thread panics gives what `lost` makes of it; the others are kept.
    #[test]
    fn a_panicking_part_gives_what_lost_makes_of_it() {
        let items = [1, 2, 3, 4];
        let results = on_threads(
            &items,
            1,
            |at, part| {
                assert_ne!(at, 2, "part 2 fails");
                Ok(part[0])
            },
            |at, part| Err(format!("part {at} of {part:?} was lost")),
        );
        assert_eq!(
            results,
            [
                Ok(1),
                Ok(2),
                Err("part 2 of [3] was lost".to_owned()),
                Ok(4)
            ]
        );
    }
}
