import PushTransport

/// An Acrobits request as the agent keeps it until it is sent: its bytes packed one after the
/// other with the requests planned before it, in a block of memory of its own (see
/// ``RequestPacker``). Read back as a ``TransportRequest`` at each attempt.
///
/// The agent keeps a request for every subscription. As a `TransportRequest` in an object,
/// each was two blocks of glibc's heap (a 256-byte URL, a 128-byte object) among the small
/// blocks planning makes and frees: 38 MB at 100,000 subscriptions, which kept heap pages
/// resident however little else they held. Packed, they take about 230 bytes each, in blocks
/// mapped on their own and given back whole once no request in them is kept: the agent lets go
/// of delivered requests, and moves one it keeps for long (retrying) to a block of its own
/// (``SharedPayload``). The value is small enough to sit in a payload without a box of its own.
struct PackedRequest: Sendable {
    private let block: PackedBlock
    private let offset: UInt32
    private let count: UInt32

    fileprivate init(block: PackedBlock, offset: Int, count: Int) {
        self.block = block
        self.offset = UInt32(offset)
        self.count = UInt32(count)
    }

    /// Whether its block holds it alone.
    var isAlone: Bool { offset == 0 && Int(count) == block.capacity }

    /// The same request, its bytes copied into a block of their own.
    func alone() -> PackedRequest {
        let copy = PackedBlock(capacity: Int(count))
        copy.base.copyMemory(from: block.base + Int(offset), byteCount: Int(count))
        return PackedRequest(block: copy, offset: 0, count: Int(count))
    }

    /// The request, its timeout left to the sender.
    var request: TransportRequest {
        var reader = PackedReader(UnsafeRawBufferPointer(start: block.base + Int(offset), count: Int(count)))
        var request = TransportRequest(method: reader.text(), url: reader.text(), timeout: .zero)
        let headers = reader.number()
        request.headers.reserveCapacity(headers)
        for _ in 0..<headers { request.headers.append((name: reader.text(), value: reader.text())) }
        if reader.number() == 1 { request.body = reader.bytes() }
        if reader.number() == 1 { request.credentials = .init(username: reader.text(), password: reader.text()) }
        let secretHeaders = reader.number()
        for _ in 0..<secretHeaders { request.secretHeaders.insert(reader.text()) }
        return request
    }
}

/// Packs requests into blocks of memory: a planner keeps one. Copies of a planner (which plan
/// runs of accounts on several threads) each start a block of their own.
struct RequestPacker: Sendable {
    /// Mapped on its own by glibc (from 128 KB), so given back as soon as it is freed.
    static let blockSize = 256 << 10

    private var block: PackedBlock?
    private var used = 0
    /// Shared by copies of this packer, and only by them: a copy that finds it shared starts a
    /// block of its own, as two writers must never fill the same one.
    private var owner = Owner()
    /// Whether requests share blocks; else each has a block of its exact size (a cleanup read
    /// back from the state, made one at a time).
    private let shares: Bool

    private final class Owner: Sendable {}

    /// A packer whose requests share blocks (`shares`), or have one each.
    init(sharingBlocks shares: Bool = true) {
        self.shares = shares
    }

    mutating func pack(_ request: TransportRequest) -> PackedRequest {
        var size = PackedSize()
        size.add(request)
        if !isKnownUniquelyReferenced(&owner) {
            owner = Owner()
            block = nil
        }
        if !shares || size.bytes > Self.blockSize / 4 {
            // Alone in a block: a large request does not waste the rest of a shared one.
            let alone = PackedBlock(capacity: size.bytes)
            alone.write(request, at: 0, count: size.bytes)
            return PackedRequest(block: alone, offset: 0, count: size.bytes)
        }
        if block == nil || used + size.bytes > Self.blockSize {
            block = PackedBlock(capacity: Self.blockSize)
            used = 0
        }
        let offset = used
        block!.write(request, at: offset, count: size.bytes)
        used += size.bytes
        return PackedRequest(block: block!, offset: offset, count: size.bytes)
    }
}

/// A block of packed requests. Bytes are written once, before the request that holds them is
/// handed on, and only read after; a writer and readers never touch the same bytes.
private final class PackedBlock: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        base = UnsafeMutableRawPointer.allocate(byteCount: max(capacity, 1), alignment: 8)
    }

    deinit {
        base.deallocate()
    }

    func write(_ request: TransportRequest, at offset: Int, count: Int) {
        var writer = PackedWriter(UnsafeMutableRawBufferPointer(start: base + offset, count: count))
        writer.text(request.method)
        writer.text(request.url)
        writer.number(request.headers.count)
        for header in request.headers {
            writer.text(header.name)
            writer.text(header.value)
        }
        writer.number(request.body == nil ? 0 : 1)
        if let body = request.body { writer.bytes(body) }
        writer.number(request.credentials == nil ? 0 : 1)
        if let credentials = request.credentials {
            writer.text(credentials.username)
            writer.text(credentials.password)
        }
        writer.number(request.secretHeaders.count)
        for name in request.secretHeaders.sorted() { writer.text(name) }
        precondition(writer.offset == count, "a packed request is written as it was measured")
    }
}

/// The bytes a request packs to: each number 4 bytes, each text its length then its bytes.
private struct PackedSize {
    var bytes = 0

    mutating func add(_ request: TransportRequest) {
        text(request.method)
        text(request.url)
        bytes += 4
        for header in request.headers {
            text(header.name)
            text(header.value)
        }
        bytes += 4 + (request.body.map { 4 + $0.count } ?? 0)
        bytes += 4
        if let credentials = request.credentials {
            text(credentials.username)
            text(credentials.password)
        }
        bytes += 4
        for name in request.secretHeaders { text(name) }
    }

    private mutating func text(_ text: String) {
        bytes += 4 + text.utf8.count
    }
}

private struct PackedWriter {
    let buffer: UnsafeMutableRawBufferPointer
    var offset = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.buffer = buffer
    }

    mutating func number(_ value: Int) {
        buffer.storeBytes(of: UInt32(value), toByteOffset: offset, as: UInt32.self)
        offset += 4
    }

    mutating func text(_ text: String) {
        var text = text
        text.withUTF8 { bytes(UnsafeRawBufferPointer($0)) }
    }

    mutating func bytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { self.bytes($0) }
    }

    private mutating func bytes(_ bytes: UnsafeRawBufferPointer) {
        number(bytes.count)
        if let source = bytes.baseAddress {
            (buffer.baseAddress! + offset).copyMemory(from: source, byteCount: bytes.count)
        }
        offset += bytes.count
    }
}

private struct PackedReader {
    let buffer: UnsafeRawBufferPointer
    var offset = 0

    init(_ buffer: UnsafeRawBufferPointer) {
        self.buffer = buffer
    }

    mutating func number() -> Int {
        defer { offset += 4 }
        return Int(buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    mutating func text() -> String {
        let count = number()
        defer { offset += count }
        return String(decoding: UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count]), as: UTF8.self)
    }

    mutating func bytes() -> [UInt8] {
        let count = number()
        defer { offset += count }
        return Array(UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count]))
    }
}
