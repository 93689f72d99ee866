import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// What the loader knows of an account key: whether it is secret, an alias, a near miss of a
/// key pushreporter acts on.
extension LoadSession {

    /// Accounts take any key, but a near-miss of a key the agent acts on is almost always a typo.
    /// `suggestion` is the key's ``KeyFacts/suggestion``.
    mutating func warnIfMisspelt(_ key: YAMLScalar, suggestion: String?, file: String, account: String?) {
        guard let nearest = suggestion else { return }
        diagnostics.warning("'\(key.value)' is not a key pushreporter acts on; did you mean '\(nearest)'?", file: file, at: key.start,
                            account: account)
    }

    /// What is known of a key name, whatever holds it.
    struct KeyFacts {
        /// The name, with its digest for setting it in an ``AccountValueTable``.
        var key: AccountValueTable.PreparedKey
        /// Whether its values are secret (``isSecretKey(_:)``).
        var isSecret: Bool
        /// The key pushreporter acts on that it is a near miss of, if any.
        var suggestion: String?
        /// Which name of the alias pairs it is, if one (``AliasFill``).
        var alias: AliasFill.Name?
        /// What the key is in an account or `defaults`.
        var role: Role

        enum Role {
            case use, services, value

            init(_ key: String) {
                self = switch key {
                case "use": .use
                case "services": .services
                default: .value
                }
            }
        }
    }

    static let recentKeyCount = 32

    mutating func facts(of key: String) -> KeyFacts {
        if nextKeyFacts < recentKeyFacts.count, recentKeyFacts[nextKeyFacts].key.name == key {
            nextKeyFacts += 1
            return recentKeyFacts[nextKeyFacts - 1]
        }
        let prepared = AccountValueTable.PreparedKey(key)
        if let index = recentKeyFacts.lastIndex(where: { $0.key.digest == prepared.digest && $0.key.name == key }) {
            nextKeyFacts = index + 1
            return recentKeyFacts[index]
        }
        let facts = KeyFacts(key: prepared, isSecret: Self.isSecretKey(key), suggestion: suggestion(forKey: key),
                             alias: AliasFill.Name(key), role: KeyFacts.Role(key))
        if recentKeyFacts.count == Self.recentKeyCount { recentKeyFacts.removeFirst() }
        recentKeyFacts.append(facts)
        nextKeyFacts = recentKeyFacts.count
        return facts
    }

    mutating func suggestion(forKey name: String) -> String? {
        // Most keys are ones we act on: answer those before any string work.
        guard !knownAccountKeySet.contains(name) else { return nil }
        // Other keys repeat in every account: each name is looked at once.
        if let known = keySuggestions[name] { return known }
        let lowered = name.lowercased()
        // Accounts take any key, so only names that look like ours are checked: our prefixes,
        // or a near miss of a device value or an account's own key of five letters or more (a
        // misspelt `selctor` or `usernme` silently drops the value; `user` or `ip` may well be
        // the author's own keys).
        let looksLikeOurs = lowered.hasPrefix("push") || lowered.hasPrefix("account") || lowered.hasPrefix("selector")
            || NameSuggester.nearest(to: name, among: Self.nearMissKeys, maxDistance: 2) != nil
        let suggestion = looksLikeOurs ? NameSuggester.nearest(to: name, among: knownAccountKeys, maxDistance: 2) : nil
        keySuggestions[name] = .some(suggestion)
        return suggestion
    }
}
