import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// The state of one load: what the files gave so far, and every diagnostic.
///
/// Cut into files by section of a configuration file: this one has the state, the files and
/// their root keys; `+Agent` the `agent:` block, `+Services` `globals:` and `services:`,
/// `+AccountLayers` `defaults:` and the layers of an account's keys, `+Accounts` the accounts
/// read and admitted, `+Keys` what is known of a key, `+Templates` `use:`, `+Values` tags and
/// secrets. Its state is module-internal so that those files reach it.
struct LoadSession {
    let environment: LoaderEnvironment
    /// The keys pushreporter acts on in an account: its own, the device values, and the
    /// backends' (``LoaderEnvironment/backendAccountKeys``).
    let knownAccountKeys: [String]
    let knownAccountKeySet: Set<String>
    var accountRuns: Int?
    var streamedFiles = 0
    var splitFiles = 0
    /// See ``ConfigurationLoader/earlyChecker``.
    var earlyCheckerFactory: (@Sendable (Configuration) -> any EarlyAccountChecker)?
    /// Indexed like `configuration.accounts` (kept only with `earlyCheckerFactory`).
    var passedEarly: [Bool] = []
    /// See ``ConfigurationLoader/leavesOutPassedAccounts``.
    var leavesOutPassed = false
    /// Where admitted accounts go instead of `configuration.accounts`, when set.
    var sink: AccountSink?
    /// Whether every account admitted goes into `configuration.accounts` (room can be made for
    /// all of them at once).
    var keepsEveryAccount: Bool { !leavesOutPassed && sink == nil }
    var restoredFiles: [String] = []
    /// The key names of the last account left out, with its values to compare the next one's
    /// keys with.
    var lastLeftOutKeys: (values: AccountValueTable, names: AccountKeyNames)?

    /// The checker accounts are checked with as they are read, and the number of globals it
    /// knows: made again when a file adds globals.
    var earlyChecker: (checker: any EarlyAccountChecker, globals: Int)?
    var configuration = Configuration()
    var diagnostics = DiagnosticList()
    var sources: [String: SourceText] = [:]
    var agentKeyOwners: [String: (file: String, position: SourcePosition)] = [:]
    /// Where each global whose value could not be read is set: it is set all the same.
    var unreadableGlobalPlaces: [String: (file: String, line: Int)] = [:]
    var accountIDs = AccountIDClaims()
    var templateCache: [String: AccountValueTable?] = [:]
    /// The `services:` of each template read, by path (SPEC §9.0 per-account values a template
    /// gives the accounts that use it).
    var templateServiceCache: [String: [String: ServiceValues]] = [:]
    /// Where a template name beside a config folder was found, so accounts do not search again.
    var templatePaths: [String: String] = [:]
    var accountServiceReferences: [(service: String, file: String, position: SourcePosition, account: String)] = []
    /// What `suggestion(forKey:)` found for each key name that is not one we act on (nil: none).
    var keySuggestions: [String: String?] = [:]
    var lastPath: (file: String, path: SourcePath)?

    init(environment: LoaderEnvironment) {
        self.environment = environment
        knownAccountKeys = Self.accountOwnKeys + environment.backendAccountKeys
        knownAccountKeySet = Set(knownAccountKeys)
    }


    /// The facts of the key names met last, and where the next key is expected among them.
    /// Accounts repeat their keys in the same order, and the parser shares each key's string:
    /// the entry after the last one found is tried first, and a string compared with the very
    /// same string is equal at once. Other keys are found by their digest.
    var recentKeyFacts: [KeyFacts] = []
    var nextKeyFacts = 0

    // MARK: Files and directories

    /// The configuration files `path` names: itself, or a directory's `*.yaml` and `*.yml`
    /// files; none (with a diagnostic) when it cannot be read.
    mutating func files(at path: String) -> [String] {
        switch FileSystem.kind(of: path) {
        case .failure(let error):
            diagnostics.error("cannot read the configuration: \(error.message)", file: path)
            return []
        case .success(.directory):
            switch FileSystem.list(path) {
            case .failure(let error):
                diagnostics.error("cannot list the configuration directory: \(error.message)", file: path)
                return []
            case .success(let names):
                let yaml = names.filter { ($0.hasSuffix(".yaml") || $0.hasSuffix(".yml")) && !$0.hasPrefix(".") }
                if yaml.isEmpty {
                    diagnostics.error("the directory holds no *.yaml or *.yml file", file: path)
                }
                return yaml.map { FileSystem.join(path, $0) }
            }
        case .success(.file), .success(.other):
            return [path]
        }
    }

