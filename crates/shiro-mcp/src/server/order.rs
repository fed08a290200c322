//! The order calls run in: the order the server received them, whichever task runs each.
//!
//! rmcp runs each request in a task of its own, so calls a client sends one after another
//! without waiting for their results (pipelining) would otherwise start in whatever order the
//! runtime schedules their tasks. So each `tools/call` is given a [`Ticket`] where it is
//! received, in order: over stdio by [`InOrder`], the transport, as it reads the call; over
//! HTTP by the listener, as it reads the request's body ([`super::listen`]). The handler
//! waits for the ticket's turn ([`Claim::turn`]) before it runs the call:
//! - a call that may change anything (a tool that changes files, `bash`, `begin_turn`,
//!   `end_turn`, `undo`, `redo`, `log`, and `bash_output` and `bash_kill`, whose results
//!   depend on the calls of theirs before) starts once every call received before it has
//!   ended, and every call received after it waits for it;
//! - a call that only reads files starts once every changing call received before it has
//!   ended, alongside the reads received next to it, which cannot tell each other apart.
//!
//! So each call sees what every call received before it did, and nothing of a later one:
//! the results are those of running the calls one at a time, in the order received.
//!
//! A ticket whose request never reaches the handler (rmcp refused it, its session had ended)
//! ends when the request is dropped, so that it holds up no later call.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use shiro_tools::Tool;
use tokio::sync::watch;

/// Tools that change no file, but whose calls do not commute: `bash_output` returns what a
/// command printed since the last read of it, and `bash_kill` stops the command. They run in
/// order as changing calls do.
const IN_ORDER_THOUGH_READ_ONLY: [&str; 2] = ["bash_output", "bash_kill"];

/// Whether a call may run alongside others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// It only reads files: it may run alongside the reads received next to it.
    Reads,
    /// It may change something: it runs alone.
    Changes,
}

/// The calls received and not ended yet, which the later ones wait for. One for the server,
/// shared by every client.
#[derive(Debug)]
pub struct Arrivals {
    /// The tools whose calls only read files.
    reads: HashSet<&'static str>,
    queue: Mutex<Queue>,
    /// Changes each time a call ends.
    ended: watch::Sender<()>,
}

#[derive(Debug, Default)]
struct Queue {
    /// The number of the next ticket.
    next: u64,
    /// The calls received and not ended yet, by number.
    open: BTreeMap<u64, Kind>,
}

impl Arrivals {
    /// The order of the calls of `tools` (and of the server's own tools, which all run in
    /// order).
    pub fn new(tools: &[Box<dyn Tool>]) -> Self {
        let reads = tools
            .iter()
            .filter(|tool| !tool.is_mutating() && !IN_ORDER_THOUGH_READ_ONLY.contains(&tool.name()))
            .map(|tool| tool.name())
            .collect();
        Self {
            reads,
            queue: Mutex::new(Queue::default()),
            ended: watch::Sender::new(()),
        }
    }

    /// The ticket of a call of `tool` received now: after every ticket given before it.
    pub fn arrived(self: &Arc<Self>, tool: &str) -> Ticket {
        let kind = if self.reads.contains(tool) {
            Kind::Reads
        } else {
            Kind::Changes
        };
        let mut queue = self.queue();
        let number = queue.next;
        queue.next += 1;
        queue.open.insert(number, kind);
        Ticket(Arc::new(Place {
            arrivals: Arc::clone(self),
            number,
        }))
    }

    /// Whether call `number` may start: every call received before it has ended, or, for
    /// a read, every one that is not a read.
    fn may_start(&self, number: u64) -> bool {
        let queue = self.queue();
        let mut before = queue.open.range(..number).map(|(_, kind)| *kind);
        match queue.open.get(&number) {
            Some(Kind::Reads) => before.all(|kind| kind == Kind::Reads),
            Some(Kind::Changes) => before.next().is_none(),
            // Ended already: nothing to wait for.
            None => true,
        }
    }

