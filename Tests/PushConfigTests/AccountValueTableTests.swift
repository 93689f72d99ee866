@testable import PushConfig
import Testing
import PushTestThreads

@Suite("AccountValueTable: an account's values by key", .blockingThreads)
struct AccountValueTableTests {
    private func value(_ text: String) -> ConfigValue {
        let scalar = YAMLScalar(value: text, start: SourcePosition(line: 1, column: 1), end: SourcePosition(line: 1, column: 1))
        return ConfigValue(text: text, origin: ValueOrigin(file: "t.yaml", scalar: scalar))
    }

    private func texts(_ table: AccountValueTable) -> [String] {
        table.map { "\($0.key)=\($0.value.text)" }
    }

    @Test("setting adds a key last, replaces it in place, and nil removes it")
    func setReplaceRemove() {
        var table = AccountValueTable()
        table["selector"] = value("s1")
        table["pushTokenReporterUrl"] = value("https://a.example/")
        table["x"] = value("1")
        table["selector"] = value("s2")
        #expect(texts(table) == ["selector=s2", "pushTokenReporterUrl=https://a.example/", "x=1"])
        table["pushTokenReporterUrl"] = nil
        table["absent"] = nil
        #expect(texts(table) == ["selector=s2", "x=1"])
        #expect(table.count == 2)
        #expect(table["pushTokenReporterUrl"] == nil)
        #expect(table["selector"]?.text == "s2")
    }

    @Test("keys whose digests are equal (same length, first and last eight bytes) stay apart")
    func equalDigests() {
        #expect(AccountValueTable.digest(of: "abcdefgh-1-ijklmnop") == AccountValueTable.digest(of: "abcdefgh-2-ijklmnop"))
        var table = AccountValueTable()
        table["abcdefgh-1-ijklmnop"] = value("one")
        table["abcdefgh-2-ijklmnop"] = value("two")
        #expect(table["abcdefgh-1-ijklmnop"]?.text == "one")
        #expect(table["abcdefgh-2-ijklmnop"]?.text == "two")
        #expect(table["abcdefgh-3-ijklmnop"] == nil)
        table["abcdefgh-1-ijklmnop"] = nil
        #expect(table["abcdefgh-2-ijklmnop"]?.text == "two")
        #expect(table.keys == ["abcdefgh-2-ijklmnop"])
    }

    @Test("short, long, empty and non-ASCII keys, and a key built at run time, are found")
    func keyShapes() {
        let keys = ["", "a", "id", "1234567", "12345678", "123456789", "pushappid_incoming_call", "clé", "ключ-значение-ключ", "🙂x"]
        var table = AccountValueTable()
        for (index, key) in keys.enumerated() { table[key] = value(String(index)) }
        for (index, key) in keys.enumerated() {
            let rebuilt = String(decoding: Array(key.utf8), as: UTF8.self)
            #expect(table[rebuilt]?.text == String(index), "key '\(key)'")
        }
        #expect(table["123456"] == nil)
        #expect(table["pushappid_incoming_cal"] == nil)
    }

    @Test("keys are equal as Strings are: canonically equivalent spellings are one key")
    func canonicalEquivalence() {
        var table = AccountValueTable()
        table["na\u{EF}ve"] = value("composed")
        #expect(table["nai\u{308}ve"]?.text == "composed")
        table["nai\u{308}ve"] = value("replaced")
        #expect(table.count == 1)
        // U+212A KELVIN SIGN is canonically K.
        table["\u{212A}ey"] = value("kelvin")
        #expect(table["Key"]?.text == "kelvin")
        table["Lock"] = value("ascii")
        #expect(table["Lock"]?.text == "ascii")
        #expect(table.contains("\u{212A}ey") && table.contains("Key") && !table.contains("key"))
    }

    @Test("a dictionary becomes a table in key order; a literal keeps its order")
    func fromDictionary() {
        let table = AccountValueTable(["b": value("2"), "a": value("1"), "c": value("3")])
        #expect(texts(table) == ["a=1", "b=2", "c=3"])
        let literal: AccountValueTable = ["z": value("26"), "y": value("25"), "z": value("last")]
        #expect(texts(literal) == ["z=last", "y=25"])
    }
}

