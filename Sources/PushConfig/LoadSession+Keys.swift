import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// What the loader knows of an account key: whether it is secret, an alias, a near miss of a
/// key pushreporter acts on.
extension LoadSession {

    /// Accounts take any key, but a near miss of a key the agent acts on is almost always a typo,
    /// and a typo must not go live (SPEC §2): in an account, it is an error unless a template of
    /// the account uses it (`%account[KEY]%`: then it is the author's own key). In `defaults`,
    /// whose keys the accounts' templates may use later, it is a warning.
    /// The key it meant counts as written but unreadable, as an unset `!env` value does: checks
    /// that the account lacks it (no pushTokenReporterUrl) would only repeat the error.
    mutating func reportMisspelt(_ key: YAMLScalar, suggestion: String, in layer: inout AccountLayer, file: String, account: String?) {
        guard let account else {
            diagnostics.warning("'\(key.value)' is not a key pushreporter acts on; did you mean '\(suggestion)'?", file: file, at: key.start)
            return
        }
        guard !Self.templates(in: layer, use: key.value) else { return }
        diagnostics.error("'\(key.value)' is not a key pushreporter acts on, and no template of the account uses it; did you mean '\(suggestion)'?",
                          file: file, at: key.start, account: account)
        if !layer.values.contains(suggestion) { layer.unreadable.insert(suggestion) }
    }

    /// Whether a value of `layer` (its own or a service's) names `key` as a placeholder.
    static func templates(in layer: AccountLayer, use key: String) -> Bool {
        let forms = ["%account[\(key)]%", "%\(key)%"]
        func uses(_ text: String) -> Bool { text.utf8.contains(UInt8(ascii: "%")) && forms.contains { text.contains($0) } }
        return layer.values.contains { uses($0.value.text) }
            || layer.services.values.contains { service in service.values.values.contains { uses($0.text) } }
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
