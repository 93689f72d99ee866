import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// What loading produced: the merged configuration (usable only without errors) and every diagnostic.
public struct LoadResult: Sendable {
    public var configuration: Configuration
    public var diagnostics: DiagnosticList
    /// Source texts of the files read (configs and templates), to place template problems.
    public var sources: [String: SourceText]
    /// The configuration files whose accounts were read while they were parsed (for tests).
    var streamedFiles = 0
    /// The configuration files whose accounts were read while they were parsed, then read again
    /// from the file's whole tree (a `defaults:` after `accounts:`, an error further on): a load
    /// that hands its accounts over as it reads them must read these from the tree at once
    /// (``ConfigurationLoader/load(paths:unstreamed:handing:)``).
    public var restoredFiles: [String] = []
    /// Of those, the files whose accounts were parsed in two parts at once (for tests).
    var splitFiles = 0
    /// With ``ConfigurationLoader/earlyChecker`` set, for each account of
    /// `configuration.accounts`, whether it was checked while it loaded and found to have no
    /// problem (the full check then leaves those out); else nil.
    public var passedEarly: [Bool]?
}

/// Checks accounts while they load (`validate`), for a backend that can tell whether an
/// account has no problem without the rest of the configuration.
///
/// Made for the configuration loaded so far (globals, services; no accounts). An account it
/// passes must pass with the whole configuration too.
public protocol EarlyAccountChecker: Sendable {
    /// Whether checking `account` finds no problem at all, when that is known without the rest
    /// of the configuration; false when it finds one, or only the full check can tell.
    mutating func passesWithoutRendering(_ account: Account) -> Bool
}

/// Loads YAML configuration files and directories (SPEC §2) into a ``Configuration``.
///
/// Every problem becomes a ``Diagnostic`` with file, line and column; loading goes on after a
/// problem so one run shows them all, and one bad file never hides another's diagnostics.
public struct ConfigurationLoader: Sendable {
    public var environment: LoaderEnvironment
    /// Into how many runs each file's accounts are cut to be read at once; nil lets the number
    /// of accounts and processors decide (tests compare other numbers with 1).
    var accountRuns: Int?
    /// How many files are parsed ahead on a thread of their own, which also streams each file's
    /// accounts to the loader while it is parsed; 0 parses each file when it is loaded. nil:
    /// 2 with several processors, else 0 (tests set it to compare).
    var readAhead: Int?
    /// From how many bytes on a file's `accounts:` may be parsed by two threads at once (with a
    /// reading thread; see ``SplitFeed``). nil: 1 MiB, about 2,500 accounts; `Int.max`: never.
    public var splitAbove: Int?
    /// From how many bytes on a regular configuration file is read in chunks as it is parsed
    /// (``InputWindow``), instead of whole, and never split: nil, never. For a load that keeps
    /// few accounts (`preview`), whose memory would otherwise grow with the largest file.
    public var windowAbove: Int?
    /// When set, each account is also checked as it is read, by a checker made with the
    /// configuration loaded so far (its globals; without its accounts); an account found
    /// without a problem is marked in ``LoadResult/passedEarly``. The checking then overlaps
    /// the parsing.
    public var earlyChecker: (@Sendable (Configuration) -> any EarlyAccountChecker)?
    /// With ``earlyChecker``: an account it passes, and that names no service (whose checks
    /// look at every account naming it), is not kept in `configuration.accounts` but counted
    /// in ``Configuration/accountsLeftOut``. For `validate`, which then has nothing left to do
    /// with it: a million accounts would otherwise stay in memory to the end (2 KB each).
    public var leavesOutPassedAccounts = false
    /// Whether each configuration file's bytes are let go once it is parsed, to be read again
    /// from the file when a diagnostic needs them (``SourceText/releaseBytes()``): what a load
    /// holds is then not the files themselves (17 MB for 100,000 accounts, 391 MB for a million).
    public var releasesSourceBytes = false

    public init(environment: LoaderEnvironment = .current()) {
        self.environment = environment
    }

