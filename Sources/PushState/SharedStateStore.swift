/// A state several agents share (SPEC §11): each subscription is sent by the agent that holds
/// it; an agent renews its leases while it lives, and one that dies leaves its subscriptions to
/// the others once its leases expire.
public protocol SharedStateStore: StateStore {
    /// The agent this store writes for (`host:pid`), as `status` names it.
    var agent: String { get }
    /// Joins the agents; the first alive starts a group (everything is delivered again), unless
    /// `startsGroups` is false.
    func join(leaseTimeout: Duration, startsGroups: Bool) throws(StateError) -> SharedStateMembership
    /// Writes this agent's configuration: its subscriptions added and staying, the others
    /// leaving, or held for the group when `holdingRemovals` says so (SPEC §14).
    @discardableResult
    func publish(_ keys: [SubscriptionKey], holdingRemovals: RemovalsHeld?) throws(StateError) -> PublishedRemovals
    /// Renews this agent's leases, expires dead agents, and claims up to its share.
    func renewAndClaim(leaseTimeout: Duration, maxClaim: Int, excluding: [SubscriptionKey]) throws(StateError)
        -> LeaseRound
    /// Takes `keys` where nobody holds them; returns the agents holding the others.
    func take(_ keys: [SubscriptionKey]) throws(StateError) -> [SubscriptionKey: String]
    /// Gives up the leases of `keys`, or all of this agent's (and leaves the group) when nil.
    func release(_ keys: [SubscriptionKey]?) throws(StateError)
    /// Which agent holds each subscription an agent holds.
    func holders() throws(StateError) -> [SubscriptionKey: String]
}

extension SharedStateStore {
    /// Writes this agent's configuration, with no removal guard.
    @discardableResult
    public func publish(_ keys: [SubscriptionKey]) throws(StateError) -> PublishedRemovals {
        try publish(keys, holdingRemovals: nil)
    }
}

/// The removal guard's rule (SPEC §14), given the accounts leaving and every account in the
/// state: whether their removals are held.
public typealias RemovalsHeld = @Sendable (_ leaving: Int, _ accounts: Int) -> Bool

/// What publishing a configuration did to the removals the guard holds for the group.
public struct PublishedRemovals: Sendable, Equatable {
    public init(newlyHeldAccounts: Int, held: Int) {
        self.newlyHeldAccounts = newlyHeldAccounts
        self.held = held
    }

    /// Accounts whose removals this publication held, and no earlier one (said once in the log).
    public var newlyHeldAccounts: Int
    /// Subscriptions whose removal is held now, in the whole group.
    public var held: Int
}

/// What joining the agents sharing a state told this one.
public struct SharedStateMembership: Sendable, Equatable {
    public init(generation: Int64, startedGroup: Bool, agents: Int) {
        self.generation = generation
        self.startedGroup = startedGroup
        self.agents = agents
    }

    /// The group this agent joined: a new one when no other agent was alive. A subscription
    /// last written in an earlier group is delivered again, as on any start (SPEC §5).
    public var generation: Int64
    /// Whether this agent started the group (no other agent was alive).
    public var startedGroup: Bool
    /// The agents alive now, this one included.
    public var agents: Int
}

/// A subscription an agent claimed, as the shared state had it.
public struct ClaimedSubscription: Sendable {
    public var record: SubscriptionRecord
    /// Whether an agent of the running group wrote it last (else it is delivered again).
    public var writtenThisGroup: Bool
    /// Whether the last configuration loaded dropped it: its cleanup is owed.
    public var leaving: Bool

    public init(record: SubscriptionRecord, writtenThisGroup: Bool, leaving: Bool) {
        self.record = record
        self.writtenThisGroup = writtenThisGroup
        self.leaving = leaving
    }
}

/// What one round of leases found.
public struct LeaseRound: Sendable {
    public init(expelled: Bool, claimed: [ClaimedSubscription], share: Int, agents: Int, wanted: Int, heldRemovals: Int = 0) {
        self.heldRemovals = heldRemovals
        self.expelled = expelled
        self.claimed = claimed
        self.share = share
        self.agents = agents
        self.wanted = wanted
    }

    /// Whether this agent had been found expired: it holds nothing it held before.
    public var expelled: Bool
    /// Those it claimed this round.
    public var claimed: [ClaimedSubscription]
    /// This agent's share: the subscriptions divided by the agents alive, rounded up.
    public var share: Int
    /// The agents alive, this one included.
    public var agents: Int
    /// How many it tried to claim (fewer claimed: none were free).
    public var wanted: Int
    /// Subscriptions whose removal the guard holds for the group (nobody claims them).
    public var heldRemovals: Int
}
