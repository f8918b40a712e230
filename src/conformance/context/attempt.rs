//! What a call of a check is ([`Attempt`]), what it handed back ([`Made`]),
//! and the one policy that decides whether a failed call is made again
//! alone ([`Failed::again`]).
//!
//! Every call a check makes through [`route`](super::route) gets a
//! [`CallId`] as it is let in: its place among the calls the run started.
//! A call made again is an attempt of its own, linked to the one it makes
//! again by that id ([`Nth::Again`]); the check's ledger keeps, excuses and
//! finds calls by id. A step's words (`"create"`, `"create, made again
//! alone"`) are only what a report shows ([`Again::shown`]).

use std::ops::Deref;

use super::Expect;
use super::route::Caller;
use crate::plugin::PluginCall;

/// A call's id in its run: how many calls of the run had started before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct CallId(pub(super) usize);

/// Why a call is made again, alone in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Again {
    /// It failed beside other calls (or as a bystander's call): made again
    /// alone, it tells a race in the plugin from a failure that stands (see
    /// [`repeat`](super::repeat)).
    Alone,
    /// It ran out of time under the run's load (see [`alone`](super::alone)).
    AfterTimeout,
    /// A delete that failed while a process that is not the plugin's held a
    /// device of the check's volumes, made again once it let go (see
    /// [`held`](super::held)).
    LetGo,
}

impl Again {
    /// The words a report shows for the call of `step` made again so.
    pub(super) fn shown(self, step: &str) -> String {
        match self {
            Again::Alone => format!("{step}, made again alone"),
            Again::AfterTimeout => format!("{step}, re-run alone after a timeout"),
            Again::LetGo => format!("{step}, made again once its device was let go"),
        }
    }
}

/// Which attempt of a call a call is, before it is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nth {
    /// The check's own call.
    First,
    /// The call `of` made again, for the reason given.
    Again(Again, CallId),
}

/// One call as made: its id, and which attempt of a call it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attempt {
    pub id: CallId,
    pub nth: Nth,
}

impl Attempt {
    /// The first attempt of the call this one is (itself, when it is one).
    pub(super) fn first(&self) -> CallId {
        match self.nth {
            Nth::First => self.id,
            Nth::Again(_, of) => of,
        }
    }
}

/// A call a check made: the plugin's answer ([`PluginCall`], which it
/// derefs to) and the attempt that gave it, by which the check's ledger
/// knows it (see [`Steps::need`](super::Steps::need)).
#[derive(Debug)]
pub(crate) struct Made<T> {
    call: PluginCall<T>,
    attempt: Attempt,
}

impl<T> Made<T> {
    pub(super) fn new(call: PluginCall<T>, attempt: Attempt) -> Made<T> {
        Made { call, attempt }
    }

    /// The plugin's answer.
    pub fn into_call(self) -> PluginCall<T> {
        self.call
    }

    /// The attempt that gave it.
    pub fn attempt(&self) -> Attempt {
        self.attempt
    }
}

impl<T> Deref for Made<T> {
    type Target = PluginCall<T>;

    fn deref(&self) -> &PluginCall<T> {
        &self.call
    }
}

/// How a call ended, as the policy tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// It succeeded.
    Succeeded,
    /// It failed by its exit (or, the manager's, by its error).
    Failed,
    /// It exited 0 with an answer Nomad cannot read: no company explains it.
    Unreadable,
    /// It ran out of its limit (a fingerprint: or took longer than it).
    Overran,
}

impl End {
    /// How `call` ended.
    pub(super) fn of<T>(call: &PluginCall<T>) -> End {
        match () {
            _ if call.timed_out() => End::Overran,
            _ if call.result.is_ok() => End::Succeeded,
            _ if call.exited_zero() => End::Unreadable,
            _ => End::Failed,
        }
    }
}

/// Whose call it is, for the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum By {
    /// A call of a [`Route`](super::route::Route).
    Route(Caller),
    /// A create the manager made on the check's behalf (see
    /// [`Managed::create`](super::Managed::create)).
    Manager,
}

/// When the policy is asked about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum When {
    /// As it ends, before the check sees it.
    Ended,
    /// When the check needs its value ([`Steps::need`](super::Steps::need)).
    Needed,
    /// When the check is settled and the call did not do what was expected.
    Settled,
    /// When a check that compares or diagnoses calls (the `_unloaded`
    /// calls of [`alone`](super::alone) and [`Variant`](super::Variant))
    /// looks at one.
    Judged,
}

