import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// `accounts:`: each account read, checked and admitted (in runs on every processor when
/// there are many).
extension LoadSession {
    mutating func loadAccounts(_ node: YAMLNode, file: String, defaults: AccountLayer) {
        guard case .sequence(let sequence) = node else {
            diagnostics.error("accounts must be a list (each item starting with '- '), not \(node.kindDescription)", file: file, at: node.start)
            return
        }
        // Not when most are left out: room for a million accounts would outweigh what is kept.
        if keepsEveryAccount { configuration.accounts.reserveRoom(for: sequence.items.count) }
        accountIDs.reserveCapacity(forMore: sequence.items.count)
        readAccounts(sequence.items[...], file: file, defaults: defaults)
    }

    /// Reads `items` of `accounts:` and admits them; in runs on every processor when there are
    /// many, or in `accountRuns` runs when set, else `runs` when given.
    mutating func readAccounts(_ items: ArraySlice<YAMLNode>, file: String, defaults: AccountLayer, runs: Int? = nil) {
        let runs = min(accountRuns ?? runs ?? Processors.runs(accounts: items.count), items.count)
        let checker = earlyCheckerForLoadedGlobals()
        guard runs > 1 else {
            var checking = checker
            for item in items {
                guard let account = readAccount(item, file: file, defaults: defaults) else { continue }
                admit(checked(account, by: &checking))
            }
            // Kept with the templates it compiled, for the next items of the file.
            if let checking { earlyChecker?.checker = checking }
            return
        }
        // Runs of accounts are read at once, each by a copy of this session that starts with no
        // diagnostics; what each account produced is then taken in file order, so diagnostics,
        // duplicate ids and service references come out as they would one account at a time.
        let base = AccountRun(session: withoutAccountLists(), checking: checker)
        let first = items.startIndex
        var read = Processors.inRuns(count: items.count, runs: runs) { range in
            var run = base
            run.read(items[(first + range.lowerBound)..<(first + range.upperBound)], file: file, defaults: defaults)
            return run
        }
        for index in read.indices { take(&read[index]) }
    }

    /// Admits what `run` read, as if this session had read it; its accounts are moved out.
    mutating func take(_ run: inout AccountRun) {
        var diagnosticsTaken = 0
        var referencesTaken = 0
        // Grown once: the ids of a run of 50,000 accounts would otherwise be hashed again at
        // each of several doublings, on the one thread that admits every account.
        accountIDs.reserveCapacity(forMore: run.accounts.count)
        if keepsEveryAccount {
            configuration.accounts.reserveRoom(for: run.accounts.count)
        } else if sink == nil {
            let kept = run.accounts.count { if case .whole? = $0.account { true } else { false } }
            configuration.accounts.reserveRoom(for: kept)
        }
        for index in run.accounts.indices {
            let (diagnosticCount, referenceCount) = (run.accounts[index].diagnostics, run.accounts[index].references)
            diagnostics.append(contentsOf: run.session.diagnostics.all[diagnosticsTaken..<diagnosticCount])
            accountServiceReferences += run.session.accountServiceReferences[referencesTaken..<referenceCount]
            diagnosticsTaken = diagnosticCount
            referencesTaken = referenceCount
            // Moved out, not copied (a copy retains each of the account's references).
            if let account = run.accounts[index].account.take() { admit(account) }
        }
        // Templates a run read for the first time.
        sources.merge(run.session.sources) { mine, _ in mine }
        templateCache.merge(run.session.templateCache) { mine, _ in mine }
        templateServiceCache.merge(run.session.templateServiceCache) { mine, _ in mine }
        templatePaths.merge(run.session.templatePaths) { mine, _ in mine }
    }

    /// Accounts read apart from the session, by a copy of it without its account lists, to be
    /// admitted later in file order (``take(_:)``): each account (nil when it could not be
    /// used) with the number of diagnostics and service references its session had after it.
    struct AccountRun: Sendable {
        var accounts: [(account: CheckedAccount?, diagnostics: Int, references: Int)] = []
        var session: LoadSession
        /// Checks each account as it is read (see ``ConfigurationLoader/earlyChecker``).
        var checking: (any EarlyAccountChecker)?

        /// Reads `items` of `accounts:` after those read so far.
        mutating func read<Items: Collection<YAMLNode>>(_ items: Items, file: String, defaults: AccountLayer) {
            // Exactly for one call; a reader called for batch after batch lets the array grow.
            if accounts.isEmpty { accounts.reserveCapacity(items.count) }
            for item in items {
                let account = session.readAccount(item, file: file, defaults: defaults).map { session.checked($0, by: &checking) }
                accounts.append((account, session.diagnostics.all.count, session.accountServiceReferences.count))
            }
        }
    }

