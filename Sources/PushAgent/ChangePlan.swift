import PushBackend
import PushConfig
import PushState

/// What a start or a reload would do now (SPEC §14, `pushreporter plan`): the configuration's
/// subscriptions against what the state says was delivered, per service. It compares as a reload
/// does, by the fingerprint of what was delivered (a start re-reports the unchanged ones too).
public struct ChangePlan: Sendable {
    public enum Action: String, Sendable, CaseIterable {
        /// Never delivered: it would be sent.
        case new
        /// Delivered, but what would be sent now differs: sent again.
        case changed
        /// Delivered as it would be sent now: left alone by a reload.
        case unchanged
        /// In the state, no longer configured: its cleanup (removal report) would be sent, or it
        /// would be forgotten.
        case removed
        /// No longer configured, but the removal guard would hold it: nothing sent (SPEC §14).
        case held
    }

    public struct Item: Sendable, Equatable {
        public var key: SubscriptionKey
        public var action: Action
        /// For a changed one: the names of the parts of its request that differ from what was
        /// delivered (never their values); nil when the state cannot tell (delivered by an
        /// earlier version, or a backend that does not name its parts).
        public var changes: [String]? = nil
    }

    /// Every subscription that is not unchanged, by service then account.
    public private(set) var items: [Item] = []
    /// How many of each action each service has.
    public private(set) var counts: [String: [Action: Int]] = [:]
    /// Subscriptions that have nothing to send yet (a device value missing), or that are refused as
    /// they stand: neither sent nor compared.
    public private(set) var notSendable = 0

    /// `plans` (the configuration's) against `records` (the state's); with `services`, only those.
    /// `removalGuard` decides, as a reload would, whether the removals are held.
    /// `deliveredParts` is what the state keeps of each delivery's parts, and `changes` names
    /// the parts of a delivery that differ from such a text (``Backends/changes(of:stored:deliveredFingerprint:)``).
    public init(plans: [SubscriptionPlan], records: [SubscriptionRecord], services: Set<String> = [],
                removalGuard: RemovalGuard? = nil, deliveredParts: [SubscriptionKey: String] = [:],
                changes: (SubscriptionRequest, String, String) -> [String]? = { _, _, _ in nil }) {
        func shown(_ service: String) -> Bool { services.isEmpty || services.contains(service) }
        var stored: [SubscriptionKey: SubscriptionRecord] = [:]
        stored.reserveCapacity(records.count)
        for record in records where shown(record.key.service) { stored[record.key] = record }
        for plan in plans where shown(plan.service) {
            let key = SubscriptionKey(account: plan.account, service: plan.service)
            let record = stored.removeValue(forKey: key)
            // A service is listed even when none of its subscriptions has anything to send.
            if counts[plan.service] == nil { counts[plan.service] = [:] }
            guard plan.delivery != nil else {
                notSendable += 1
                continue
            }
            let action: Action
            var changed: [String]?
            if let delivered = record?.deliveredFingerprint, record?.isRemoving == false {
                action = delivered == plan.fingerprint ? .unchanged : .changed
                if action == .changed, let stored = deliveredParts[key], let delivery = plan.delivery {
                    changed = changes(delivery, stored, delivered)
                }
            } else {
                action = .new
            }
            note(key, action, changes: changed)
        }
        // What is left of the state is no longer configured: removed, unless the guard holds
        // them as a reload would (counted over every service, as the agent counts them).
        let leaving = stored.values.filter { !$0.isRemoving }.map(\.key)
        let accountsInState = Set(records.lazy.map(\.key.account)).count
        let removingAccounts = Set(leaving.lazy.map(\.account)).count
        let holds = removalGuard?.holds(removing: removingAccounts, of: accountsInState) ?? false
        for (key, record) in stored { note(key, holds && !record.isRemoving ? .held : .removed) }
        items.sort { ($0.key.service, $0.key.account) < ($1.key.service, $1.key.account) }
    }

    private mutating func note(_ key: SubscriptionKey, _ action: Action, changes: [String]? = nil) {
        counts[key.service, default: [:]][action, default: 0] += 1
        if action != .unchanged { items.append(Item(key: key, action: action, changes: changes)) }
    }

    /// Whether a reload now would send anything (new, changed or removed): `plan` exits 2 then.
    public var sendsSomething: Bool { items.contains { $0.action != .held } }

    /// `count` of `action` in `service`.
    public func count(_ action: Action, of service: String) -> Int { counts[service]?[action] ?? 0 }

    /// Per service a line of counts, then what would be sent, at most `shown` lines of each
    /// action (the rest counted; `--format json` lists every one).
    public func text(shown limit: Int = 20) -> String {
        var lines: [String] = []
        for service in counts.keys.sorted() {
            let parts = Action.allCases.map { "\(count($0, of: service)) \($0.rawValue)" }
            lines.append("\(service.displayEscaped): " + parts.joined(separator: ", "))
            for action in [Action.new, .changed, .removed, .held] {
                let keys = items.filter { $0.key.service == service && $0.action == action }
                for item in keys.prefix(limit) {
                    let changes = item.changes.map { " (" + $0.map(\.displayEscaped).joined(separator: ", ") + ")" } ?? ""
                    lines.append("  \(action.rawValue.padding(to: 8)) \(item.key.account.displayEscaped)\(changes)")
                }
                if keys.count > limit {
                    lines.append("  \(action.rawValue.padding(to: 8)) … and \(keys.count - limit) more (--format json lists every one)")
                }
            }
        }
        if lines.isEmpty { lines.append("no subscription is configured or in the state") }
        if notSendable > 0 {
            lines.append("\(notSendable) \(notSendable == 1 ? "subscription has" : "subscriptions have") nothing to send yet or "
                         + "\(notSendable == 1 ? "is" : "are") refused as \(notSendable == 1 ? "it stands" : "they stand") (pushreporter validate says why)")
        }
        return lines.joined(separator: "\n")
    }

    /// SPEC §14's JSON: `{"services": [{"service", "new", "changed", "unchanged", "removed",
    /// "held"}], "items": [{"account", "service", "action", "changes"}]}`. `changes`, for a
    /// changed one, lists the names of the parts that differ (`query token`, `header
    /// authorization`, `body.pushToken`), never their values; null when the state cannot tell,
    /// and for the other actions.
    public var json: String {
        let services = counts.keys.sorted().map { service in
            JSONText.compactObject([("service", JSONText.string(service))]
                                   + Action.allCases.map { ($0.rawValue, "\(count($0, of: service))") })
        }
        let listed = items.map { item in
            JSONText.compactObject([("account", JSONText.string(item.key.account)), ("service", JSONText.string(item.key.service)),
                                    ("action", JSONText.string(item.action.rawValue)),
                                    ("changes", item.changes.map { "[" + $0.map { JSONText.string($0) }.joined(separator: ",") + "]" } ?? "null")])
        }
        return JSONText.object([
            ("services", JSONText.array(services, indent: "  ")),
            ("items", JSONText.array(listed, indent: "  ")),
        ])
    }
}

private extension String {
    func padding(to width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
