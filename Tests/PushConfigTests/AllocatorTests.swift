@testable import PushConfig
import Testing

/// The keys of the threads' heaps (``Allocator/keyThisThreadsHeap()``): what freeing them gives
/// back is measured by `make bench` (RSS over 10 reloads), not here.
@Suite struct HeapKeysTests {
    @Test func theNewestAreKeptAndTheOldestGivenBackBeyondTheLimit() {
        let blocks = (0..<7).map { UnsafeMutableRawPointer(bitPattern: 0x1000 * ($0 + 1))! }
        var keys = HeapKeys(kept: 4)
        var given: [UnsafeMutableRawPointer] = []
        for block in blocks { given += keys.add(block) }
        #expect(given == Array(blocks.prefix(3)), "beyond the limit, the oldest go")
        #expect(keys.keys == Array(blocks.suffix(4)))
        #expect(keys.takeAll() == Array(blocks.suffix(4)))
        #expect(keys.keys.isEmpty)
        #expect(keys.add(blocks[0]).isEmpty)
    }
}