    /// Reads and parses one file; nil (with a diagnostic) when it cannot be used.
    mutating func parse(_ path: String, what: String) -> YAMLMapping? {
        take(ParsedFile(path: path), path: path, what: what)
    }

    /// The root mapping of a file read and parsed; nil (with a diagnostic) when it cannot be used.
    mutating func take(_ file: ParsedFile, path: String, what: String) -> YAMLMapping? {
        let parsed: YAMLParseResult
        switch file.contents {
        case .failure(let error):
            diagnostics.error("cannot read the \(what): \(error.message)", file: path)
            return nil
        case .success(let result):
            parsed = result.parsed
            for error in parsed.errors {
                diagnostics.error(error.message, file: path, at: error.position)
            }
            guard parsed.root != nil else {
                if parsed.errors.isEmpty {
                    diagnostics.error("the file is empty; a \(what) is a YAML mapping", file: path)
                }
                return nil
            }
            sources[path] = result.source
        }
        guard case .mapping(let mapping)? = parsed.root else {
            diagnostics.error("the file must hold a YAML mapping, not \(parsed.root!.kindDescription)", file: path, at: parsed.root!.start)
            return nil
        }
        return mapping
    }

    mutating func loadFile(_ path: String, parsed: ParsedFile) {
        configuration.files.append(path)
        guard let root = take(parsed, path: path, what: "configuration file") else {
            configuration.filesNotRead.append(path)
            return
        }
        var defaults = AccountLayer()
        if let accountsNode = loadRootEntries(root.entries[...], file: path, defaults: &defaults) {
            loadAccounts(accountsNode, file: path, defaults: defaults)
        }
    }

    /// Loads the file at `index` of `reader`, reading its accounts while it is parsed when the
    /// reader streams them.
    mutating func loadFile(_ path: String, from reader: FileReader, index: Int) {
        guard let stream = reader.stream(index), case .streaming(let before, let section) = stream.start() else {
            loadFile(path, parsed: reader.take(index))
            return
        }
        // What is read here is kept only if the finished file is what was read: after a YAML
        // error further on, or a `defaults:` after `accounts:`, the file is parsed again and
        // loaded from its tree, as without streaming.
        let checkpoint = Checkpoint(self)
        configuration.files.append(path)
        var defaults = AccountLayer()
        _ = loadRootEntries(before[...], file: path, defaults: &defaults)
        // The items of the second part of a split sequence, read on a thread of their own as
        // they are parsed, and taken after the first part's if the parser spliced them.
        let base = AccountRun(session: withoutAccountLists(), checking: earlyCheckerForLoadedGlobals())
        let sectionRun = section.flatMap { items in
            ThreadResult(named: "pushrep-section") { [defaults] in
                var run = base
                items.forEachBatch { batch, _ in run.read(batch, file: path, defaults: defaults) }
                return run
            }
        }
        // Without a thread to read them, the parser reads the part itself (it would wait forever
        // for the part's items to be taken).
        if sectionRun == nil { section?.cancel() }
        var streamed = 0
        // Items as they come (the parser waits once a thousand are ready), and what remains
        // when the parser is done: on every processor, even when fewer than for other runs.
        stream.forEachBatch { items, isLast in
            streamed += items.count
            readAccounts(items[...], file: path, defaults: defaults,
                         runs: isLast ? Processors.runs(accounts: items.count, perRun: 250) : nil)
        }
        let spliced = sectionRun != nil && stream.isSpliced
        if let sectionRun, spliced {
            var run = sectionRun.take()
            streamed += run.accounts.count
            // The file's last run: room for exactly it. Doubled, the list of 100,000 richer
            // accounts grew by 4.7 MB while the file's bytes were still held, at the peak of
            // `run --once` (2.4 MB more resident, `/usr/bin/time`).
            if keepsEveryAccount { configuration.accounts.reserveCapacity(configuration.accounts.count + run.accounts.count) }
            take(&run)
        } else {
            // Not spliced: its items are not wanted, and the thread reading them can stop.
            section?.cancel()
        }
        let parsed = reader.take(index)
        guard case .success(let contents) = parsed.contents, case .mapping(let root)? = contents.parsed.root,
              root.entries.count > before.count,
              zip(root.entries, before).allSatisfy({ $0.key.value == $1.key.value }),
              root.entries[before.count].key.value == TopLevelKey.accounts.rawValue,
              contents.parsed.streamedItemCount == streamed,
              !root.entries[(before.count + 1)...].contains(where: { $0.key.value == TopLevelKey.defaults.rawValue })
        else {
            guard sink == nil else {
                // Its accounts were handed over: they cannot be read again. The file was read
                // from its tree in the load before, or it would not be streamed.
                diagnostics.error("the file changed while it was read; read it again", file: path)
                return
            }
            checkpoint.restore(&self)
            restoredFiles.append(path)
            // The tree lacks the streamed items: a file that has them is parsed again.
            let whole = if case .success(let contents) = parsed.contents, contents.parsed.root != nil,
                           contents.parsed.streamedItemCount != nil {
                ParsedFile(reparsing: contents)
            } else {
                parsed
            }
            loadFile(path, parsed: whole)
            return
        }
        // Its YAML errors and source, as for any file taken (the root is a mapping here).
        _ = take(parsed, path: path, what: "configuration file")
        _ = loadRootEntries(root.entries[(before.count + 1)...], file: path, defaults: &defaults)
        streamedFiles += 1
        if spliced { splitFiles += 1 }
    }

