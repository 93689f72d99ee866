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
    /// The reading thread's name (`top -H`); tests give one of their own, to find it among the
    /// threads of other loads of the same process.
    var readerThreadName = FileReader.threadName
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
                                releasesBytes: releasesSourceBytes, unstreamed: unstreamed, windowAbove: windowAbove,
                                threadName: readerThreadName)
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
    case state, statePassword, leaseTimeout, metrics, removalGuard
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
