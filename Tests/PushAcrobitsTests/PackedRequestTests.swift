@testable import PushAcrobits
import Dispatch
import PushTransport
import Testing
import PushTestThreads

@Suite(.blockingThreads) struct PackedRequestTests {
    static func request(_ number: Int, bodySize: Int = 0) -> TransportRequest {
        var request = TransportRequest(
            method: number % 2 == 0 ? "GET" : "POST",
            url: "https://push.example.com/r/user-\(number)?t=caf\u{E9}&n=\(String(repeating: "x", count: number % 300))",
            headers: number % 3 == 0 ? [] : [(name: "X-Token", value: "s\u{0}cret-\(number)"), (name: "Accept", value: "")],
            body: bodySize > 0 || number % 5 == 0 ? Array(repeating: UInt8(number % 256), count: bodySize + number % 7) : nil,
            credentials: number % 4 == 0 ? .init(username: "user-\(number)", password: "") : nil)
        if number % 3 != 0 { request.secretHeaders = ["x-token", "accept"] }
        return request
    }

    static func same(_ read: TransportRequest, _ written: TransportRequest) -> Bool {
        read.method == written.method && read.url.utf8.elementsEqual(written.url.utf8)
            && read.headers.map(\.name) == written.headers.map(\.name) && read.headers.map(\.value) == written.headers.map(\.value)
            && read.body == written.body && read.credentials == written.credentials && read.secretHeaders == written.secretHeaders
    }

    @Test func everyRequestReadsBackAsWrittenAcrossBlocks() {
        var packer = RequestPacker()
        let written = (0..<3_000).map { Self.request($0) }
        let packed = written.map { packer.pack($0) }
        // 3,000 requests of up to 400 bytes fill more than one 256 KB block.
        #expect(written.reduce(0) { $0 + $1.url.utf8.count } > RequestPacker.blockSize)
        for (read, written) in zip(packed.map(\.request), written) {
            #expect(Self.same(read, written), "\(written.url)")
        }
    }

    @Test func aLargeRequestAndOneMadeAloneReadBackToo() {
        var shared = RequestPacker()
        let large = Self.request(1, bodySize: RequestPacker.blockSize)
        let small = Self.request(2)
        let packedLarge = shared.pack(large)
        let packedSmall = shared.pack(small)
        #expect(Self.same(packedLarge.request, large))
        #expect(Self.same(packedSmall.request, small))
        var alone = RequestPacker(sharingBlocks: false)
        #expect(Self.same(alone.pack(small).request, small))
        #expect(alone.pack(TransportRequest(method: "GET", url: "")).request.url == "")
    }

    @Test func copiesOfAPackerPackOnSeveralThreadsWithoutMixingTheirBytes() {
        var packer = RequestPacker()
        // Its block is started: copies must not go on filling it, each from the same place.
        let first = packer.pack(Self.request(7))
        let runs = 8
        nonisolated(unsafe) var results = [[PackedRequest]](repeating: [], count: runs)
        let original = packer
        results.withUnsafeMutableBufferPointer { buffer in
            nonisolated(unsafe) let buffer = buffer
            DispatchQueue.concurrentPerform(iterations: runs) { run in
                var copy = original
                buffer[run] = (0..<2_000).map { copy.pack(Self.request(run * 10_000 + $0)) }
            }
        }
        #expect(Self.same(first.request, Self.request(7)))
        for run in 0..<runs {
            for (index, packed) in results[run].enumerated() {
                #expect(Self.same(packed.request, Self.request(run * 10_000 + index)))
            }
        }
    }

    @Test func aPayloadNeedsNoBoxOfItsOwn() {
        // An existential holds three words inline; a larger payload is boxed, one more block of heap.
        #expect(MemoryLayout<AcrobitsPayload>.size <= 3 * MemoryLayout<Int>.size)
    }
}
