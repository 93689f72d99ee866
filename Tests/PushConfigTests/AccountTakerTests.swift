@testable import PushConfig
import Testing
import PushTestThreads

/// Planning takes each account out of the list once it is planned (``AccountTaker``).
@Suite(.blockingThreads) struct AccountTakerTests {
    static func account(_ id: String) -> Account {
        var values = AccountValueTable()
        values["username"] = ConfigValue(text: id, origin: ValueOrigin(file: "c.yaml", position: SourcePosition(line: 1, column: 1)))
        return Account(id: id, values: values, file: "c.yaml", position: SourcePosition(line: 1, column: 1))
    }

    @Test("each account comes out whole, and leaves an empty, disabled one in its place")
    func takesAndLeavesNothing() {
        var accounts = (0..<5).map { Self.account("a\($0)") }
        let taken = accounts.withUnsafeMutableBufferPointer { buffer in
            let taker = AccountTaker(buffer)
            #expect(taker.count == 5)
            return [3, 0, 4].map { taker.take($0) }
        }
        #expect(taken.map(\.id) == ["a3", "a0", "a4"])
        #expect(taken.map { $0["username"] } == ["a3", "a0", "a4"])
        #expect(accounts.map(\.id) == ["", "a1", "a2", "", ""])
        for index in [0, 3, 4] {
            #expect(!accounts[index].isEnabled && accounts[index].values.isEmpty && accounts[index].services.isEmpty)
        }
        #expect(accounts[1]["username"] == "a1")
    }

    @Test("taking the accounts out of a configuration keeps their number and keys for the wording of a missing key")
    func takeAccountsKeepsWhatIsKnown() {
        var configuration = Configuration()
        var disabled = Self.account("b")
        disabled.isEnabled = false
        disabled.values["note"] = ConfigValue(text: "n", origin: ValueOrigin(file: "c.yaml", position: SourcePosition(line: 2, column: 1)))
        disabled.unreadableKeys = ["secret"]
        configuration.accounts = [Self.account("a"), disabled, Self.account("c")]
        let taken = configuration.takeAccounts()
        #expect(taken.map(\.id) == ["a", "b", "c"])
        #expect(configuration.accounts.isEmpty)
        #expect(configuration.accountsLeftOut.count == 3 && configuration.accountsLeftOut.enabled == 2)
        #expect(configuration.accountsLeftOut.keys == ["username", "note", "secret"])
    }
}
