@testable import PushConfig
import Testing
import PushTestThreads
import PushSystem

/// The keys of the threads' heaps (``Allocator/keyThisThreadsHeap()``): what freeing them gives
/// back is measured by `make bench` (RSS over 10 reloads), not here.
@Suite(.blockingThreads) struct HeapKeysTests {
    static var blocks: [UnsafeMutableRawPointer] { (0..<7).map { UnsafeMutableRawPointer(bitPattern: 0x1000 * ($0 + 1))! } }

    @Test func theNewestAreKeptAndTheOldestGivenBackBeyondTheLimit() {
        let blocks = Self.blocks
        var keys = HeapKeys(kept: 4)
        var given: [UnsafeMutableRawPointer] = []
        for (thread, block) in blocks.enumerated() { given += keys.add(block, of: UInt(thread)) }
        #expect(given == Array(blocks.prefix(3)), "beyond the limit, the oldest go")
        #expect(keys.keys == Array(blocks.suffix(4)))
        #expect(keys.takeAll() == Array(blocks.suffix(4)))
        #expect(keys.keys.isEmpty)
        #expect(keys.add(blocks[0], of: 0).isEmpty)
    }

    @Test func aThreadKeysItsHeapOnceUntilTheKeysAreTaken() {
        let blocks = Self.blocks
        var keys = HeapKeys(kept: 4)
        #expect(keys.add(blocks[0], of: 1).isEmpty)
        #expect(keys.hasKey(of: 1) && !keys.hasKey(of: 2))
        #expect(keys.add(blocks[1], of: 1) == [blocks[1]], "its second key is given back at once")
        #expect(keys.add(blocks[2], of: 2).isEmpty)
        #expect(keys.takeAll() == [blocks[0], blocks[2]])
        #expect(!keys.hasKey(of: 1))
        #expect(keys.add(blocks[3], of: 1).isEmpty, "keyed again once the keys were taken")
    }
}