    /// What a session was before a file was streamed into it, to go back to: a copy of the
    /// session without its long lists (accounts, their ids, diagnostics, service references,
    /// early passes),
    /// which only grow while a file loads and are kept as lengths. Copies of them would make
    /// every streamed file copy everything loaded before it. Templates read for the first time
    /// report their problems then, so the template cache goes back too.
    struct Checkpoint {
        private let saved: LoadSession
        private let accounts: Int
        private let accountIDs: Int
        private let diagnostics: Int
        private let serviceReferences: Int
        private let passedEarly: Int

        init(_ session: LoadSession) {
            // Emptied in the copy, so the session's own lists stay unshared and grow in place.
            saved = session.withoutAccountLists()
            accounts = session.configuration.accounts.count
            accountIDs = session.accountIDs.count
            diagnostics = session.diagnostics.all.count
            serviceReferences = session.accountServiceReferences.count
            passedEarly = session.passedEarly.count
        }

        /// Goes back to the checkpoint.
        func restore(_ session: inout LoadSession) {
            var restored = saved
            swap(&restored.configuration.accounts, &session.configuration.accounts)
            swap(&restored.accountIDs, &session.accountIDs)
            swap(&restored.diagnostics, &session.diagnostics)
            swap(&restored.accountServiceReferences, &session.accountServiceReferences)
            swap(&restored.passedEarly, &session.passedEarly)
            // Every id taken since was taken by an account of this file, kept or left out.
            restored.accountIDs.removeClaims(after: accountIDs)
            restored.configuration.accounts.removeSubrange(accounts...)
            restored.diagnostics.removeAll(after: diagnostics)
            restored.accountServiceReferences.removeSubrange(serviceReferences...)
            restored.passedEarly.removeSubrange(passedEarly...)
            session = restored
        }
    }

    /// This session without the lists that grow with every account read (accounts, their ids,
    /// diagnostics, service references, early passes), which a checkpoint keeps as lengths and
    /// an ``AccountRun`` starts without.
    func withoutAccountLists() -> LoadSession {
        var copy = self
        copy.configuration.accounts = []
        copy.accountIDs = AccountIDClaims()
        copy.diagnostics = DiagnosticList()
        copy.accountServiceReferences = []
        copy.passedEarly = []
        copy.sink = nil
        return copy
    }

