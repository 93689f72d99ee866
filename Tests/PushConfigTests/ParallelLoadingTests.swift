import Foundation
@testable import PushConfig
@testable import PushAcrobits
import PushBackend
import PushTestSupport
import Testing
import PushTestThreads
import PushSystem

/// Large configurations are read and checked in runs of accounts on several threads, and a
/// file's accounts are read while it is parsed. The result must be that of one account after
/// another: the same accounts, and the same diagnostics (in the same order for runs; for a
/// streamed file, whose YAML errors and keys after `accounts:` are reported after its accounts,
/// the same once sorted by position, as validate prints them).
@Suite("Reading and checking in runs gives what one run gives", .blockingThreads)
struct ParallelLoadingTests {
    /// Accounts with one problem or another, spread so that the runs split them.
    static func accounts(prefix: String, count: Int) -> String {
        var text = "accounts:\n"
        for index in 0..<count {
            let id = "\(prefix)\(index)"
            text += "  - id: \(id)\n    selector: SEL\(index)\n    pushTokenOther: tok+\(index)/=\n"
            switch index % 11 {
            case 0: text += "    password: !env UNSET_\(index % 3)\n    use: broken\n"
            case 1: text += "    use: acrobits-jsn\n"
            case 2: text += "    use: acrobits-get\n    pushTokenReporterBase: https://r.example/t\n"
            case 3: text += "    use: acrobits-get\n"
            case 4: text += "    enabled: maybe\n"
            case 5: text += "    selctor: typo\n"
            case 6: text += "    services: {nowhere: {x: 1}}\n"
            case 7: text += "    pushToken: a\n"
            case 8: text += "    pushTokenReporterMethod: FETCH\n    pushTokenReporterUrl: https://h.example/%account[nokey]%\n"
            case 9: text += "    pushTokenReporterUrl: https://h.example/?p=%account[password]%\n"
            default: text += "    pushTokenReporterUrl: [not, a, scalar]\n"
            }
            if index % 5 == 0 { text += "    secret: s\(index)\n" }
            if index % 17 == 0 { text += "  - id: \(prefix)\(index / 2)\n" }
            if index % 23 == 0 { text += "  - selector: no-id\n  - just a scalar\n" }
        }
        return text
    }

    /// A template with a problem, reported once, where the first account using it is read.
    static let brokenTemplate = ("templates/broken.yaml", "pushTokenReporterContentType: [not, a, scalar]\n")

    static let files: [(String, String)] = [
        brokenTemplate,
        ("10-a.yaml", """
            defaults:
              pushTokenReporterUrl: https://h.example/r?u=%account[username]%&s=%selector%&t=%pushTokenOther%&x=%account[secret]%
            """ + "\n" + accounts(prefix: "a", count: 140)),
        ("20-b.yaml", """
            defaults:
              pushTokenReporterUrl: https://h.example/json
              pushTokenReporterPostData: '{"s": "%selector%", "t": "%pushTokenOther%"}'
              pushTokenReporterContentType: application/json
            """ + "\n" + accounts(prefix: "b", count: 90)),
    ]

    struct Outcome {
        var accounts: [String]
        var diagnostics: [String]
        /// Accounts that passed their check while they loaded.
        var passedEarly = 0
        /// Accounts that passed and were left out, and how many of them are enabled.
        var leftOut = 0
        var leftOutEnabled = 0
    }