    /// Reads one item of `accounts:` over the file's `defaults`; nil (with diagnostics) when it
    /// cannot be used. Ids are checked for uniqueness by ``admit(_:passedEarly:)``.
    mutating func readAccount(_ item: YAMLNode, file: String, defaults: AccountLayer) -> Account? {
        guard case .mapping(let mapping) = item else {
            diagnostics.error("an account must be a mapping of keys, not \(item.kindDescription)", file: file, at: item.start)
            return nil
        }
        let label = mapping["id"].flatMap(\.scalarValue) ?? mapping["username"].flatMap(\.scalarValue)
        guard let layer = accountLayer(item, file: file, what: "account", account: label, base: defaults.values) else { return nil }
        var values = layer.values
        // A default that could not be read stays unreadable unless the account gives its own.
        var unreadable = layer.unreadable
        for key in defaults.unreadable where !values.contains(key) { unreadable.insert(key) }
        if values.containsValue(where: { $0.template != nil }) {
            let label = values[Self.idKey]?.text ?? values[Self.usernameKey]?.text
            expandTemplateParameters(&values, unreadable: &unreadable, file: file, at: mapping.start, account: label)
        }
        var services = defaults.services
        services.merge(layer.services) { _, new in new }

        guard let id = values[Self.idKey]?.text ?? values[Self.usernameKey]?.text, !id.isEmpty else {
            diagnostics.error("the account has neither an id nor a username; one of them identifies it", file: file, at: mapping.start)
            return nil
        }
        if let identity = values[Self.idKey] ?? values[Self.usernameKey], identity.isSecret {
            // An id names the account in logs, status and the state: it cannot be a secret (SPEC §12).
            let message = values[Self.idKey] != nil
                ? "the account's id is a secret, but an id names the account in logs, status and the state; write it in the clear"
                : "the username is a secret, so it cannot identify the account (the id defaults to it, and an id appears in logs, status and the state); give the account an id"
            diagnostics.error(message, file: identity.origin.file, at: identity.origin.position)
            return nil
        }
        var enabled = true
        if let flag = values[Self.enabledKey] {
            switch flag.text.lowercased() {
            case "true", "yes", "on": enabled = true
            case "false", "no", "off": enabled = false
            default:
                diagnostics.error("enabled must be true or false, not '\(flag.shown)'", file: flag.origin.file, at: flag.origin.position, account: id)
            }
        }
        return Account(id: id, isEnabled: enabled, values: values, services: services,
                       path: path(of: file), position: mapping.start, unreadableKeys: unreadable)
    }

    static let idKey = AccountValueTable.PreparedKey("id")
    static let usernameKey = AccountValueTable.PreparedKey("username")
    static let enabledKey = AccountValueTable.PreparedKey("enabled")

    /// An account read, checked as it loaded when there is an early checker, as it is to be
    /// admitted.
    enum CheckedAccount: Sendable {
        /// Kept whole, with whether it passed its check while loading.
        case whole(Account, passedEarly: Bool)
        /// Passed, and left out (``ConfigurationLoader/leavesOutPassedAccounts``).
        case leftOut(LeftOutAccount)
    }

    /// `account` checked by `checker` (when there is one), and left out if it passes and may be.
    mutating func checked(_ account: consuming Account, by checker: inout (any EarlyAccountChecker)?) -> CheckedAccount {
        let passed = checker?.passesWithoutRendering(account) ?? false
        guard passed, leavesOutPassed, account.services.isEmpty else { return .whole(account, passedEarly: passed) }
        let names: AccountKeyNames
        if let last = lastLeftOutKeys, account.values.hasSameKeys(as: last.values) {
            names = last.names
        } else {
            names = AccountKeyNames(account.values.keys)
            lastLeftOutKeys = (account.values, names)
        }
        return .leftOut(LeftOutAccount(id: account.id, path: account.path, position: account.position,
                                       isEnabled: account.isEnabled, keys: names, unreadableKeys: account.unreadableKeys))
    }

    /// Adds `account` unless its id is taken (ids are unique across all files).
    mutating func admit(_ account: consuming CheckedAccount) {
        switch consume account {
        case .whole(let account, let passed):
            admit(account, passedEarly: passed)
        case .leftOut(let account):
            guard claim(account.id, path: account.path, at: account.position) else { return }
            configuration.accountsLeftOut.add(account)
        }
    }