    /// Whether the files `paths` name can be read again as they were: each is a regular file, or
    /// a directory of them (not a pipe such as `--config <(…)`, read once). A load that leaves
    /// accounts out and reads the files again later (`preview`) needs it.
    public static func canReadAgain(paths: [String]) -> Bool {
        var session = LoadSession(environment: LoaderEnvironment(variables: [:], templateSearchPath: []))
        return paths.allSatisfy { path in
            session.files(at: path).allSatisfy { file in
                if case .success(.other) = FileSystem.kind(of: file) { false } else { true }
            }
        }
    }

    /// Loads every file named by `paths` (files, or directories of `*.yaml` and `*.yml`).
    public func load(paths: [String]) -> LoadResult {
        load(paths: paths, unstreamed: [], sink: nil)
    }

    /// Loads as ``load(paths:)``, but hands each account to `take` as it is admitted, in file
    /// order, instead of keeping it in `configuration.accounts`: memory does not grow with the
    /// accounts (but for their ids, to tell duplicates). For a configuration loaded once
    /// already, to go over its accounts again (`preview`): an account handed over cannot be taken
    /// back, so the files of `unstreamed` (the earlier load's ``LoadResult/restoredFiles``) are
    /// read from their tree, and any other file that would have to be read again is an error
    /// (it changed since).
    public func load(paths: [String], unstreamed: Set<String>, handing take: @escaping (consuming Account) -> Void) -> LoadResult {
        load(paths: paths, unstreamed: unstreamed, sink: AccountSink(take: take))
    }

    private func load(paths: [String], unstreamed: Set<String>, sink: AccountSink?) -> LoadResult {
        var session = LoadSession(environment: environment)
        session.sink = sink
        session.accountRuns = accountRuns
        session.earlyCheckerFactory = earlyChecker
        session.leavesOutPassed = leavesOutPassedAccounts && earlyChecker != nil
        var files: [String] = []
        for path in paths { files += session.files(at: path) }
        files = Self.withoutRepeats(files)
        // With a second processor, files are parsed on another thread, a couple ahead of the one
        // being loaded, whose accounts are read while it is parsed.
        let reader = FileReader(paths: files, ahead: readAhead ?? (Processors.online > 1 ? 2 : 0),
                                // Handed over, a split file's second part would wait whole
                                // for the first to be read.
                                splitAbove: sink != nil ? .max : splitAbove ?? (1 << 20),
                                releasesBytes: releasesSourceBytes, unstreamed: unstreamed, windowAbove: windowAbove)
        for index in files.indices {
            session.loadFile(files[index], from: reader, index: index)
            // The reader lets each go as soon as it is parsed; this is for a file read when taken.
            if releasesSourceBytes { session.sources[files[index]]?.releaseBytes() }
        }
        reader.finish()
        session.finish()
        var result = LoadResult(configuration: session.configuration, diagnostics: session.diagnostics, sources: session.sources,
                          streamedFiles: session.streamedFiles, restoredFiles: session.restoredFiles, splitFiles: session.splitFiles)
        result.passedEarly = earlyChecker == nil ? nil : session.passedEarly
        return result
    }
}

extension ConfigurationLoader {
    /// `files` with each file once, at its first place: the same file named twice (`--config
    /// c.yaml --config ./c.yaml`, a directory and a file in it, a link to it) would otherwise
    /// load twice, and every account of it be a duplicate of itself.
    static func withoutRepeats(_ files: [String]) -> [String] {
        // By the file itself (device and inode), so that a link, hard or symbolic, is the same
        // file too; by its path when it cannot be looked at (it is then said missing once).
        var seen = Set<String>()
        return files.filter { file in
            var info = stat()
            guard stat(file, &info) == 0 else { return seen.insert("path:" + file).inserted }
            return seen.insert("file:\(info.st_dev):\(info.st_ino)").inserted
        }
    }
}

/// Where a load hands its accounts (``ConfigurationLoader/load(paths:unstreamed:handing:)``).
/// Unchecked: only the thread that runs the load calls it (sessions reading runs of accounts
/// on other threads are copies without it).
final class AccountSink: @unchecked Sendable {
    let take: (consuming Account) -> Void

    init(take: @escaping (consuming Account) -> Void) {
        self.take = take
    }
}

/// The top-level keys of a configuration file.
enum TopLevelKey: String, CaseIterable {
    case agent, globals, defaults, accounts, services
}