/// What the policy knows of a call that ended: everything that decides
/// whether it is made again alone, named.
#[derive(Debug, Clone, Copy)]
pub(super) struct Failed {
    pub by: By,
    /// Which attempt it is.
    pub nth: Nth,
    /// How it ended.
    pub end: End,
    /// What the check expected of it.
    pub expect: Expect,
    /// It started as soon as it was let in (not alone, not in a raced burst).
    pub at_once: bool,
    /// Another call of the run was under way at some moment of it.
    pub company: bool,
    /// The check's question allows a call made again alone to answer it:
    /// not a concurrency check's, whose question is the company itself
    /// ([`Asker::repeats`](super::Asker::repeats)).
    pub repeats: bool,
    /// The check's question is about another operation than the call's
    /// (a clean-up delete in an input check, say).
    pub bystander: bool,
    /// Not a delete of a volume the check did not make (true for the other
    /// operations).
    pub own_volume: bool,
    /// It was made again alone already.
    pub repeated: bool,
}

impl Failed {
    /// A call of `by`, the attempt `nth`, that ended as `end`; every other
    /// condition as it is for a call that is never made again (set the ones
    /// that matter with `..Failed::new(..)`).
    pub(super) fn new(by: By, nth: Nth, end: End) -> Failed {
        Failed {
            by,
            nth,
            end,
            expect: Expect::Either,
            at_once: false,
            company: false,
            repeats: false,
            bystander: false,
            own_volume: true,
            repeated: false,
        }
    }

    /// Whether the call is made again, alone in the run, and why: the one
    /// policy of the calls of a check.
    ///
    /// - As it ends ([`When::Ended`]): a call of Nomad's, of a variant's or
    ///   of the manager's, in a check whose question allows it, expected to
    ///   succeed, that failed by its exit beside other calls of the run,
    ///   started as soon as let in, is made again alone ([`Again::Alone`]).
    ///   Never one that ran out of time (the deadline checks own that), one
    ///   that exited 0 with an answer Nomad cannot read (no company explains
    ///   it; the manager knows a failure only by its error), a call on a host
    ///   that refuses a step, a crasher's, a delete of a volume the check did
    ///   not make, or a call made again itself.
    /// - When the check needs it or is settled: a bystander's call of
    ///   Nomad's whose request was kept ([`keeps_request`](Self::keeps_request)),
    ///   even one that failed alone, not made again
    ///   already; when needed, only the check's own call (the first
    ///   attempt), when settled, any but one made again alone
    ///   ([`Again::Alone`]).
    /// - When a check that compares or diagnoses looks at a call: one that
    ///   ran out of time is re-run alone ([`Again::AfterTimeout`]).
    pub(super) fn again(&self, when: When) -> Option<Again> {
        let failed_by_exit = self.end == End::Failed;
        let not_a_repeat_alone = !matches!(self.nth, Nth::Again(Again::Alone, _));
        let yes = match when {
            When::Ended => {
                let callers = match self.by {
                    By::Route(caller) => matches!(caller, Caller::Nomad | Caller::Variant),
                    By::Manager => true,
                };
                let failed = match self.by {
                    By::Route(_) => failed_by_exit,
                    By::Manager => matches!(self.end, End::Failed | End::Unreadable),
                };
                callers
                    && self.repeats
                    && self.expect == Expect::Success
                    && failed
                    && self.at_once
                    && self.company
                    && self.own_volume
                    && self.nth == Nth::First
            }
            When::Needed | When::Settled => {
                let kept = Failed::keeps_request(self.by, self.end);
                let attempt = match when {
                    When::Needed => self.nth == Nth::First,
                    _ => not_a_repeat_alone,
                };
                kept && self.bystander && attempt && !self.repeated
            }
            When::Judged => {
                return (self.end == End::Overran).then_some(Again::AfterTimeout);
            }
        };
        yes.then_some(Again::Alone)
    }

    /// Whether a failed call's request is kept, to be made again alone
    /// when the check needs it or is settled: Nomad's, failed by its exit
    /// (one that timed out would cost its whole limit again).
    pub(super) fn keeps_request(by: By, end: End) -> bool {
        by == By::Route(Caller::Nomad) && matches!(end, End::Failed | End::Unreadable)
    }
}
