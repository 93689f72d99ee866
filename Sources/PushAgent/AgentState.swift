import PushBackend
import PushState

/// Everything the agent's parts share and change, in one value behind the core's one lock
/// (``AgentCore/state``): the book, and what the start, the leases, the pollers, a round and the
/// status line keep beside it. Changed only under that lock, in small steps that return what to
/// do outside it.
struct AgentState<Instant: InstantProtocol>: ~Copyable {
    /// The agent's decisions about subscriptions.
    var book: AgentBook
    /// What the agent starts with, until ``AgentCore/begin()`` books it.
    var start: AgentStart?
    /// `agent.timeout` of the configuration loaded last: for requests without their own.
    var defaultTimeout: Duration
    /// `agent.metrics.perAccount` of the configuration loaded last: `/metrics` writes each
    /// subscription's series too.
    var metricsPerAccount = false
    /// What polls each service whose accepted subscriptions await confirmation, by service.
    var pollers: [String: PollerState] = [:]
    /// Whether a status query is in flight: stopping waits for it (within the grace period).
    var pollInFlight = false
    /// What `STATUS=` says after the counts (a failed reload, a database away, a stopped service).
    var statusNote: String?
    /// When graceful shutdown began (nil while running): no new request starts from then, and
    /// what is in flight has the grace period from then.
    var stoppingSince: Instant?
    /// Whether the scheduler runs (`/readyz`, the endpoint's webhooks).
    var serving = false
    /// Set at start and by each reload: log "all … reported" once the work is done.
    var announceWhenSettled = true
    /// Set with `announceWhenSettled`: memory is given back once the burst of first attempts is
    /// over, whether or not every subscription got through.
    var releaseWhenAnswered = true
    /// Subscriptions cleaned up and forgotten since the log last said so.
    var forgottenSinceSaid = 0

    // With state shared by several agents (SPEC §11).

    /// Until when this agent may start attempts (its leases renewed in time); nil before the
    /// first renewal and once renewals fail for too long.
    var leasesValidUntil: Instant?
    /// Whether the last round of leases found nothing more to claim.
    var claimedAll = false
    /// Subscriptions the shared state has that this agent's configuration disagrees with
    /// (another agent loaded other files last): not claimed until a reload.
    var disagreed: Set<SubscriptionKey> = []
    /// The configuration's subscriptions, to write to the shared state (a reload's, or one whose
    /// writing failed while the database was away); written by the next round of leases.
    var pendingPublish: [SubscriptionKey]?
    /// In a round: what this agent claimed with something to send (its part of the summary).
    var claimedJobs: Set<SubscriptionKey> = []
    /// Whether the log said that the database does not answer.
    var sharedStateSilent = false

    // In a round (`run --once`, `remove`).

    /// When its deadline passes, so that a failure whose retry would come later says that it was
    /// the last attempt.
    var onceEnd: Instant?
    /// The subscriptions whose next attempt falls after the deadline. Once every job left is one
    /// of them, nothing more can happen before it, and the round ends.
    var outOfTime: Set<SubscriptionKey> = []
    /// Told whenever the book may have settled.
    var progress: AsyncStream<Void>.Continuation?

    /// A poller and when it last asked.
    struct PollerState {
        var poller: any ConfirmationPoller
        var lastPoll: Instant?
    }

    var isStopping: Bool { stoppingSince != nil }
}
