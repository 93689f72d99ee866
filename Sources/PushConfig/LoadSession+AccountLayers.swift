import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// Account keys in layers (`use:` templates, `defaults:`, the account), with the device-value
/// aliases filled.
extension LoadSession {
    /// A block of account keys (defaults or an account) over `base`: `base` < its `use:`
    /// templates < its own keys, with the device-value aliases filled.
    struct AccountLayer {
        var values = AccountValueTable()
        var services: [String: ServiceValues] = [:]
        /// Keys written here whose value could not be read (reported already).
        var unreadable: Set<String> = []
    }

    mutating func accountLayer(_ node: YAMLNode, file: String, what: String, account: String?,
                               base: AccountValueTable = [:]) -> AccountLayer? {
        guard let mapping = mapping(node, file: file, what: what) else { return nil }
        var layer = AccountLayer()
        // Its own keys go over its `use:` templates wherever `use:` is written: with templates,
        // they wait in `own` until the templates are written; without, as nearly every account
        // of a large file, they are written at once.
        let hasUses = mapping.entries.contains { $0.key.value.utf8.count == 3 && $0.key.value == "use" }
        var own: [(key: String, value: ConfigValue)] = []
        var uses: [(name: String, scalar: YAMLScalar)] = []
        var aliases = AliasFill()
        // Keys that are a near miss of one pushreporter acts on: told once the layer is whole.
        var misspelt: [(key: YAMLScalar, suggestion: String)] = []
        // Over `base`, shared (``AccountValueTable/init(over:)``), with room for this layer's
        // own keys at once instead of growing. An alias pair `base` has both names of adds none:
        // room for it stayed empty in every account of a file whose `defaults:` give one (80
        // bytes each, 8 MB at 100,000).
        layer.values = AccountValueTable(over: base)
        let aliasRoom = Self.aliasKeys.count { !(base.contains($0.first) && base.contains($0.second)) }
        layer.values.reserveCapacity(mapping.entries.count + aliasRoom)
        // Read in place: a copy of each entry (a retain and release of each of its strings)
        // cost a tenth of reading an account.
        mapping.entries.withUnsafeBufferPointer { entries in
            for entry in entries.indices.lazy.map({ entries.baseAddress! + $0 }) {
                let facts = facts(of: entry.pointee.key.value)
                switch facts.role {
                case .use:
                    uses += templateNames(entry.pointee.value, file: file)
                case .services:
                    readServices(entry.pointee.value, into: &layer, file: file, what: what, account: account)
                case .value:
                    guard case .scalar(let scalar) = entry.pointee.value else {
                        diagnostics.error("account key '\(entry.pointee.key.value)' must be a single value, not \(entry.pointee.value.kindDescription)",
                                          file: file, at: entry.pointee.value.start, account: account)
                        continue
                    }
                    if let suggestion = facts.suggestion { misspelt.append((entry.pointee.key, suggestion)) }
                    guard let resolved = resolve(scalar, key: facts.key.name, isSecret: facts.isSecret, file: file, account: account) else {
                        layer.unreadable.insert(facts.key.name)
                        continue
                    }
                    if hasUses {
                        own.append((facts.key.name, resolved))
                    } else {
                        if let alias = facts.alias { aliases.note(alias, resolved) }
                        layer.values[facts.key] = resolved
                    }
                }
            }
        }
        if hasUses {
            for use in uses {
                guard let keys = template(named: use.name, file: file, at: use.scalar.start, account: account) else {
                    // Said where `use:` names it; what the template would have given is not known.
                    layer.unreadable.insert(Account.templateNotReadKey)
                    continue
                }
                if let path = templatePaths[templateLookup(use.name, file: file)], let services = templateServiceCache[path] {
                    // A template's services come before the layer's own, which win.
                    layer.services.merge(services) { own, _ in own }
                }
                overlay(&layer.values, with: keys, file: file, account: account)
            }
            overlay(&layer.values, with: own, file: file, account: account)
        } else {
            fill(aliases, in: &layer.values, file: file, account: account)
        }
        for (key, suggestion) in misspelt {
            reportMisspelt(key, suggestion: suggestion, in: &layer, file: file, account: account)
        }
        return layer
    }