    /// Adds `account` unless its id is taken, with whether it passed its check while loading.
    mutating func admit(_ account: consuming Account, passedEarly passed: Bool = false) {
        guard claim(account.id, path: account.path, at: account.position) else { return }
        if let sink {
            sink.take(account)
            return
        }
        configuration.accounts.append(consume account)
        if earlyCheckerFactory != nil { passedEarly.append(passed) }
    }

    /// Takes `id` for the account at `position` of `path`; false (with a diagnostic) when an
    /// earlier account has it: ids are unique across all files.
    mutating func claim(_ id: String, path: SourcePath, at position: SourcePosition) -> Bool {
        guard let owner = accountIDs.claim(id, path: path, at: position) else { return true }
        diagnostics.error("account id '\(id)' is already used at \(owner.path.string):\(owner.position.line):\(owner.position.column); "
                          + "ids must be unique across all files (an account's id is its `id:`, else its username)",
                          file: path.string, at: position, account: id)
        return false
    }

    /// Whether `bytes` hold a PEM certificate block, as a CA bundle does.
    static func holdsPEMCertificate(_ bytes: [UInt8]) -> Bool {
        let marker = Array("-----BEGIN CERTIFICATE-----".utf8)
        guard bytes.count >= marker.count else { return false }
        return (0...(bytes.count - marker.count)).contains { start in bytes[start] == marker[0] && bytes[start..<start + marker.count].elementsEqual(marker) }
    }

    /// The checker of accounts as they are read, for the globals loaded so far; nil without
    /// `earlyCheckerFactory`.
    mutating func earlyCheckerForLoadedGlobals() -> (any EarlyAccountChecker)? {
        // A global that could not be read may still be given a value by a later file, which
        // could then fail what passed here (the load has an error then anyway).
        guard let factory = earlyCheckerFactory, configuration.unreadableGlobals.isEmpty else { return nil }
        let globals = configuration.globals.count
        if let checker = earlyChecker, checker.globals == globals { return checker.checker }
        // Without the accounts: a check reads them only to word a problem.
        var loaded = configuration
        loaded.accounts = []
        let checker = factory(loaded)
        earlyChecker = (checker, globals)
        return checker
    }

    /// Fills `${KEY}` in values that came from a `use:` template with the account's own `KEY`.
    ///
    /// A template cannot put a placeholder in a URL's host (SPEC §3), so a shipped template takes
    /// its base URL this way, at load time, from keys the configuration's author wrote. Device
    /// values are not allowed as parameters: they never shape a URL's structure.
    /// A parameter in `unreadable` (written, but its value could not be read) was reported
    /// where it is written: it is not reported again as missing, and the value it fills becomes
    /// unreadable too (so that nothing is checked, or reported, on a value known to be wrong).
    mutating func expandTemplateParameters(_ values: inout AccountValueTable, unreadable: inout Set<String>, file: String,
                                           at position: SourcePosition, account: String?) {
        for (key, value) in values where value.template != nil && value.text.contains("${") {
            var output = ""
            var secret: ConfigValue?
            var needsUnreadable = false
            var rest = Substring(value.text)
            while let open = rest.firstRange(of: "${") {
                output += rest[..<open.lowerBound]
                guard let close = rest[open.upperBound...].firstIndex(of: "}") else {
                    output += rest[open.lowerBound...]
                    rest = ""
                    break
                }
                let name = String(rest[open.upperBound..<close])
                rest = rest[rest.index(after: close)...]
                if let parameter = values[name], parameter.template == nil, !DeviceValues.names.contains(name) {
                    output += parameter.text
                    if parameter.isSecret { secret = parameter }
                } else if unreadable.contains(name) {
                    needsUnreadable = true
                } else {
                    diagnostics.error("template '\(value.template!)' needs '\(name)' for \(key); set it in the account or in defaults",
                                      file: file, at: position, account: account)
                }
            }
            if needsUnreadable {
                values[key] = nil
                unreadable.insert(key)
                continue
            }
            output += rest
            values[key]?.text = output
            values[key]?.origin.isVerbatim = false
            if let secret {
                // A value built from a secret is secret (SPEC §2).
                values[key]?.isSecret = true
                if value.secretName == nil { values[key]?.secretName = secret.secretName }
            }
        }
    }

    /// The keys of an account any configuration has: the device values and its own.
    static let accountOwnKeys = AccountKeys.own
    /// The keys a near miss of which is warned about whatever it starts with.
    static let nearMissKeys = DeviceValues.names + ["username", "password", "enabled", "services"]
}