/// The keys of the `agent:` block.
enum AgentKey: String, CaseIterable {
    case stateDirectory, timeout, concurrency, perHostConcurrency, retry, reportInterval, tls, listen, trackingSpool
    case state, statePassword, leaseTimeout
}

/// The state of one load.
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
    private var lastLeftOutKeys: (values: AccountValueTable, names: AccountKeyNames)?

    /// The checker accounts are checked with as they are read, and the number of globals it
    /// knows: made again when a file adds globals.
    private var earlyChecker: (checker: any EarlyAccountChecker, globals: Int)?
    var configuration = Configuration()
    var diagnostics = DiagnosticList()
    var sources: [String: SourceText] = [:]
    private var agentKeyOwners: [String: (file: String, position: SourcePosition)] = [:]
    /// Where each global whose value could not be read is set: it is set all the same.
    private var unreadableGlobalPlaces: [String: (file: String, line: Int)] = [:]
    private var accountIDs = AccountIDClaims()
    private var templateCache: [String: AccountValueTable?] = [:]
    /// The `services:` of each template read, by path (SPEC §9.0 per-account values a template
    /// gives the accounts that use it).
    private var templateServiceCache: [String: [String: ServiceValues]] = [:]
    /// Where a template name beside a config folder was found, so accounts do not search again.
    private var templatePaths: [String: String] = [:]
    private var accountServiceReferences: [(service: String, file: String, position: SourcePosition, account: String)] = []
    /// What `warnIfMisspelt` found for each key name that is not one we act on (nil: no warning).
    private var keySuggestions: [String: String?] = [:]
    private var lastPath: (file: String, path: SourcePath)?

    init(environment: LoaderEnvironment) {
        self.environment = environment
        knownAccountKeys = Self.accountOwnKeys + environment.backendAccountKeys
        knownAccountKeySet = Set(knownAccountKeys)
    }

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
        guard let root = take(parsed, path: path, what: "configuration file") else { return }
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

    // MARK: agent

    mutating func claimAgentKey(_ name: String, file: String, at position: SourcePosition) -> Bool {
        if let owner = agentKeyOwners[name] {
            diagnostics.error("agent.\(name) is already set at \(owner.file):\(owner.position.line); only one file may set it",
                              file: file, at: position)
            return false
        }
        agentKeyOwners[name] = (file, position)
        return true
    }

    mutating func loadAgent(_ node: YAMLNode, file: String) {
        guard let mapping = mapping(node, file: file, what: "agent") else { return }
        for pair in mapping.entries {
            let (key, value) = (pair.key, pair.value)
            guard let agentKey = AgentKey(rawValue: key.value) else {
                diagnostics.error(unknownKey(key.value, among: AgentKey.allCases.map(\.rawValue), context: "under agent"),
                                  file: file, at: key.start)
                continue
            }
            guard claimAgentKey(key.value, file: file, at: key.start) else { continue }
            switch agentKey {
            case .stateDirectory:
                if let text = scalarText(value, file: file, what: "agent.stateDirectory") {
                    configuration.agent.stateDirectory = text
                }
            case .timeout:
                if let d = duration(value, file: file, what: "agent.timeout", allowOff: false) { configuration.agent.timeout = d! }
            case .concurrency:
                if let n = positiveInt(value, file: file, what: "agent.concurrency") { configuration.agent.concurrency = n }
            case .perHostConcurrency:
                if let n = positiveInt(value, file: file, what: "agent.perHostConcurrency") { configuration.agent.perHostConcurrency = n }
            case .reportInterval:
                if let d = duration(value, file: file, what: "agent.reportInterval", allowOff: true) { configuration.agent.reportInterval = d }
            case .retry: loadRetry(value, file: file)
            case .state:
                guard let text = scalarText(value, file: file, what: "agent.state") else { continue }
                if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
                    if Self.uriHasPassword(text) {
                        diagnostics.error("agent.state must not hold a password: give it as agent.statePassword (!credential NAME), PGPASSWORD or ~/.pgpass",
                                          file: file, at: value.start)
                    } else {
                        configuration.agent.state = text
                    }
                } else {
                    diagnostics.error("agent.state must be a postgres:// URI (for a state directory, use agent.stateDirectory), not '\(text)'",
                                      file: file, at: value.start)
                }
            case .statePassword:
                // The one agent setting that is a secret: the PostgreSQL password, from a tag.
                guard case .scalar(let scalar) = value, scalar.tag != nil else {
                    diagnostics.error("agent.statePassword must be given as !credential NAME, !file PATH or !env NAME, never written in the file",
                                      file: file, at: value.start)
                    continue
                }
                // A tag that cannot be resolved has said why.
                guard let password = resolve(scalar, key: "statePassword", isSecret: true, file: file, account: nil) else { continue }
                configuration.agent.statePassword = password.text
            case .leaseTimeout:
                if let d = duration(value, file: file, what: "agent.leaseTimeout", allowOff: false) {
                    if d! < .seconds(3) {
                        diagnostics.error("agent.leaseTimeout must be at least 3s", file: file, at: value.start)
                    } else {
                        configuration.agent.leaseTimeout = d!
                    }
                }
            case .listen:
                guard let text = scalarText(value, file: file, what: "agent.listen") else { continue }
                if let address = ListenAddress(text) {
                    configuration.agent.listen = address
                } else {
                    diagnostics.error("agent.listen must be HOST:PORT with a numeric address or localhost (127.0.0.1:9180, [::1]:9180), not '\(text)'",
                                      file: file, at: value.start)
                }
            case .trackingSpool:
                guard let text = scalarText(value, file: file, what: "agent.trackingSpool") else { continue }
                guard !text.isEmpty else {
                    diagnostics.error("agent.trackingSpool must name a directory", file: file, at: value.start)
                    continue
                }
                // Relative to the file that names it, as agent.tls.caFile is.
                configuration.agent.trackingSpool = text.hasPrefix("/") ? text : FileSystem.join(FileSystem.directory(of: file), text)
            case .tls:
                guard let tls = self.mapping(value, file: file, what: "agent.tls") else { continue }
                for pair in tls.entries {
                    let (tlsKey, tlsValue) = (pair.key, pair.value)
                    if tlsKey.value == "caFile" {
                        if let text = scalarText(tlsValue, file: file, what: "agent.tls.caFile") {
                            let path = text.hasPrefix("/") ? text : FileSystem.join(FileSystem.directory(of: file), text)
                            configuration.agent.tlsCAFile = path
                            switch FileSystem.read(path, limit: FileSystem.maximumSecretSize * 16) {
                            case .failure(let problem):
                                diagnostics.error("agent.tls.caFile: cannot read \(path): \(problem.message)", file: file, at: tlsValue.start)
                            case .success(let bytes) where !Self.holdsPEMCertificate(bytes):
                                // libcurl would refuse it only when the first https request is made.
                                diagnostics.error("agent.tls.caFile: \(path) holds no PEM certificate (a CA bundle is -----BEGIN CERTIFICATE----- blocks)",
                                                  file: file, at: tlsValue.start)
                            case .success:
                                break
                            }
                        }
                    } else {
                        diagnostics.error(unknownKey(tlsKey.value, among: ["caFile"], context: "under agent.tls"), file: file, at: tlsKey.start)
                    }
                }
            }
        }
    }

    mutating func loadRetry(_ node: YAMLNode, file: String) {
        guard let mapping = mapping(node, file: file, what: "agent.retry") else { return }
        let keys = ["initial", "multiplier", "max", "maxRetryAfter"]
        for pair in mapping.entries {
            let (key, value) = (pair.key, pair.value)
            let what = "agent.retry.\(key.value)"
            switch key.value {
            case "initial": if let d = duration(value, file: file, what: what, allowOff: false) { configuration.agent.retry.initial = d! }
            case "max": if let d = duration(value, file: file, what: what, allowOff: false) { configuration.agent.retry.max = d! }
            case "maxRetryAfter":
                if let d = duration(value, file: file, what: what, allowOff: false) { configuration.agent.retry.maxRetryAfter = d! }
            case "multiplier":
                guard let text = scalarText(value, file: file, what: what) else { continue }
                if let m = Double(text), m >= 1, m <= 100 {
                    configuration.agent.retry.multiplier = m
                } else {
                    diagnostics.error("\(what) must be a number from 1 to 100, not '\(text)'", file: file, at: value.start)
                }
            default:
                diagnostics.error(unknownKey(key.value, among: keys, context: "under agent.retry"), file: file, at: key.start)
            }
        }
        if configuration.agent.retry.initial > configuration.agent.retry.max {
            diagnostics.warning("agent.retry.initial is longer than agent.retry.max; every retry waits agent.retry.max",
                                file: file, at: mapping.start)
        }
    }

    // MARK: globals and services

    mutating func loadGlobals(_ node: YAMLNode, file: String) {
        guard let mapping = mapping(node, file: file, what: "globals") else { return }
        let reserved = Set(DeviceValues.names + BuiltinVariable.allCases.map(\.rawValue) + ["account"])
        for pair in mapping.entries {
            let (key, value) = (pair.key, pair.value)
            let name = key.value
            guard Template.isVariableName(name) else {
                diagnostics.error("global '\(name)' cannot be used as %\(name)%: a name is letters, digits and '_', not starting with a digit",
                                  file: file, at: key.start)
                continue
            }
            if reserved.contains(name) {
                diagnostics.error("global '\(name)' would hide the built-in variable of that name", file: file, at: key.start)
                continue
            }
            if let existing = configuration.globals[name].map({ ($0.origin.file, $0.origin.position.line) })
                ?? unreadableGlobalPlaces[name] {
                diagnostics.error("global '\(name)' is already set at \(existing.0):\(existing.1)", file: file, at: key.start)
                continue
            }
            guard case .scalar(let scalar) = value else {
                diagnostics.error("global '\(name)' must be a single value, not \(value.kindDescription)", file: file, at: value.start)
                continue
            }
            if let resolved = resolve(scalar, key: name, file: file, account: nil) {
                configuration.globals[name] = resolved
            } else {
                configuration.unreadableGlobals.insert(name)
                unreadableGlobalPlaces[name] = (file, key.start.line)
            }
        }
    }

    mutating func loadServices(_ node: YAMLNode, file: String) {
        guard let mapping = mapping(node, file: file, what: "services") else { return }
        for pair in mapping.entries {
            let (key, value) = (pair.key, pair.value)
            let name = key.value
            if let existing = configuration.services[name] {
                diagnostics.error("service '\(name)' is already declared at \(existing.file):\(existing.position.line)", file: file, at: key.start)
                continue
            }
            guard let entry = self.mapping(value, file: file, what: "service '\(name)'") else { continue }
            var settings: [String: ConfigValue] = [:]
            var mappings: [String: [(key: String, value: ConfigValue)]] = [:]
            var keyPositions: [String: SourcePosition] = [:]
            var typeName: String?
            var typePosition: SourcePosition?
            for pair in entry.entries {
                let (settingKey, settingValue) = (pair.key, pair.value)
                keyPositions[settingKey.value] = settingKey.start
                if settingKey.value != "type", case .mapping(let inner) = settingValue {
                    // A mapping of single values (a callback's headers): kept in file order.
                    var items: [(key: String, value: ConfigValue)] = []
                    for item in inner.entries {
                        guard case .scalar(let scalar) = item.value else {
                            diagnostics.error("'\(settingKey.value).\(item.key.value)' must be a single value, not \(item.value.kindDescription)",
                                              file: file, at: item.value.start)
                            continue
                        }
                        if let resolved = resolve(scalar, key: item.key.value, file: file, account: nil) {
                            items.append((item.key.value, resolved))
                        }
                    }
                    mappings[settingKey.value] = items
                    continue
                }
                guard case .scalar(let scalar) = settingValue else {
                    diagnostics.error("service setting '\(settingKey.value)' must be a single value, not \(settingValue.kindDescription)",
                                      file: file, at: settingValue.start)
                    continue
                }
                if settingKey.value == "type" {
                    // Which types there are is the backends' to say.
                    typeName = scalar.value
                    typePosition = scalar.start
                } else if let resolved = resolve(scalar, key: settingKey.value, file: file, account: nil) {
                    settings[settingKey.value] = resolved
                }
            }
            guard let typeName else {
                diagnostics.error("service '\(name)' needs a type", file: file, at: entry.start)
                continue
            }
            configuration.services[name] = ServiceDefinition(name: name, type: typeName, settings: settings, mappings: mappings,
                                                             keyPositions: keyPositions, file: file, position: key.start,
                                                             typePosition: typePosition)
        }
    }

    // MARK: accounts

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
        layer.values = base
        // One copy of `base` with room for this layer, instead of a copy and then a resize. An
        // alias pair `base` has both names of adds none: room for it stayed empty in every
        // account of a file whose `defaults:` give one (80 bytes each, 8 MB at 100,000).
        let aliasRoom = Self.aliasKeys.count { !(base.contains($0.first) && base.contains($0.second)) }
        layer.values.reserveCapacity(base.count + mapping.entries.count + aliasRoom)
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
                    warnIfMisspelt(entry.pointee.key, suggestion: facts.suggestion, file: file, account: account)
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
                guard let keys = template(named: use.name, file: file, at: use.scalar.start, account: account) else { continue }
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
        return layer
    }

    /// Reads a `services:` block of an account or of `defaults` into `layer`.
    private mutating func readServices(_ node: YAMLNode, into layer: inout AccountLayer, file: String, what: String,
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
        fileprivate var first = Given()
        fileprivate var second = Given()

        /// What was given under both names of one pair.
        fileprivate struct Given {
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

    private mutating func fill(_ aliases: borrowing AliasFill, in values: inout AccountValueTable, file: String, account: String?) {
        fill(aliases.first, pair: 0, in: &values, file: file, account: account)
        fill(aliases.second, pair: 1, in: &values, file: file, account: account)
    }

    private mutating func fill(_ given: borrowing AliasFill.Given, pair: Int, in values: inout AccountValueTable, file: String,
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

    private static let aliasKeys = DeviceValues.aliases.map {
        (first: AccountValueTable.PreparedKey($0.0), second: AccountValueTable.PreparedKey($0.1))
    }

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

    private static let idKey = AccountValueTable.PreparedKey("id")
    private static let usernameKey = AccountValueTable.PreparedKey("username")
    private static let enabledKey = AccountValueTable.PreparedKey("enabled")

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
    private mutating func claim(_ id: String, path: SourcePath, at position: SourcePosition) -> Bool {
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
    static let accountOwnKeys = DeviceValues.names + ["id", "username", "password", "enabled", "use", "services"]
    /// The keys a near miss of which is warned about whatever it starts with.
    private static let nearMissKeys = DeviceValues.names + ["username", "password", "enabled", "services"]

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

    /// The facts of the key names met last, and where the next key is expected among them.
    /// Accounts repeat their keys in the same order, and the parser shares each key's string:
    /// the entry after the last one found is tried first, and a string compared with the very
    /// same string is equal at once. Other keys are found by their digest.
    private var recentKeyFacts: [KeyFacts] = []
    private var nextKeyFacts = 0
    private static let recentKeyCount = 32

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

    private mutating func suggestion(forKey name: String) -> String? {
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

    // MARK: use: templates

    mutating func templateNames(_ node: YAMLNode, file: String) -> [(name: String, scalar: YAMLScalar)] {
        switch node {
        case .scalar(let scalar): return [(scalar.value, scalar)]
        case .sequence(let sequence):
            return sequence.items.compactMap { item in
                if case .scalar(let scalar) = item { return (scalar.value, scalar) }
                diagnostics.error("use: takes template names, not \(item.kindDescription)", file: file, at: item.start)
                return nil
            }
        case .mapping(let mapping):
            diagnostics.error("use: takes a template name or a list of them, not a mapping", file: file, at: mapping.start)
            return []
        }
    }

    /// The keys of the template `name`, found beside the config file or on the search path.
    /// The key under which the template `name` written in `file` is looked up.
    func templateLookup(_ name: String, file: String) -> String {
        FileSystem.join(FileSystem.directory(of: file), "templates") + "\u{0}" + name
    }

    mutating func template(named name: String, file: String, at position: SourcePosition, account: String?) -> AccountValueTable? {
        let folders = [FileSystem.join(FileSystem.directory(of: file), "templates")] + environment.templateSearchPath
        guard !name.isEmpty, !name.contains("/"), !name.hasPrefix(".") else {
            diagnostics.error("'\(name)' is not a template name", file: file, at: position, account: account)
            return nil
        }
        let lookup = templateLookup(name, file: file)
        if let path = templatePaths[lookup] { return templateCache[path] ?? nil }
        var candidates: [String] = []
        for folder in folders {
            for ext in [".yaml", ".yml"] {
                let path = FileSystem.join(folder, name + ext)
                if case .success(.file) = FileSystem.kind(of: path) { candidates.append(path) }
            }
        }
        guard let path = candidates.first else {
            let known = Set(folders.flatMap { folder -> [String] in
                guard case .success(let names) = FileSystem.list(folder) else { return [] }
                return names.filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }.map { String($0.prefix { $0 != "." }) }
            })
            var message = "no template named '\(name)' in \(folders.joined(separator: ", "))"
            if let nearest = NameSuggester.nearest(to: name, among: known) {
                message += "; did you mean '\(nearest)'?"
            } else if known.isEmpty {
                // No template anywhere: the shipped ones are not installed, or not on the path.
                message += "; none of these folders holds a template: run 'make install', or set PUSHREPORTER_TEMPLATES to the templates folder of the source tree"
            }
            diagnostics.error(message, file: file, at: position, account: account)
            return nil
        }
        templatePaths[lookup] = path
        if let cached = templateCache[path] { return cached }
        var keys: AccountValueTable?
        if let mapping = parse(path, what: "template") {
            var entries: [(key: String, value: ConfigValue)] = []
            for pair in mapping.entries {
                let (key, value) = (pair.key, pair.value)
                if key.value == "services" {
                    var services = AccountLayer()
                    readServices(value, into: &services, file: path, what: "template '\(name)'", account: nil)
                    templateServiceCache[path] = services.services
                    continue
                }
                guard case .scalar(let scalar) = value else {
                    diagnostics.error("template key '\(key.value)' must be a single value, not \(value.kindDescription)", file: path, at: value.start)
                    continue
                }
                if var resolved = resolve(scalar, key: key.value, file: path, account: nil) {
                    resolved.template = name
                    entries.append((key.value, resolved))
                }
            }
            var values = AccountValueTable()
            overlay(&values, with: entries, file: path, account: nil)
            keys = values
        }
        templateCache[path] = keys
        return keys
    }

    // MARK: Values and tags

    /// Whether a connection URI writes a password (`postgres://user:secret@host/db`).
    static func uriHasPassword(_ uri: String) -> Bool {
        guard let scheme = uri.firstRange(of: "://") else { return false }
        let rest = uri[scheme.upperBound...]
        guard let at = rest.firstIndex(of: "@") else { return rest.contains("password=") }
        return rest[..<at].contains(":") || rest.contains("password=")
    }

    /// The largest value one scalar may hold (SPEC §12): 1 MiB.
    static let maximumScalarSize = 1 << 20

    /// Whether a key names a secret: it contains `password`, `secret` or `apitoken`, in any case.
    static func isSecretKey(_ key: String) -> Bool {
        var key = key
        return key.withUTF8 { bytes in
            containsASCIICaseInsensitive(bytes, "password") || containsASCIICaseInsensitive(bytes, "secret")
                || containsASCIICaseInsensitive(bytes, "apitoken")
        }
    }

    /// Byte-level search for a lower-case ASCII `needle` (called for every value loaded).
    static func containsASCIICaseInsensitive(_ bytes: UnsafeBufferPointer<UInt8>, _ needle: StaticString) -> Bool {
        let count = needle.utf8CodeUnitCount
        guard bytes.count >= count else { return false }
        let pattern = needle.utf8Start
        for start in 0...(bytes.count - count) {
            var matched = true
            for i in 0..<count {
                var b = bytes[start + i]
                if b >= 0x41 && b <= 0x5A { b |= 0x20 }
                if b != pattern[i] {
                    matched = false
                    break
                }
            }
            if matched { return true }
        }
        return false
    }

    /// A scalar's value, with `!env`, `!file` and `!credential` resolved. `isSecret` is whether
    /// `key` names a secret, when already known (else ``isSecretKey(_:)`` says: globals, service
    /// settings and template keys are not account keys, whose recent facts it would push out).
    mutating func resolve(_ scalar: YAMLScalar, key: String, isSecret known: Bool? = nil, file: String,
                          account: String?) -> ConfigValue? {
        guard scalar.value.utf8.count <= Self.maximumScalarSize else {
            diagnostics.error("the value of '\(key)' is \(scalar.value.utf8.count) bytes, more than the limit of 1 MiB for one value",
                              file: file, at: scalar.start, account: account)
            return nil
        }
        guard let tag = scalar.tag, tag != "!", tag != "tag:yaml.org,2002:str" else {
            return ConfigValue(text: scalar.value, isSecret: known ?? Self.isSecretKey(key), origin: ValueOrigin(path: path(of: file), scalar: scalar))
        }
        let origin = ValueOrigin(path: path(of: file), scalar: scalar, isVerbatim: false)
        let name = scalar.value
        switch tag {
        case "!env":
            guard let value = environment.variables[name] else {
                diagnostics.error("environment variable '\(name)' is not set (needed by !env for '\(key)')", file: file, at: scalar.start, account: account)
                return nil
            }
            return ConfigValue(text: value, isSecret: true, secretName: ShellVariable.name(keeping: name), origin: origin)
        case "!file":
            let path = name.hasPrefix("/") ? name : FileSystem.join(FileSystem.directory(of: file), name)
            switch FileSystem.read(path, limit: FileSystem.maximumSecretSize) {
            case .failure(let error):
                diagnostics.error("cannot read '\(path)' for !file: \(error.message)", file: file, at: scalar.start, account: account)
                return nil
            case .success(let bytes):
                return ConfigValue(text: Self.withoutTrailingNewline(bytes), isSecret: true,
                                   secretName: ShellVariable.name(from: FileSystem.baseName(of: name)), origin: origin)
            }
        case "!credential":
            guard let directory = environment.variables["CREDENTIALS_DIRECTORY"], !directory.isEmpty else {
                diagnostics.error("!credential \(name) needs $CREDENTIALS_DIRECTORY, which systemd sets for LoadCredential=; it is not set",
                                  file: file, at: scalar.start, account: account)
                return nil
            }
            guard !name.isEmpty, !name.contains("/") else {
                diagnostics.error("'\(name)' is not a credential name", file: file, at: scalar.start, account: account)
                return nil
            }
            switch FileSystem.read(FileSystem.join(directory, name), limit: FileSystem.maximumSecretSize) {
            case .failure(let error):
                diagnostics.error("cannot read credential '\(name)' in \(directory): \(error.message)", file: file, at: scalar.start, account: account)
                return nil
            case .success(let bytes):
                return ConfigValue(text: Self.withoutTrailingNewline(bytes), isSecret: true, secretName: ShellVariable.name(from: name), origin: origin)
            }
        default:
            diagnostics.error(unknown("tag", tag, among: ["!env", "!file", "!credential"]), file: file, at: scalar.start, account: account)
            return nil
        }
    }

    /// `file` as a ``SourcePath``; the last one is kept, as the values of a file come together.
    mutating func path(of file: String) -> SourcePath {
        if let last = lastPath, last.file == file { return last.path }
        let path = SourcePath(file)
        lastPath = (file, path)
        return path
    }

    static func withoutTrailingNewline(_ bytes: [UInt8]) -> String {
        var end = bytes.count
        if end > 0, bytes[end - 1] == 0x0A { end -= 1 }
        if end > 0, bytes[end - 1] == 0x0D { end -= 1 }
        return String(decoding: bytes[0..<end], as: UTF8.self)
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
            diagnostics.error("\(what) must be a duration such as 500ms, 5s, 15m or 24h\(allowOff ? ", or off" : ""), not '\(text)'",
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

extension YAMLNode {
    var scalarValue: String? {
        if case .scalar(let scalar) = self { return scalar.value }
        return nil
    }
}

/// The variables every template can use besides the device values, globals and account keys.
public enum BuiltinVariable: String, CaseIterable, Sendable {
    /// Generated once and kept in the state directory.
    case installid
    case hostname
    /// Always `linux`.
    case platform
    /// pushreporter's version.
    case version
}
