import PushBackend
import Synchronization

/// One device group as FCM knows it: the group name within a project, at an endpoint.
struct GroupID: Hashable, Sendable {
    var endpoint: String
    var projectId: String
    var group: String
}

/// An OAuth 2 access token and when it stops being used (Unix milliseconds): a minute before
/// it expires.
struct AccessToken: Sendable {
    var value: String
    var usableUntil: Int64
}

/// What the FCM backend remembers across subscriptions while the process runs (one per
/// backend value, shared by its copies):
///
/// - each group's `notification_key`, learnt from answers and taken back from the state at start;
/// - each group's wanted members, as the configuration planned last: a group re-created after
///   FCM lost it gets them all again, and a cleanup leaves alone a token another account of the
///   group still has (two accounts on one device);
/// - each service account's access token, until a minute before it expires, and the one fetch
///   of a new one that concurrent requests wait for.
final class FCMMemory: Sendable {
    private struct State {
        var keys: [GroupID: String] = [:]
        var wanted: [GroupID: [String]] = [:]
        /// The groups whose wanted members `wanted` knows, by service: replaced whole by each plan.
        var plannedGroups: [String: Set<GroupID>] = [:]
        var tokens: [String: AccessToken] = [:]
        var fetches: [String: Task<TokenFetch, Never>] = [:]
    }

    private let state = Mutex(State())

    // MARK: Keys

    func key(_ group: GroupID) -> String? {
        state.withLock { $0.keys[group] }
    }

    func setKey(_ key: String, for group: GroupID) {
        state.withLock { $0.keys[group] = key }
    }

    func forgetKey(_ group: GroupID) {
        state.withLock { $0.keys[group] = nil }
    }

    /// Takes keys kept in state, without replacing one learnt since.
    func restoreKeys(_ keys: [GroupID: String]) {
        state.withLock { state in state.keys.merge(keys) { learnt, _ in learnt } }
    }

    // MARK: Wanted members

    /// The wanted members of every group of `service`, as its latest plan says; groups of it
    /// that the plan no longer has are forgotten.
    func setWanted(service: String, _ groups: [GroupID: [String]]) {
        state.withLock { state in
            for group in state.plannedGroups[service] ?? [] where groups[group] == nil { state.wanted[group] = nil }
            for (group, tokens) in groups { state.wanted[group] = tokens }
            state.plannedGroups[service] = Set(groups.keys)
        }
    }

    /// The members `group` should have, in account order; empty when no plan named it.
    func wanted(_ group: GroupID) -> [String] {
        state.withLock { $0.wanted[group] ?? [] }
    }

    // MARK: Access tokens

    /// The usable access token of `cacheKey` at `now`, or nil.
    func accessToken(_ cacheKey: String, now: Int64) -> String? {
        state.withLock { state in
            guard let token = state.tokens[cacheKey], token.usableUntil > now else { return nil }
            return token.value
        }
    }

    /// Drops the access token of `cacheKey` if it is still `value` (FCM refused it).
    func forgetAccessToken(_ cacheKey: String, ifItIs value: String) {
        state.withLock { state in
            if state.tokens[cacheKey]?.value == value { state.tokens[cacheKey] = nil }
        }
    }

    /// The result of fetching a token for `cacheKey`: one fetch at a time per key, which every
    /// caller meanwhile waits for; a token it gets is kept.
    func fetchAccessToken(_ cacheKey: String, _ fetch: @escaping @Sendable () async -> TokenFetch) async -> TokenFetch {
        let task = state.withLock { state in
            if let running = state.fetches[cacheKey] { return running }
            let task = Task { await fetch() }
            state.fetches[cacheKey] = task
            return task
        }
        let result = await task.value
        state.withLock { state in
            if state.fetches[cacheKey] == task { state.fetches[cacheKey] = nil }
            if case .token(let token) = result { state.tokens[cacheKey] = token }
        }
        return result
    }
}

/// What asking a token endpoint gave.
enum TokenFetch: Sendable {
    case token(AccessToken)
    /// No token: what that means for the requests that needed it (a retry, or the service stopped).
    case failed(Outcome)
}