    /// Loads top-level entries, except the value of `accounts:`, which it returns; a
    /// `defaults:` goes to `defaults`.
    mutating func loadRootEntries(_ entries: ArraySlice<YAMLMapping.Entry>, file path: String,
                                  defaults: inout AccountLayer) -> YAMLNode? {
        var accountsNode: YAMLNode?
        for pair in entries {
            let (key, value) = (pair.key, pair.value)
            guard let topKey = TopLevelKey(rawValue: key.value) else {
                diagnostics.error(unknownKey(key.value, among: TopLevelKey.allCases.map(\.rawValue), context: "at the top level"),
                                  file: path, at: key.start)
                continue
            }
            switch topKey {
            case .agent: loadAgent(value, file: path)
            case .globals: loadGlobals(value, file: path)
            case .defaults:
                if let layer = accountLayer(value, file: path, what: "defaults", account: nil) { defaults = layer }
            case .accounts: accountsNode = value
            case .services: loadServices(value, file: path)
            }
        }
        return accountsNode
    }

    // MARK: Finishing

    mutating func finish() {
        for reference in accountServiceReferences where configuration.services[reference.service] == nil {
            diagnostics.error(unknown("service", reference.service, among: Array(configuration.services.keys))
                              + (configuration.services.isEmpty ? "; declare it under the top-level services: key" : ""),
                              file: reference.file, at: reference.position, account: reference.account)
        }
        if configuration.accounts.isEmpty && configuration.accountsLeftOut.count == 0 && sink == nil && !diagnostics.hasErrors {
            diagnostics.warning("no account is configured, so there is nothing to report",
                                file: configuration.files.first ?? "configuration")
        }
    }

    // MARK: Helpers

    mutating func mapping(_ node: YAMLNode, file: String, what: String) -> YAMLMapping? {
        if case .mapping(let mapping) = node { return mapping }
        if case .scalar(let scalar) = node, scalar.value.isEmpty, scalar.style == .plain { return YAMLMapping(entries: [], start: scalar.start) }
        diagnostics.error("\(what) must be a mapping of keys, not \(node.kindDescription)", file: file, at: node.start)
        return nil
    }

    /// The text of an agent setting `what`: a single untagged value.
    mutating func scalarText(_ node: YAMLNode, file: String, what: String) -> String? {
        guard case .scalar(let scalar) = node else {
            diagnostics.error("\(what) must be a single value, not \(node.kindDescription)", file: file, at: node.start)
            return nil
        }
        // Agent settings are not secret (they are printed in messages), so a secret's tag has no
        // place here; a value read as the tag's name instead would be worse.
        if let tag = scalar.tag, tag != "!", !tag.hasPrefix("!!"), !tag.hasPrefix("tag:yaml.org,2002:") {
            diagnostics.error("\(what) cannot be tagged \(tag): !env, !file and !credential mark the secrets of accounts, "
                              + "globals and services, and agent settings are not secret; write the value itself",
                              file: file, at: scalar.start)
            return nil
        }
        return scalar.value
    }

    /// A duration; `.some(nil)` for `off` where allowed.
    mutating func duration(_ node: YAMLNode, file: String, what: String, allowOff: Bool) -> Duration?? {
        guard let text = scalarText(node, file: file, what: what) else { return nil }
        if allowOff && text == "off" { return .some(nil) }
        // Zero is refused as the backends' own durations refuse it: a zero timeout gives up on
        // every request at once, a zero interval or retry delay sends without pause.
        guard let d = DurationParser.parse(text), d > .zero else {
            diagnostics.error("\(what) must be a duration such as 500ms, 5s, 15m, 24h or 1h30m\(allowOff ? ", or off" : ""), not '\(text)'",
                              file: file, at: node.start)
            return nil
        }
        return .some(d)
    }

    mutating func positiveInt(_ node: YAMLNode, file: String, what: String) -> Int? {
        guard let text = scalarText(node, file: file, what: what) else { return nil }
        guard let n = Int(text), n >= 1, n <= 100_000 else {
            diagnostics.error("\(what) must be a whole number from 1 to 100000, not '\(text)'", file: file, at: node.start)
            return nil
        }
        return n
    }

    func unknownKey(_ key: String, among known: [String], context: String) -> String {
        var message = "unknown key '\(key)' \(context)"
        if let nearest = NameSuggester.nearest(to: key, among: known) { message += "; did you mean '\(nearest)'?" }
        else { message += " (known: \(known.joined(separator: ", ")))" }
        return message
    }

    func unknown(_ what: String, _ name: String, among known: [String]) -> String {
        var message = "unknown \(what) '\(name)'"
        if let nearest = NameSuggester.nearest(to: name, among: known) { message += "; did you mean '\(nearest)'?" }
        return message
    }

}