    /// Reads a `services:` block of an account or of `defaults` into `layer`.
    mutating func readServices(_ node: YAMLNode, into layer: inout AccountLayer, file: String, what: String,
                                       account: String?) {
        guard let services = self.mapping(node, file: file, what: "services of \(what)") else { return }
        for pair in services.entries {
            let (serviceKey, serviceValue) = (pair.key, pair.value)
            guard let settings = self.mapping(serviceValue, file: file, what: "services.\(serviceKey.value)") else { continue }
            var resolved = ServiceValues(values: [:], file: file, position: serviceKey.start)
            for pair in settings.entries {
                let (settingKey, settingValue) = (pair.key, pair.value)
                resolved.keyPositions[settingKey.value] = settingKey.start
                guard case .scalar(let scalar) = settingValue else {
                    diagnostics.error("'\(settingKey.value)' must be a single value, not \(settingValue.kindDescription)",
                                      file: file, at: settingValue.start, account: account)
                    continue
                }
                if let value = resolve(scalar, key: settingKey.value, file: file, account: account) {
                    resolved.values[settingKey.value] = value
                }
            }
            layer.services[serviceKey.value] = resolved
            accountServiceReferences.append((serviceKey.value, file, serviceKey.start, account ?? what))
        }
    }

    /// Writes `layer` over `values`. A layer that gives one name of an alias pair sets both,
    /// replacing what `values` had under either; giving both with different values is an error.
    mutating func overlay<S: Sequence>(_ values: inout AccountValueTable, with layer: S, file: String, account: String?)
    where S.Element == (key: String, value: ConfigValue) {
        var aliases = AliasFill()
        for (key, value) in layer {
            values[key] = value
            if let alias = AliasFill.Name(key) { aliases.note(alias, value) }
        }
        fill(aliases, in: &values, file: file, account: account)
    }

    /// What one layer gave under each name of the alias pairs (``DeviceValues/aliases``), to
    /// fill the other name of each pair once the layer is written.
    struct AliasFill {
        /// One name of one pair.
        struct Name {
            let pair: Int
            let isSecond: Bool

            /// The alias name `key` is, if it is one.
            init?(_ key: String) {
                // Most keys are not alias names, and most are told apart by their length alone.
                let length = key.utf8.count
                guard length < 64, Self.lengths & (1 << UInt64(length)) != 0,
                      let pair = DeviceValues.aliases.firstIndex(where: { $0.0 == key || $0.1 == key }) else { return nil }
                self.pair = pair
                isSecond = DeviceValues.aliases[pair].1 == key
            }

            /// A bit for each length (in UTF-8 bytes) of an alias name.
            private static let lengths: UInt64 = DeviceValues.aliases.reduce(0) { mask, pair in
                mask | 1 << UInt64(pair.0.utf8.count) | 1 << UInt64(pair.1.utf8.count)
            }
        }

        /// What was given under the first and second name of each pair (stored, not in an
        /// array: nearly every account gives one).
        var first = Given()
        var second = Given()

        /// What was given under both names of one pair.
        struct Given {
            var first: ConfigValue?
            var second: ConfigValue?
        }

        mutating func note(_ name: Name, _ value: ConfigValue) {
            switch (name.pair, name.isSecond) {
            case (0, false): first.first = value
            case (0, true): first.second = value
            case (1, false): second.first = value
            case (1, true): second.second = value
            default: preconditionFailure("AliasFill holds two alias pairs; DeviceValues.aliases has more")
            }
        }
    }

    mutating func fill(_ aliases: borrowing AliasFill, in values: inout AccountValueTable, file: String, account: String?) {
        fill(aliases.first, pair: 0, in: &values, file: file, account: account)
        fill(aliases.second, pair: 1, in: &values, file: file, account: account)
    }

    mutating func fill(_ given: borrowing AliasFill.Given, pair: Int, in values: inout AccountValueTable, file: String,
                               account: String?) {
        if let first = given.first {
            if let second = given.second {
                guard first.text != second.text else { return }
                let (firstName, secondName) = DeviceValues.aliases[pair]
                diagnostics.error("'\(firstName)' and '\(secondName)' are two names of one value, but they differ here; give only one",
                                  file: file, at: second.origin.position, account: account)
            } else {
                values[Self.aliasKeys[pair].second] = first
            }
        } else if let second = given.second {
            values[Self.aliasKeys[pair].first] = second
        }
    }

    static let aliasKeys = DeviceValues.aliases.map {
        (first: AccountValueTable.PreparedKey($0.0), second: AccountValueTable.PreparedKey($0.1))
    }
}