    static func outcome(accountRuns: Int, checkingRuns: Int, readAhead: Int = 0,
                        files: [(String, String)] = files, streamed: Int? = nil, split: Int? = nil,
                        installID: String? = "i", earlyCheck: Bool = false, leaveOut: Bool = false) -> Outcome {
        let directory = TemporaryDirectory()
        for (name, text) in files { directory.write(name, text) }
        var loader = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: [RepositoryPaths.templates]))
        loader.accountRuns = accountRuns
        loader.readAhead = readAhead
        // Split whatever is long enough when a test counts splits, else never.
        loader.splitAbove = split == nil ? .max : 0
        if earlyCheck { loader.earlyChecker = RequestBuilder.earlyChecker(hostname: "h") }
        loader.leavesOutPassedAccounts = leaveOut
        let result = loader.load(paths: [directory.path])
        if let streamed { #expect(result.streamedFiles == streamed, "files streamed") }
        if let split { #expect(result.splitFiles == split, "files split") }
        if earlyCheck {
            #expect(result.passedEarly?.count == result.configuration.accounts.count, "one flag per account")
        } else {
            #expect(result.passedEarly == nil)
        }
        var diagnostics = result.diagnostics
        var builder = RequestBuilder(configuration: result.configuration, sources: result.sources, installID: installID, hostname: "h")
        builder.checkAll(into: &diagnostics, runs: checkingRuns, skipping: result.passedEarly)
        let accounts = result.configuration.accounts.map(describe)
        return Outcome(accounts: accounts,
                       diagnostics: diagnostics.all.map { $0.formatted.replacingOccurrences(of: directory.path, with: "DIR") },
                       passedEarly: (result.passedEarly?.count { $0 } ?? 0) + result.configuration.accountsLeftOut.count,
                       leftOut: result.configuration.accountsLeftOut.count, leftOutEnabled: result.configuration.accountsLeftOut.enabled)
    }

    /// An account as the comparisons see it: id, enabled, every value, services, unreadable keys.
    static func describe(_ account: Account) -> String {
        "\(account.id) \(account.isEnabled) " + account.values.keys.sorted().map { "\($0)=\(account.values[$0]!.text)" }.joined(separator: ",")
            + " services=\(account.services.keys.sorted()) unreadable=\(account.unreadableKeys.sorted())"
    }

    @Test("handing accounts over as they are read gives the accounts and diagnostics of a load that keeps them",
          arguments: [0, 2])
    func handingOver(readAhead: Int) {
        // Streamed files are read again from their tree in `awkward` (a `defaults:` last, a YAML
        // error, a merge) and `lateDefaults`.
        for (files, restored) in [(Self.files, 0), (Self.awkward, 3), (Self.checkedEarly, 0), (Self.long, 0), (Self.lateDefaults, 1)] {
            let directory = TemporaryDirectory()
            for (name, text) in files { directory.write(name, text) }
            var loader = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: [RepositoryPaths.templates]))
            loader.readAhead = readAhead
            loader.splitAbove = 0
            loader.releasesSourceBytes = true
            let kept = loader.load(paths: [directory.path])
            #expect(kept.restoredFiles.count == (readAhead == 0 ? 0 : restored), "\(kept.restoredFiles)")
            var handed: [String] = []
            let second = loader.load(paths: [directory.path], unstreamed: Set(kept.restoredFiles)) { handed.append(Self.describe($0)) }
            #expect(handed == kept.configuration.accounts.map(Self.describe))
            #expect(second.configuration.accounts.isEmpty)
            #expect(second.diagnostics.all.map(\.formatted) == kept.diagnostics.all.map(\.formatted))
            #expect(second.restoredFiles.isEmpty)
        }
    }

    @Test("a file that must be read again while its accounts are handed over is an error")
    func handingOverAFileThatChanged() {
        let directory = TemporaryDirectory()
        for (name, text) in Self.lateDefaults { directory.write(name, text) }
        var loader = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: []))
        loader.readAhead = 2
        var handed = 0
        // As if it had been streamed whole the first time: it is streamed, then must be read again.
        let result = loader.load(paths: [directory.path], unstreamed: []) { _ in handed += 1 }
        #expect(handed == 2)
        #expect(result.diagnostics.all.map(\.formatted).contains { $0.hasSuffix("10-late-defaults.yaml: error: the file changed while it was read; read it again") })
    }

    @Test("accounts and diagnostics, in order, whatever the number of runs", arguments: [(2, 2), (7, 3), (64, 13), (500, 500)])
    func sameAsOneRun(accountRuns: Int, checkingRuns: Int) {
        let one = Self.outcome(accountRuns: 1, checkingRuns: 1)
        // The configuration really has problems of every kind, or the comparison shows little.
        #expect(one.accounts.count > 150)
        for expected in ["already used", "neither an id nor a username", "environment variable 'UNSET_0' is not set",
                         "no template named 'acrobits-jsn'", "needs 'pushTokenReporterBase'", "enabled must be true or false",
                         "did you mean 'selector'", "unknown service 'nowhere'", "two names of one value",
                         "must be GET, POST", "no account has a key 'nokey'", "must be a single value",
                         "an account must be a mapping", "the account has no key 'secret'",
                         "templates/broken.yaml:1:31: error: template key 'pushTokenReporterContentType' must be a single value"] {
            #expect(one.diagnostics.contains { $0.contains(expected) }, "no diagnostic says \(expected)")
        }
        let many = Self.outcome(accountRuns: accountRuns, checkingRuns: checkingRuns)
        #expect(many.accounts == one.accounts)
        #expect(many.diagnostics == one.diagnostics)
    }

    /// Files whose accounts cannot be kept as streamed, or not all: the loader must notice.
    static let awkward: [(String, String)] = [
        brokenTemplate,
        // `defaults:` after `accounts:` applies to the accounts before it.
        ("10-defaults-last.yaml", accounts(prefix: "d", count: 30) + """
            defaults:
              pushTokenReporterUrl: https://late.example/r?s=%selector%
            """),
        // A syntax error after some accounts: the file shows only that error.
        ("20-broken.yaml", accounts(prefix: "e", count: 30) + "  - id: [unclosed\n"),
        // A merge after the accounts brings a `defaults:` in.
        ("30-merged.yaml", accounts(prefix: "m", count: 20) + """
            <<: {defaults: {pushTokenReporterUrl: 'https://merged.example/%selector%'}}
            """),
        // A second `accounts:` is dropped as a duplicate; keys after the accounts still count.
        ("40-twice.yaml", """
            globals: {g: 1}
            """ + "\n" + accounts(prefix: "t", count: 20) + """
            services: {}
            unknownKey: 1
            accounts:
              - id: never
            """),
        // A tagged sequence is not streamed.
        ("50-tagged.yaml", accounts(prefix: "x", count: 12).replacingOccurrences(of: "accounts:\n", with: "accounts: !!seq\n")),
        // The common case, with the defaults first.
        ("60-plain.yaml", """
            defaults:
              pushTokenReporterUrl: https://plain.example/%selector%
            """ + "\n" + accounts(prefix: "p", count: 40)),
    ]

    @Test("reading accounts while the file is parsed gives what reading them from the tree gives",
          arguments: [1, 3])
    func streamingIsInvisible(accountRuns: Int) {
        for files in [Self.files, Self.awkward] {
            let fromTree = Self.outcome(accountRuns: 1, checkingRuns: 1, readAhead: 0, files: files, streamed: 0)
            // Streamed: the two plain files, or in the awkward set the ones with a duplicate
            // `accounts:` and the plain one (the others are loaded again from their tree).
            let streamed = Self.outcome(accountRuns: accountRuns, checkingRuns: 1, readAhead: 2, files: files,
                                        streamed: 2)
            #expect(streamed.accounts == fromTree.accounts)
            // Diagnostics of a streamed file come in another order; sorted, they are the same.
            #expect(streamed.diagnostics.sorted() == fromTree.diagnostics.sorted())
        }
        let awkward = Self.outcome(accountRuns: 1, checkingRuns: 1, readAhead: 2, files: Self.awkward)
        #expect(awkward.accounts.contains { $0.hasPrefix("d0 ") && $0.contains("late.example") })
        #expect(awkward.accounts.contains { $0.hasPrefix("m1 ") && $0.contains("merged.example") })
        #expect(!awkward.accounts.contains { $0.hasPrefix("e0 ") })
        #expect(awkward.diagnostics.contains { $0.contains("20-broken.yaml") && $0.contains("YAML syntax error") })
        #expect(awkward.diagnostics.contains { $0.contains("duplicate key 'accounts'") })
        #expect(awkward.diagnostics.contains { $0.contains("40-twice.yaml") && $0.contains("'unknownKey'") })
        #expect(awkward.diagnostics.count { $0.contains("templates/broken.yaml") } == 1)
    }

    /// Files long enough to split (libyaml reads 16 KB at once, and the split line is in the middle
    /// of what is left): problems of every kind in both parts.
    static let long: [(String, String)] = [
        brokenTemplate,
        ("10-a.yaml", """
            defaults:
              pushTokenReporterUrl: https://h.example/r?u=%account[username]%&s=%selector%&t=%pushTokenOther%&x=%account[secret]%
            """ + "\n" + accounts(prefix: "a", count: 700) + "services:\n  s: {type: acrobits}\n"),
        // Ids of the first file repeated in both parts of this one.
        ("20-b.yaml", accounts(prefix: "b", count: 400) + accounts(prefix: "a", count: 300).dropFirst("accounts:\n".count)),
    ]

    @Test("parsing a long file's accounts in two parts gives what reading them from the tree gives",
          arguments: [(1, 0), (1, 2), (3, 2)])
    func splittingIsInvisible(accountRuns: Int, checkingRuns: Int) {
        let fromTree = Self.outcome(accountRuns: 1, checkingRuns: 1, readAhead: 0, files: Self.long, streamed: 0)
        #expect(fromTree.accounts.count > 1_000)
        #expect(fromTree.diagnostics.count { $0.contains("already used") } > 300)
        let split = Self.outcome(accountRuns: accountRuns, checkingRuns: max(1, checkingRuns), readAhead: 2, files: Self.long,
                                 streamed: 2, split: 2, installID: checkingRuns == 0 ? "i" : nil, earlyCheck: checkingRuns > 0)
        let reference = checkingRuns == 0 ? fromTree
            : Self.outcome(accountRuns: 1, checkingRuns: 1, readAhead: 0, files: Self.long, installID: nil)
        #expect(split.accounts == reference.accounts)
        #expect(split.diagnostics.sorted() == reference.diagnostics.sorted())
    }

    /// Accounts that pass, beside ones whose check needs the whole configuration or rendering.
    static let checkedEarly: [(String, String)] = [
        // %g% is a global of a later file: unknown while this file loads.
        ("10-later-global.yaml", """
            defaults:
              pushTokenReporterUrl: https://g.example/%g%/?s=%selector%
            accounts:
              - id: g1
                selector: S1
              - id: g2
                selector: S2
            """),
        ("20-globals.yaml", """
            globals: {g: gee}
            defaults:
              pushTokenReporterUrl: https://h.example/?s=%selector%&v=%g%
              pushTokenReporterCustomHeaders: |
                X-Note: %account[note]%
            """ + "\n" + accounts(prefix: "h", count: 40).replacingOccurrences(of: "pushTokenOther: ", with: "note: n\n    pushTokenOther: ")
            + "  - id: newline\n    selector: S\n    note: \"two\\nlines\"\n"),
        ("30-xml.yaml", """
            defaults:
              pushTokenReporterUrl: https://x.example/
              pushTokenReporterContentType: application/xml
              pushTokenReporterPostData: <t>%selector%</t>
            accounts:
              - id: x1
                selector: S1
              - id: x2
                selector: "bad\\u0001"
            """),
    ]

    /// A global that cannot be read, then given by a later file (with a line break): the
    /// account that names it passes nothing early.
    static let unreadableGlobal: [(String, String)] = [
        // A global that cannot be read, then given by a later file (with a line break).
        ("05-unset-global.yaml", """
            globals: {tok: !env UNSET_TOK}
            accounts:
              - id: u1
                selector: S1
                pushTokenReporterUrl: https://u.example/
                pushTokenReporterCustomHeaders: "X-Tok: %tok%"
            """),
        ("06-set-global.yaml", """
            globals: {tok: "a\\nb"}
            """),
    ]

    @Test("checking accounts while they load, then only the others, gives what checking all gives",
          arguments: [(1, 0), (3, 0), (1, 2), (3, 2)])
    func earlyChecksAreInvisible(accountRuns: Int, readAhead: Int) {
        for files in [Self.files, Self.awkward, Self.checkedEarly, Self.unreadableGlobal] {
            let all = Self.outcome(accountRuns: accountRuns, checkingRuns: 1, readAhead: readAhead, files: files, installID: nil)
            let early = Self.outcome(accountRuns: accountRuns, checkingRuns: 2, readAhead: readAhead, files: files,
                                     installID: nil, earlyCheck: true)
            #expect(early.accounts == all.accounts)
            #expect(early.diagnostics == all.diagnostics)
        }
        let early = Self.outcome(accountRuns: accountRuns, checkingRuns: 1, readAhead: readAhead, files: Self.checkedEarly,
                                 installID: nil, earlyCheck: true)
        // Passed: the clean accounts of the second file (cases 3, 9 and 10 of eleven have no problem
        // of their own), not g1 and g2 (an unknown global then), nor the XML accounts (rendered to tell).
        #expect(early.passedEarly > 0)
        #expect(early.passedEarly < early.accounts.count - 4)
        #expect(early.diagnostics.contains { $0.contains("[account newline]") && $0.contains("line feed") })
        #expect(early.diagnostics.contains { $0.contains("[account x2]") })
        #expect(!early.diagnostics.contains { $0.contains("10-later-global.yaml") })
    }

    /// An account that passes has a key another account names but lacks: the problem is worded
    /// by whether some account has the key, left out or not.
    static let keyWording: [(String, String)] = [
        ("10-keys.yaml", """
            defaults:
              pushTokenReporterUrl: https://k.example/?s=%selector%
            accounts:
              - id: k1
                selector: S1
                rare: r
              - id: k2
                selector: S2
                enabled: false
              - id: k3
                selector: S3
                pushTokenReporterUrl: https://k.example/?r=%account[rare]%
            """),
    ]

    /// Accounts that pass while the file streams, which is then loaded again from its tree (a
    /// `defaults:` after `accounts:`): their ids are not taken twice.
    static let lateDefaults: [(String, String)] = [
        ("10-late-defaults.yaml", """
            accounts:
              - id: r1
                selector: S1
                pushTokenReporterUrl: https://r.example/?s=%selector%
              - id: r2
                selector: S2
                pushTokenReporterUrl: https://r.example/?s=%selector%
            defaults:
              pushTokenReporterContentType: text/plain
            """),
    ]

    @Test("leaving out the accounts that pass while they load gives what checking all gives",
          arguments: [(1, 0), (3, 0), (1, 2), (3, 2)])
    func leavingOutIsInvisible(accountRuns: Int, readAhead: Int) {
        // No account passes early beside a global that could not be read. In `long`, those whose
        // only problem is a `use:` template that cannot be read pass: loading said it, and the
        // checks have nothing to add (they no longer say the account lacks a URL).
        for (files, passes) in [(Self.files, true), (Self.awkward, true), (Self.checkedEarly, true),
                                (Self.unreadableGlobal, false), (Self.keyWording, true), (Self.long, true),
                                (Self.lateDefaults, true)] {
            let all = Self.outcome(accountRuns: accountRuns, checkingRuns: 1, readAhead: readAhead, files: files, installID: nil)
            let kept = Self.outcome(accountRuns: accountRuns, checkingRuns: 2, readAhead: readAhead, files: files,
                                    installID: nil, earlyCheck: true)
            let leftOut = Self.outcome(accountRuns: accountRuns, checkingRuns: 2, readAhead: readAhead, files: files,
                                       installID: nil, earlyCheck: true, leaveOut: true)
            #expect(leftOut.diagnostics == all.diagnostics)
            #expect(leftOut.passedEarly == kept.passedEarly)
            // What is kept is what passed not, or names a service: the others, in their order.
            #expect((leftOut.leftOut > 0) == passes, "\(files.map(\.0))")
            #expect(leftOut.accounts.count + leftOut.leftOut == all.accounts.count)
            #expect(leftOut.accounts.allSatisfy(all.accounts.contains))
            #expect(leftOut.accounts == all.accounts.filter(leftOut.accounts.contains))
            let isEnabled = { (account: String) in account.split(separator: " ")[1] == "true" }
            #expect(leftOut.accounts.count(where: isEnabled) + leftOut.leftOutEnabled == all.accounts.count(where: isEnabled))
        }
        let wording = Self.outcome(accountRuns: accountRuns, checkingRuns: 1, readAhead: readAhead, files: Self.keyWording,
                                   installID: nil, earlyCheck: true, leaveOut: true)
        #expect(wording.leftOut == 2)
        #expect(wording.leftOutEnabled == 1)
        #expect(wording.diagnostics.contains { $0.contains("[account k3]") && $0.contains("the account has no key 'rare'") })
    }

    @Test("a copy of a file has its ids reported as used, whether its accounts are left out or not; the same file twice is read once")
    func fileGivenTwice() {
        let directory = TemporaryDirectory()
        let path = directory.write("10-late-defaults.yaml", Self.lateDefaults[0].1)
        let copy = directory.write("11-copy.yaml", Self.lateDefaults[0].1)
        func diagnostics(_ paths: [String], leaveOut: Bool) -> [String] {
            var loader = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: []))
            loader.readAhead = 2
            loader.earlyChecker = RequestBuilder.earlyChecker(hostname: "h")
            loader.leavesOutPassedAccounts = leaveOut
            return loader.load(paths: paths).diagnostics.all.map(\.formatted)
        }
        let kept = diagnostics([path, copy], leaveOut: false)
        #expect(kept.count { $0.contains("is already used") } == 2)
        #expect(diagnostics([path, copy], leaveOut: true) == kept)
        #expect(!diagnostics([path, path], leaveOut: false).contains { $0.contains("is already used") })
        #expect(!diagnostics([path, directory.path + "/./10-late-defaults.yaml"], leaveOut: true).contains { $0.contains("is already used") })
        // A hard link is the same file too.
        let linked = directory.path + "/12-linked.yaml"
        #expect(link(path, linked) == 0)
        #expect(!diagnostics([path, linked], leaveOut: false).contains { $0.contains("is already used") })
    }

    /// A file long enough to split, of accounts that pass but a few, with ids repeated in both
    /// parts and keys named by accounts that lack them.
    static let longClean: [(String, String)] = {
        var text = """
            defaults:
              pushTokenReporterUrl: https://c.example/?s=%selector%&t=%pushTokenOther%
            accounts:

            """
        for index in 0..<1_600 {
            text += "  - id: c\(index)\n    selector: S\(index)\n    pushTokenOther: t\(index)\n"
            if index % 97 == 0 { text += "    enabled: false\n" }
            if index % 101 == 0 { text += "    rare: r\(index)\n" }
            if index % 211 == 0 { text += "    pushTokenReporterUrl: https://c.example/%account[rare]%\n" }
            if index % 113 == 0 { text += "  - id: c\(index / 3)\n    selector: again\n" }
        }
        return [("10-clean.yaml", text)]
    }()

    @Test("leaving out accounts while a long file is parsed in two parts gives what checking all gives")
    func leavingOutInTwoParts() {
        let all = Self.outcome(accountRuns: 1, checkingRuns: 1, readAhead: 0, files: Self.longClean, installID: nil)
        let leftOut = Self.outcome(accountRuns: 1, checkingRuns: 1, readAhead: 2, files: Self.longClean, streamed: 1, split: 1,
                                   installID: nil, earlyCheck: true, leaveOut: true)
        #expect(all.diagnostics.count { $0.contains("already used") } > 10)
        #expect(all.diagnostics.contains { $0.contains("the account has no key 'rare'") })
        #expect(leftOut.diagnostics.sorted() == all.diagnostics.sorted())
        #expect(leftOut.leftOut > 1_500)
        #expect(leftOut.accounts.count + leftOut.leftOut == all.accounts.count)
        #expect(leftOut.accounts.allSatisfy(all.accounts.contains))
        let isEnabled = { (account: String) in account.split(separator: " ")[1] == "true" }
        #expect(leftOut.accounts.count(where: isEnabled) + leftOut.leftOutEnabled == all.accounts.count(where: isEnabled))
    }

    @Test("an installation id with a line break gets every account checked, though they passed while loading")
    func installIDWithLineBreak() {
        let files = [("10-install.yaml", """
            defaults:
              pushTokenReporterUrl: https://h.example/?s=%selector%
              pushTokenReporterCustomHeaders: "X-Install: %installid%"
            accounts:
              - id: i1
                selector: S1
            """)]
        let early = Self.outcome(accountRuns: 1, checkingRuns: 1, readAhead: 2, files: files, installID: "a\nb", earlyCheck: true)
        #expect(early.passedEarly == 1)
        let all = Self.outcome(accountRuns: 1, checkingRuns: 1, readAhead: 2, files: files, installID: "a\nb")
        #expect(all.diagnostics.count == 1)
        #expect(early.diagnostics == all.diagnostics)
        // With an id a header can hold, the account is not checked again.
        #expect(Self.outcome(accountRuns: 1, checkingRuns: 1, readAhead: 2, files: files, installID: "ab", earlyCheck: true)
            .diagnostics.isEmpty)
    }

    @Test("runs are used only with several processors and thousands of accounts")
    func runsNeedWork() {
        #expect(Processors.runs(accounts: 3_999) == 1)
        let processors = Processors.online
        #expect(Processors.runs(accounts: 100_000) == (processors > 1 ? min(processors * 16, 100) : 1))
        #expect(Processors.runs(accounts: 8_000) == (processors > 1 ? min(processors * 16, 8) : 1))
    }
}
