@testable import PushConfig
import PushTestSupport
import Testing
import PushTestThreads
import PushSystem

@Suite("FileSystem.read", .blockingThreads)
struct FileSystemTests {
    @Test("a file is read whole, whatever its size says")
    func readsWholeFiles() throws {
        let directory = TemporaryDirectory()
        // Sizes around the 64 KiB chunk of a file that outgrew its stat size, and empty.
        for size in [0, 1, 65_535, 65_536, 65_537, 300_001] {
            let text = String((0..<size).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) })
            directory.write("f\(size).yaml", text)
            let bytes = try FileSystem.read(directory.path + "/f\(size).yaml").get()
            #expect(bytes == Array(text.utf8), "size \(size)")
        }
        // A file whose size is 0 to stat, but has content.
        let status = try FileSystem.read("/proc/self/status").get()
        #expect(String(decoding: status, as: UTF8.self).hasPrefix("Name:"))
    }

    @Test("the size limit holds for the read bytes, not only for the stat size")
    func limit() {
        let directory = TemporaryDirectory()
        directory.write("big.yaml", String(repeating: "x", count: 5_000))
        #expect(throws: FileError.self) { try FileSystem.read(directory.path + "/big.yaml", limit: 4_096).get() }
        // /proc files have a stat size of 0.
        #expect(throws: FileError.self) { try FileSystem.read("/proc/self/maps", limit: 1).get() }
    }
}