extension AccountValueTableTests {
    @Test("a prepared key finds what its name finds")
    func preparedKeys() {
        var table = AccountValueTable()
        table["pushTokenReporterUrl"] = value("u")
        table["K"] = value("k")
        table["é"] = value("e")
        for name in ["pushTokenReporterUrl", "K", "\u{212A}", "é", "e\u{301}", "absent", ""] {
            let key = AccountValueTable.PreparedKey(name)
            #expect(table[key]?.text == table[name]?.text, "\(name)")
            #expect(table.contains(key) == table.contains(name), "\(name)")
        }
        #expect(table[AccountValueTable.PreparedKey("e\u{301}")]?.text == "e")
        #expect(!table.contains(AccountValueTable.PreparedKey("absent")))
    }
}

extension AccountValueTableTests {
    private func defaults() -> AccountValueTable {
        var table = AccountValueTable()
        table["pushappid"] = value("app")
        table["na\u{EF}ve"] = value("composed")
        table["pushTokenReporterUrl"] = value("https://a.example/")
        return table
    }

    @Test("a table over another reads its keys in their place, its own over them, and leaves the other as it was")
    func layered() {
        let base = defaults()
        var table = AccountValueTable(over: base)
        #expect(texts(table) == texts(base))
        #expect(table.count == 3 && table.hasSameKeys(as: base))
        table["selector"] = value("s1")
        table["pushappid"] = value("mine")
        // A canonically equivalent spelling sets the base's key, in its place and spelling.
        table["nai\u{308}ve"] = value("replaced")
        #expect(texts(table) == ["pushappid=mine", "na\u{EF}ve=replaced", "pushTokenReporterUrl=https://a.example/", "selector=s1"])
        #expect(table.count == 4)
        table["pushTokenReporterUrl"] = nil
        #expect(texts(table) == ["pushappid=mine", "na\u{EF}ve=replaced", "selector=s1"])
        #expect(table.count == 3)
        #expect(table["pushTokenReporterUrl"] == nil && !table.contains("pushTokenReporterUrl"))
        #expect(!table.containsValue { $0.text == "https://a.example/" } && table.containsValue { $0.text == "s1" })
        #expect(table.keys == ["pushappid", "na\u{EF}ve", "selector"])
        // Set again after its removal: back in the base's place.
        table["pushTokenReporterUrl"] = value("https://b.example/")
        #expect(texts(table) == ["pushappid=mine", "na\u{EF}ve=replaced", "pushTokenReporterUrl=https://b.example/", "selector=s1"])
        // A key of its own removed is gone.
        table["selector"] = nil
        #expect(table.count == 3 && table["selector"] == nil)
        #expect(texts(base) == ["pushappid=app", "na\u{EF}ve=composed", "pushTokenReporterUrl=https://a.example/"])
    }

    @Test("keys compare the same whether layered or flat, and differ where the layers hide or add one")
    func layeredKeys() {
        let base = defaults()
        var first = AccountValueTable(over: base)
        first["selector"] = value("s1")
        var second = AccountValueTable(over: base)
        second["selector"] = value("s2")
        second["pushappid"] = value("other")
        #expect(first.hasSameKeys(as: second) && second.hasSameKeys(as: first))
        var flat = AccountValueTable()
        for (key, value) in first { flat[key] = value }
        #expect(flat.hasSameKeys(as: first) && first.hasSameKeys(as: flat))
        var removed = AccountValueTable(over: base)
        removed["pushappid"] = nil
        removed["selector"] = value("s3")
        #expect(!removed.hasSameKeys(as: first) && !first.hasSameKeys(as: removed))
        // A table over a layered one holds the same, in the same order.
        var over = AccountValueTable(over: second)
        #expect(texts(over) == texts(second))
        over["x"] = value("1")
        #expect(texts(over) == texts(second) + ["x=1"])
    }
}
