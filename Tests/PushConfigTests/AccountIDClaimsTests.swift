@testable import PushConfig
import Testing
import PushTestThreads

@Suite(.blockingThreads) struct AccountIDClaimsTests {
    private let file = SourcePath("accounts.yaml")

    private func at(_ line: Int) -> SourcePosition { SourcePosition(line: line, column: 5) }

    @Test("a second claim of an id is refused with the first account's place; other ids are taken")
    func duplicates() {
        var claims = AccountIDClaims()
        #expect(claims.claim("alice", path: file, at: at(1)) == nil)
        #expect(claims.claim("bob", path: SourcePath("other.yaml"), at: at(2)) == nil)
        let owner = claims.claim("alice", path: SourcePath("other.yaml"), at: at(9))
        #expect(owner?.path.string == "accounts.yaml")
        #expect(owner?.position == at(1))
        #expect(claims.owner(of: "bob")?.path.string == "other.yaml")
        #expect(claims.owner(of: "carol") == nil)
        #expect(claims.owner(of: "alic") == nil)
        #expect(claims.owner(of: "") == nil)
        #expect(claims.count == 2)
    }

    @Test("ids are one id when their Strings are equal: canonically equivalent Unicode, not bytes alone",
          arguments: [("caf\u{E9}", "cafe\u{301}"), ("\u{212A}elvin", "Kelvin"), ("Kelvin", "\u{212A}elvin")])
    func canonicalEquivalence(_ first: String, _ second: String) {
        var claims = AccountIDClaims()
        #expect(claims.claim(first, path: file, at: at(1)) == nil)
        #expect(claims.claim(second, path: file, at: at(2))?.position == at(1))
        // And different ids stay different, ASCII or not.
        #expect(claims.claim(first + "x", path: file, at: at(3)) == nil)
        #expect(claims.claim("kelvin", path: file, at: at(4)) == nil)
    }

    @Test("every id is found again after the table grew many times, and none is taken twice")
    func growth() {
        var claims = AccountIDClaims()
        for index in 0..<20_000 {
            #expect(claims.claim("user\(index)", path: file, at: at(index + 1)) == nil)
        }
        #expect(claims.count == 20_000)
        var found = 0
        for index in 0..<20_000 where claims.owner(of: "user\(index)")?.position == at(index + 1) { found += 1 }
        #expect(found == 20_000)
        #expect(claims.claim("user19999", path: file, at: at(1))?.position == at(20_000))
        #expect(claims.owner(of: "user20000") == nil)
    }

    @Test("claims and checkpoints at random agree with a dictionary of the ids")
    func againstADictionary() {
        var claims = AccountIDClaims()
        var model: [String: Int] = [:]
        var order: [String] = []
        var random = XorShift(state: 0x2545_F491_4F6C_DD1D)
        func next() -> Int { random.next() }
        for round in 0..<300 {
            let checkpoint = claims.count
            for _ in 0..<(next() % 200) {
                // Few distinct ids, so that duplicates and long probe runs are common.
                let id = "id\(next() % 3_000)"
                let taken = claims.claim(id, path: file, at: at(round))
                #expect((taken == nil) == (model[id] == nil))
                if model[id] == nil {
                    model[id] = round
                    order.append(id)
                }
            }
            if next() % 3 == 0 {
                claims.removeClaims(after: checkpoint)
                for id in order[checkpoint...] { model[id] = nil }
                order.removeSubrange(checkpoint...)
            }
            #expect(claims.count == model.count)
        }
        var agreed = 0
        for index in 0..<3_000 where claims.owner(of: "id\(index)")?.position == model["id\(index)"].map(at) { agreed += 1 }
        #expect(agreed == 3_000)
        #expect(model.count > 500)
    }

    @Test("room asked for a little at a time grows by doubling, not by what is asked")
    func roomDoubles() {
        var array: [Int] = []
        var moves = 0
        for value in 0..<10_000 {
            let before = array.capacity
            array.reserveRoom(for: 3)
            if array.capacity != before { moves += 1 }
            array.append(value)
        }
        #expect(moves < 20, "\(moves)")
        #expect(array.count == 10_000)
    }

    @Test("going back to a checkpoint frees the ids taken since, and only those")
    func removeClaims() {
        var claims = AccountIDClaims()
        claims.reserveCapacity(forMore: 3)
        for (index, id) in ["a", "b", "\u{E9}"].enumerated() { #expect(claims.claim(id, path: file, at: at(index + 1)) == nil) }
        let checkpoint = claims.count
        for index in 0..<100 { #expect(claims.claim("later\(index)", path: file, at: at(10 + index)) == nil) }
        claims.removeClaims(after: checkpoint)
        #expect(claims.count == 3)
        #expect(claims.owner(of: "later0") == nil)
        #expect(claims.owner(of: "later99") == nil)
        #expect(claims.owner(of: "e\u{301}")?.position == at(3))
        #expect(claims.claim("later5", path: file, at: at(50)) == nil)
        #expect(claims.claim("b", path: file, at: at(60))?.position == at(2))
    }
}