    /// Ends call `number` (again: nothing), and lets the calls that wait for it check.
    fn end(&self, number: u64) {
        let ended = self.queue().open.remove(&number).is_some();
        if ended {
            self.ended.send_replace(());
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while the lock is held; were it poisoned, the queue is still whole.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A call's place in the order, carried with its request from where it was received to the
/// handler, which claims it. Dropped unclaimed (the request never reached the handler), it
/// ends, and holds up no later call.
#[derive(Debug, Clone)]
pub struct Ticket(Arc<Place>);

#[derive(Debug)]
struct Place {
    arrivals: Arc<Arrivals>,
    number: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.arrivals.end(self.number);
    }
}

impl Ticket {
    /// The handler's hold on the ticket: the call ends when the claim is dropped, whatever
    /// else still holds a copy of the ticket.
    pub fn claim(self) -> Claim {
        Claim(self.0)
    }
}

/// A claimed [`Ticket`]: the call, from its wait for its turn to its end.
#[derive(Debug)]
pub struct Claim(Arc<Place>);

impl Claim {
    /// Waits until the call may start (see the module's documentation).
    pub async fn turn(&self) {
        let Place { arrivals, number } = &*self.0;
        // Subscribed before the check, so that no end between the two goes unseen.
        let mut ended = arrivals.ended.subscribe();
        while !arrivals.may_start(*number) {
            if ended.changed().await.is_err() {
                // The sender lives in `arrivals`, which this claim holds: this cannot be.
                return;
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.0.arrivals.end(self.0.number);
    }
}

/// A server's transport that gives each call its [`Ticket`] as it receives it, in the
/// request's extensions, where the handler finds it.
pub struct InOrder<T> {
    inner: T,
    arrivals: Arc<Arrivals>,
}

impl<T> InOrder<T> {
    /// `inner`, whose calls take their places in `arrivals`.
    pub fn new(inner: T, arrivals: Arc<Arrivals>) -> Self {
        Self { inner, arrivals }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for InOrder<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        // rmcp drops a receive under way when another event comes first; nothing is awaited
        // once the inner transport has a message, so none is lost or left without a ticket.
        let mut message = self.inner.receive().await?;
        if let JsonRpcMessage::Request(request) = &mut message
            && let ClientRequest::CallToolRequest(call) = &mut request.request
        {
            let ticket = self.arrivals.arrived(&call.params.name);
            call.extensions.insert(ticket);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arrivals whose reads are `read_file` and `grep`.
    fn arrivals() -> Arc<Arrivals> {
        let tools: Vec<Box<dyn Tool>> = shiro_tools::tools::all()
            .into_iter()
            .filter(|tool| ["read_file", "grep", "write_file"].contains(&tool.name()))
            .collect();
        Arc::new(Arrivals::new(&tools))
    }

    /// Which of the calls numbered `numbers` may start, as a string of `y` and `n`.
    fn startable(arrivals: &Arrivals, numbers: &[u64]) -> String {
        numbers
            .iter()
            .map(|number| {
                if arrivals.may_start(*number) {
                    'y'
                } else {
                    'n'
                }
            })
            .collect()
    }

    #[test]
    fn a_change_waits_for_every_call_before_and_a_read_for_the_changes_before() {
        let arrivals = arrivals();
        let tools = [
            "read_file",
            "grep",
            "write_file",
            "read_file",
            "undo",
            "bash_output",
        ];
        let mut calls: Vec<Option<Claim>> = tools
            .iter()
            .map(|tool| Some(arrivals.arrived(tool).claim()))
            .collect();
        let numbers: Vec<u64> = calls.iter().flatten().map(|claim| claim.0.number).collect();
        let mut end = |index: usize| drop(calls[index].take());
        assert_eq!(startable(&arrivals, &numbers), "yynnnn");
        end(0);
        assert_eq!(startable(&arrivals, &numbers), "yynnnn");
        end(1);
        assert_eq!(startable(&arrivals, &numbers), "yyynnn");
        end(2);
        // The read after the write starts; the undo waits for it, and bash_output, which
        // changes no file, for the undo.
        assert_eq!(startable(&arrivals, &numbers), "yyyynn");
        end(3);
        assert_eq!(startable(&arrivals, &numbers), "yyyyyn");
        end(4);
        assert_eq!(startable(&arrivals, &numbers), "yyyyyy");
    }

    #[test]
    fn a_ticket_dropped_unclaimed_holds_up_nothing() {
        let arrivals = arrivals();
        let first = arrivals.arrived("write_file");
        let copy = first.clone();
        let second = arrivals.arrived("write_file");
        drop(first);
        assert_eq!(startable(&arrivals, &[second.0.number]), "n");
        drop(copy);
        assert_eq!(startable(&arrivals, &[second.0.number]), "y");
    }

    #[test]
    fn a_claim_ends_its_call_though_a_copy_of_the_ticket_lives_on() {
        let arrivals = arrivals();
        let first = arrivals.arrived("write_file");
        let _copy = first.clone();
        let second = arrivals.arrived("write_file");
        assert_eq!(startable(&arrivals, &[second.0.number]), "n");
        drop(first.claim());
        assert_eq!(startable(&arrivals, &[second.0.number]), "y");
    }

    #[tokio::test]
    async fn a_turn_comes_when_the_calls_before_end() {
        let arrivals = arrivals();
        let first = arrivals.arrived("write_file").claim();
        let second = arrivals.arrived("read_file").claim();
        first.turn().await;
        let waiting = second.turn();
        tokio::pin!(waiting);
        let started = tokio::select! {
            biased;
            () = &mut waiting => true,
            () = std::future::ready(()) => false,
        };
        assert!(!started);
        drop(first);
        waiting.await;
    }
}
